"""A protocol-2 benchmark's page and its record's block lead with every variant against dense per task and metric
(`analysis.benchmark.contrast_section`), with no rank: from a tiny benchmark run through the command line, and from a
made-up ledger with a failed seed and a layout cell that computes dense."""

import optuna
import pandas as pd
from optuna.trial import TrialState, create_trial
from test_benchmark import TINY, add, plan

from analysis.benchmark.contrast_section import compared, contrast_record, contrast_section
from analysis.benchmark.page import cell_rows
from analysis.report.render import Text
from analysis.results_doc import board_lines
from attnlab.cli import main
from experiments.benchmark import Ledger
from experiments.benchmark.ledger import FAILED, RESULT


def test_a_tiny_protocol_2_benchmark_page_leads_with_the_contrasts_against_dense_and_has_no_rank(tmp_path):
    out = tmp_path / "reports"
    assert main(["benchmark", "--variant", "dense,local:window=4", "--task", "passkey", "--seeds", "2",
                 "--screen-seeds", "2", "--lr-multiples", "1,3,9", "--capacity-widths", "none", "--capacity-scales",
                 "none", "--extend-grid", "0", *TINY, "--name", "tiny", "--runs-dir", str(tmp_path), "--out", str(out),
                 "--heartbeat-seconds", "1", "--quiet"]) == 0
    page = out / "benchmark-tiny"
    text = (page / "report.md").read_text()
    assert (page / "figures" / "contrasts-0.png").is_file() and (page / "figures" / "learning-curves.png").is_file()
    assert text.index("## Contrasts against dense") < text.index("## Cells")
    assert "passkey, curve area, each variant against dense paired by seed: " in text and "local:window=4" in text
    assert "## Leaderboard" not in text and "Verdicts" not in text
    for table in (page / "tables").glob("*.csv"):
        assert "rank" not in pd.read_csv(table).columns, table.name


def _result(test: float, reached: int | None, chance: float = 0.25) -> dict:
    """A protocol-2 confirmation result on the tiny passkey (20 steps, evaluations at 10 and 20)."""
    return {"status": "completed", "val_accuracy": test, "test_accuracy": test, "chance_accuracy": chance,
            "parameters": 1000, "steps": 20, "tokens": 3840, "wall_seconds": 1.0, "error": None,
            "target_accuracy": None, "target_step": None, "curve": [[10, 0.5, chance], [20, 1.0, test]],
            "events": {"0.9": reached, "0.99": None}, "budget_steps": 20, "curve_area": (chance + test) / 4,
            "accuracy_by_length": [{"length": 12, "accuracy": test}]}


def ledger_with_a_failed_seed(tmp_path) -> Ledger:
    """dense, local:window=4 (a window of 4 keys: part of the pairs at length 12) and local (its default window
    attends every pair there) on passkey, confirmed on seeds 2 to 4; local:window=4's seed 4 failed."""
    bench = plan(tmp_path, task="passkey", variants="dense,local:window=4,local", protocol=2, seeds=3,
                 interim_validation="all", capacity_widths="none", capacity_scales="none", extend_grid="0")
    study = optuna.create_study()
    for job in Ledger(bench, []).missing():
        add(study, job, TrialState.COMPLETE, val=0.5, test=0.5)
    tests = {"dense": [0.80, 0.82, 0.78], "local:window=4": [0.60, 0.61, None], "local": [0.8, 0.8, 0.8]}
    for job in Ledger(bench, study.get_trials()).missing():
        test = tests[job.variant][job.seed - 2]
        if test is None:
            add(study, job, TrialState.FAIL, outcome=FAILED)
        else:
            study.add_trial(create_trial(state=TrialState.COMPLETE, value=test, user_attrs={
                "job": job.to_attr(), RESULT: _result(test, 20 if test > 0.7 else None)}))
    return Ledger(bench, study.get_trials())


def test_a_failed_confirmation_seed_counts_at_chance_and_a_cell_that_computes_dense_is_left_out_with_its_reason(
        tmp_path):
    ledger = ledger_with_a_failed_seed(tmp_path)
    found = compared(ledger, cell_rows(ledger))
    scored = {(variant, seed): result for variant, _, seed, result in found.results}
    assert {variant for variant, _ in scored} == {"dense", "local:window=4"}  # local computes dense: left out
    failed = scored["local:window=4", 4]
    assert failed["test_accuracy"] == failed["chance_accuracy"] == 0.25 == failed["accuracy_by_length"][0]["accuracy"]
    assert failed["events"] == {"0.9": None, "0.99": None} and failed["budget_steps"] == 20
    assert [step for step, _, _ in failed["curve"]] == [10, 20] and failed["curve_area"] == 0.25 * 10 / 20
    assert any(note.startswith("local on passkey is left out of the contrasts: it attends 100% of the causal pairs")
               for note in found.notes)
    assert "1 confirmation seed diverged or failed and counts as a run that stayed at chance" in " ".join(found.notes)


def test_a_protocol_2_record_block_states_each_contrast_with_its_interval_p_and_tiers_and_no_rank(tmp_path):
    ledger = ledger_with_a_failed_seed(tmp_path)
    lines, table = contrast_record(ledger, cell_rows(ledger))
    test_accuracy = next(line for line in lines if line.startswith("passkey, test accuracy"))
    assert "no variant is told apart (local:window=4)" in test_accuracy
    assert "would have been detected with 80% power at the Holm level" in test_accuracy
    assert "Tiers: tier 1: dense, local:window=4." in test_accuracy  # then, for a task too noisy, its mark
    power = next(line for line in lines if line.startswith("Power: "))
    assert test_accuracy.endswith("Exploratory: too noisy for the protocol's aim (the power check).") == \
        power.endswith("within 24 seeds: passkey.")  # marked exactly where the power check sets the task aside
    assert set(table["metric"]) == {"test accuracy", "curve area", "accuracy at length 12", "steps to 0.9",
                                    "steps to 0.99"} and set(table["variant"]) == {"local:window=4"}
    for readme in (False, True):
        block = "\n".join(board_lines(ledger, readme))
        assert "passkey, test accuracy" in block and "local on passkey is left out" in block
        assert "rank" not in block.lower() and "Coverage of the layout cells compared: local:window=4" in block
        assert ("| Holm-adjusted p |" in block) is not readme  # the table on the results page only
        assert "In progress" not in block  # every job settled
    # Stopped part way (its last job not run): the block says so, and how many jobs have settled.
    trials = [trial for state in ledger.cells for job in state.jobs for trial in job.trials]
    total = sum(len(state.called) for state in ledger.cells)
    partial = Ledger(ledger.benchmark, trials[:-1])
    assert f"- In progress: {total - 1} of {total} jobs settled; the same attnlab benchmark command continues it." \
        in "\n".join(board_lines(partial))


def test_a_protocol_2_benchmark_of_dense_alone_says_there_is_nothing_to_contrast(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", protocol=2, seeds=2, interim_validation="all",
                 capacity_widths="none", capacity_scales="none", extend_grid="0")
    study = optuna.create_study()
    for job in Ledger(bench, []).missing():
        add(study, job, TrialState.COMPLETE, val=0.5, test=0.5)
    for job in Ledger(bench, study.get_trials()).missing():
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=0.8, user_attrs={
            "job": job.to_attr(), RESULT: _result(0.8, 20)}))
    ledger = Ledger(bench, study.get_trials())
    section, table = contrast_section(ledger, cell_rows(ledger))
    assert table.empty and "No contrast yet: no variant besides dense" in " ".join(
        block.text for block in section.blocks if isinstance(block, Text))
    lines, _ = contrast_record(ledger, cell_rows(ledger))
    assert lines[-1] == "No contrast: no variant besides dense has a settled confirmation run."
