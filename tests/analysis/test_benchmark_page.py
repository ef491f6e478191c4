"""The benchmark's page: the leaderboard's means and 95% intervals over seeds, averages and ranks, the rows
over 10% larger than dense flagged, the bidirectional rows in a table of their own, which differences the paired
test tells apart, layout cells that compute dense neither ranked nor compared, skipped cells and failed jobs listed
with their reasons (escaped), the capacity table and figures, the protocol with the command, and the results that
are stale (a task or variant revised since, an earlier protocol) or that were stored without their revisions, from
a benchmark's storage."""

import html
import math
import statistics

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState, create_trial
from scipy import stats

from analysis import results_doc
from analysis.benchmark import page
from analysis.benchmark.stale import stale_lines
from common import schema
from common.schema import from_flags
from experiments import benchmark, revisions, tasks
from experiments.benchmark.ledger import OUTCOME, RESULT, Ledger
from experiments.schemas.benchmark import BenchmarkOptions
from experiments.tasks.base import QUICK_EVAL_SIZE

T_975_TWO_DEGREES = 4.302652729911275  # Student's t, 97.5th percentile, 2 degrees of freedom
Z_975 = 1.959963984540054  # the normal's 97.5th percentile
TEST_SIZE = QUICK_EVAL_SIZE  # the quick profile's test set, of passkey and of flip-flop
EVIL_ERROR = "<script>alert(1)</script>"
# Per cell: validation accuracy per learning rate (the grid's order), test accuracy per confirmation seed,
# and the model's parameters.
FIGURES = {
    ("dense", "passkey"): ([0.3, 0.9, 0.5], [0.68, 0.70, 0.72], 1000),
    ("local", "passkey"): ([0.2, 0.4, 0.3], [0.20, 0.22, 0.24], 1050),
    ("linformer", "passkey"): ([0.6, 0.5, 0.4], [0.6, 0.6, 0.8], 1200),
    ("dense", "flipflop"): ([0.5, 0.6, 0.7], [0.8, 0.8, 0.8], 1000),
    ("local", "flipflop"): ([0.5, 0.6, 0.7], [0.6, 0.6, None], 1000),  # its third seed fails
}


def wilson_text(mean, examples=TEST_SIZE):
    """'test set 0.64–0.75': the Wilson 95% interval of an accuracy over `examples`, by its formula."""
    centre = (mean + Z_975**2 / (2 * examples)) / (1 + Z_975**2 / examples)
    half = Z_975 * math.sqrt(mean * (1 - mean) / examples + Z_975**2 / (4 * examples**2)) / (1 + Z_975**2 / examples)
    return f"test set {centre - half:.2f}–{centre + half:.2f}"


def add(study, job, value, parameters, recorded=True):
    """A trial holding `job` with the figures a worker writes, the revisions today's code trains on among them (none
    where not `recorded`: a worker from before results kept them); a value of None: its run failed."""
    result = {**({"revisions": revisions.of_run(job.task, job.variant)} if recorded else {}),
              "git_commit": "c8d502593777d131e5fd5c3adef279ad92854ebc",
              "status": "completed", "val_accuracy": value, "test_accuracy": value, "chance": 0.25,
              "parameters": parameters, "steps": 20, "tokens": 3840, "wall_seconds": 1.5,
              "run_id": f"run-{len(study.trials)}", "error": None, "device": "cpu", "device_name": "",
              # evaluations at steps 10 and 20 (95% of the final accuracy, then all of it); flip-flop is also
              # evaluated at twice its training length
              "curve": [[10, 0.5, 0.95 * (value or 0)], [20, 1.0, value]],
              "accuracy_by_length": ([{"length": 64, "accuracy": value}, {"length": 128, "accuracy": (value or 0) / 2}]
                                     if job.task == "flipflop" else []),
              # passkey's near bucket at the run's accuracy, its far one at half of it; flip-flop's results are
              # of a worker from before the distance buckets were kept
              **({"accuracy_by_distance": [{"lo": 1, "hi": 8, "accuracy": value, "count": 12},
                                           {"lo": 9, "hi": 16, "accuracy": (value or 0) / 2, "count": 4},
                                           {"lo": 17, "hi": 24, "accuracy": None, "count": 0}]}
                 if job.task == "passkey" else {})}
    if value is None:
        result.update(status="failed", error=EVIL_ERROR)
        study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"job": job.to_attr(), RESULT: result,
                                                                         OUTCOME: "failed"}))
    else:
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=value,
                                     user_attrs={"job": job.to_attr(), RESULT: result}))


def prepare(tmp_path, variants, task_names, seeds, widths="none", scales="none"):
    """A benchmark under protocol 1 (one tuning seed, no target), whose leaderboard, ranks and verdicts these tests
    pin; protocol 2's page is tests/experiments/test_benchmark_contrasts.py's."""
    options = from_flags(BenchmarkOptions, {"variant": variants, "task": task_names, "seeds": seeds,
                                            "lr_multiples": "0.3,1,3", "capacity_widths": widths,
                                            "capacity_scales": scales, "name": "page", "heartbeat_seconds": 1,
                                            "extend_grid": "0", "protocol": 1, "target_accuracy": "none"})
    return benchmark.build(options, device="cpu", runs_dir=tmp_path)


def filled(bench, figures=FIGURES):
    """`bench`'s ledger once every tuning and confirmation job of each cell that runs has its `figures`."""
    study = optuna.create_study()
    for cell in bench.cells:
        if cell.skipped is not None:
            continue
        validation, test, parameters = figures[cell.variant, cell.task]
        for job, value in zip(bench.stage("tune").jobs(bench, cell), validation, strict=True):
            add(study, job, value, parameters)
        best = bench.learning_rates(cell)[validation.index(max(validation))]
        for job, value in zip(bench.stage("confirm").jobs(bench, cell, best), test, strict=True):
            add(study, job, value, parameters)
    return Ledger(bench, study.get_trials())


@pytest.fixture
def ledger(tmp_path):
    return filled(prepare(tmp_path, "dense,local,linformer", "passkey,flipflop", seeds=3))


def test_a_task_with_a_known_shortcut_is_named_on_the_leaderboard_with_its_shortcut(ledger, tmp_path, monkeypatch):
    monkeypatch.setattr(tasks.task_class("flipflop"), "known_shortcut", {"quick": "the <last> write's bit is always 1",
                                                                          "standard": "another profile's shortcut"})
    text = (page.write(ledger, tmp_path / "reports")[0]).read_text()
    assert ("Task flipflop has a known shortcut at quick, so its results there measure that as much as the "
            "dependency: the &lt;last&gt; write&#x27;s bit is always 1.") in text
    assert "another profile" not in text  # the page's profile's shortcut only
    assert "Task passkey has a known shortcut" not in text


def test_the_leaderboard_shows_the_mean_and_t_interval_over_seeds_the_average_and_the_rank(ledger, tmp_path):
    index, shown = page.write(ledger, tmp_path / "reports")
    assert index == tmp_path / "reports" / "benchmark-page" / "index.html"
    board = pd.read_csv(index.parent / "tables" / "leaderboard.csv").set_index("variant")
    half = T_975_TWO_DEGREES * 0.02 / math.sqrt(3)  # dense on passkey: 0.68, 0.70, 0.72
    rows = shown.set_index("variant")
    assert rows.loc["dense", "passkey"] == f"0.700 ± {half:.3f} (n=3; {wilson_text(0.70)})"
    # local's failed third seed counts, scored at flip-flop's chance (0.25): 0.6, 0.6, 0.25
    failed_half = T_975_TWO_DEGREES * statistics.stdev([0.6, 0.6, 0.25]) / math.sqrt(3)
    assert rows.loc["local", "flipflop"] == (f"{(0.6 + 0.6 + 0.25) / 3:.3f} ± {failed_half:.3f} (n=3; 1 of 3 "
                                             f"diverged or failed, scored at chance; {wilson_text(1.45 / 3)}), "
                                             "attends 46% of the causal pairs at length 64")
    assert rows.loc["linformer", "flipflop"] == "skipped"
    assert board.loc["dense", "average"] == pytest.approx((0.7 + 0.8) / 2)
    assert "linformer" not in board.index  # bidirectional: in a table of its own
    bidirectional = pd.read_csv(index.parent / "tables" / "leaderboard-bidirectional.csv").set_index("variant")
    assert bidirectional.loc["linformer", "tasks averaged"] == 1 and rows.loc["linformer", "rank"] == "–"
    # listed, not ranked: local for its failed seed, linformer for its skipped task (its rank is sized to dense's
    # parameters, so its size is comparable)
    assert list(shown["variant"]) == ["dense", "local", "linformer"] and list(shown["rank"]) == ["1", "–", "–"]
    assert rows.loc["dense", "not ranked because"] == ""
    assert rows.loc["local", "not ranked because"] == "1 of 6 seeds diverged or failed"
    assert rows.loc["linformer", "not ranked because"] == "skipped on flipflop"
    cells = pd.read_csv(index.parent / "tables" / "cells.csv").set_index(["variant", "task"])
    assert cells.loc[("dense", "passkey"), "best lr"] == 0.001  # the highest validation accuracy, not test
    assert cells.loc[("dense", "passkey"), "seeds"] == "1,2,3"


def test_each_cell_states_the_size_chosen_for_it_and_its_parameters_against_dense(ledger, tmp_path):
    index, shown = page.write(ledger, tmp_path)
    cells = pd.read_csv(index.parent / "tables" / "cells.csv", keep_default_na=False).set_index(["variant", "task"])
    sized = ledger.benchmark.cell("linformer", "passkey").size
    assert cells.loc[("linformer", "passkey"), "size"] == sized.shown == f"variant.rank={sized.changes[0][1]}"
    assert cells.loc[("dense", "passkey"), "size"] == "own"
    assert float(cells.loc[("linformer", "passkey"), "parameters"]) == sized.parameters
    assert abs(float(cells.loc[("linformer", "passkey"), "parameters / dense"]) - 1) <= 0.1
    assert set(shown["parameters not within 10% of dense's on"]) == {""}
    text = html.unescape((index.parent / "report.md").read_text())
    assert "each cell's model must lie within 10% of that count, both ways" in text


def test_skipped_cells_and_failed_jobs_are_listed_with_their_reasons_escaped(ledger, tmp_path):
    index, _ = page.write(ledger, tmp_path)
    problems = pd.read_csv(index.parent / "tables" / "problems.csv", dtype=str, keep_default_na=False)
    skipped, failed = problems.to_dict("records")
    assert (skipped["variant"], skipped["task"], skipped["state"]) == ("linformer", "flipflop", "skipped")
    assert "bidirectional" in skipped["reason"]
    assert (failed["variant"], failed["task"], failed["stage"], failed["state"], failed["reason"]) == \
        ("local", "flipflop", "confirm", "failed", EVIL_ERROR)
    for name in ("index.html", "report.md"):
        text = (index.parent / name).read_text()
        assert EVIL_ERROR not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_page_says_which_differences_the_paired_test_tells_apart_and_states_the_protocol(ledger, tmp_path):
    folder = page.write(ledger, tmp_path)[0].parent
    text = html.unescape((folder / "report.md").read_text())
    passkey = pd.read_csv(folder / "tables" / "verdicts-passkey.csv").set_index("variant")
    # local 0.20, 0.22, 0.24 against dense 0.68, 0.70, 0.72, seed by seed: the differences are all -0.48 (s_d = 0),
    # so only the test set's binomial error is left and the statistic is normal
    error = math.sqrt((0.22 * 0.78 + 0.70 * 0.30) / TEST_SIZE)
    assert passkey.loc["local", "compared with"] == "dense" and passkey.loc["local", "seeds paired"] == 3
    assert passkey.loc["local", "mean difference"] == pytest.approx(-0.48)
    assert passkey.loc["local", "p"] == pytest.approx(2 * stats.norm.sf(0.48 / error), rel=1e-6)
    assert passkey.loc["local", "interval low"] == pytest.approx(-0.48 - Z_975 * error)
    assert passkey.loc["local", "told apart"] == "yes"
    # linformer is bidirectional: ranked and compared only among the bidirectional rows, where it is alone
    assert "linformer" not in passkey.index and not (folder / "tables" / "verdicts-passkey-bidirectional.csv").exists()
    assert "they are not comparable with the causal rows above" in text
    assert "passkey: dense has the highest mean; compared with it seed by seed (1 row), the paired test tells local " \
           "apart (Holm-adjusted p < 0.05)." in text
    assert "wholly below" not in text and "overlap" not in text
    assert "paired t-test over the confirmation seeds" in text and "Holm-corrected" in text
    assert "Command: attnlab benchmark --variant dense,local,linformer --task passkey,flipflop" in text
    assert "3 fresh seeds (1, 2, 3)" in text and "validation accuracy is chosen" in text


def test_a_seed_that_failed_enters_the_pairing_scored_at_chance(ledger, tmp_path):
    folder = page.write(ledger, tmp_path)[0].parent
    flipflop = pd.read_csv(folder / "tables" / "verdicts-flipflop.csv").set_index("variant")
    # local's third seed failed: 0.6, 0.6, 0.25 (chance) against dense's 0.8, 0.8, 0.8, paired by seed
    local, dense = [0.6, 0.6, 0.25], [0.8, 0.8, 0.8]
    differences = [a - b for a, b in zip(local, dense, strict=True)]
    seeds_part = statistics.variance(differences) / 3
    mean_local = statistics.fmean(local)
    variance = seeds_part + (mean_local * (1 - mean_local) + 0.8 * 0.2) / TEST_SIZE
    df = 2 * variance**2 / seeds_part**2
    assert flipflop.loc["local", "seeds paired"] == 3
    assert flipflop.loc["local", "mean difference"] == pytest.approx(statistics.fmean(differences))
    assert flipflop.loc["local", "degrees of freedom"] == pytest.approx(df)
    expected = 2 * stats.t.sf(abs(statistics.fmean(differences)) / math.sqrt(variance), df)
    assert flipflop.loc["local", "p"] == pytest.approx(expected)
    assert flipflop.loc["local", "told apart"] == ("yes" if expected < 0.05 else "no")


def test_accuracy_against_length_and_the_speed_of_learning_come_from_the_confirmation_runs(ledger, tmp_path):
    tables = page.write(ledger, tmp_path)[0].parent / "tables"
    lengths = pd.read_csv(tables / "length.csv").set_index(["variant", "length"])
    assert lengths.loc[("dense", 128), "test accuracy"] == pytest.approx(0.4)  # flip-flop at twice its length
    assert lengths.loc[("dense", 128), "x training length"] == 2
    assert lengths.loc[("local", 64), "seeds"] == 2 and lengths.loc[("local", 64), "test accuracy"] == 0.6
    # The figure draws every seed's accuracy, each mean with its interval over the seeds.
    runs = pd.read_csv(tables / "length-seeds.csv")
    assert len(runs[(runs["variant"] == "local") & (runs["length"] == 64)]) == 2
    assert (tables.parent / "figures" / "length-seeds.png").is_file()
    speed = pd.read_csv(tables / "speed.csv").set_index(["variant", "task"])
    # passkey's best is dense's mean 0.70, so the threshold is 0.63: every dense seed reaches it at step 10
    # (95% of 0.68 and more), one linformer seed (0.8) at step 10, no local seed.
    assert speed.loc[("dense", "passkey"), "threshold"] == pytest.approx(0.63)
    assert speed.loc[("dense", "passkey"), "seeds reaching"] == "3 of 3"
    assert speed.loc[("dense", "passkey"), "steps to threshold"] == 10
    assert speed.loc[("dense", "passkey"), "wall seconds to threshold"] == 0.5
    assert speed.loc[("linformer", "passkey"), "seeds reaching"] == "1 of 3"
    assert speed.loc[("local", "passkey"), "seeds reaching"] == "0 of 3"
    # Every run trained its whole budget of 20 steps (no target): a seed that never reaches the threshold counts at
    # the end of its budget, so no seed is left out of the mean, a lower bound.
    assert speed.loc[("local", "passkey"), "steps to threshold"] == 20
    assert speed.loc[("linformer", "passkey"), "steps to threshold"] == pytest.approx((10 + 20 + 20) / 3)


def test_accuracy_against_distance_is_the_mean_over_the_confirmation_seeds_per_bucket(ledger, tmp_path):
    folder = page.write(ledger, tmp_path)[0].parent
    table = pd.read_csv(folder / "tables" / "distance.csv").set_index(["variant", "task", "lo"])
    assert table.loc[("dense", "passkey", 1), "test accuracy"] == pytest.approx(0.70)  # 0.68, 0.70, 0.72
    assert table.loc[("dense", "passkey", 9), "test accuracy"] == pytest.approx(0.35)
    assert table.loc[("dense", "passkey", 9), "distance"] == 12.5 and table.loc[("dense", "passkey", 9), "seeds"] == 3
    assert table.loc[("linformer", "passkey", 1), "test accuracy"] == pytest.approx(2.0 / 3)  # its best lr's seeds
    # A bucket no example falls in, and results that keep no buckets, add no row.
    assert 17 not in table.index.get_level_values("lo") and "flipflop" not in table.index.get_level_values("task")
    assert (folder / "figures" / "distance.png").is_file()


# Capacity: test accuracy per variant at each (axis, value) of mqar (quick: width 64, 8 pairs) and passkey (width
# 64, no capacity option); None: the run fails.
CAPACITY = {
    "dense": {("width", 32): 0.5, ("width", 128): 1.0, ("num_pairs", 16): 0.9},
    "local": {("width", 32): 0.2, ("width", 128): 0.4, ("num_pairs", 16): None},
}
OWN = {"dense": [0.8, 0.6], "local": [0.3, 0.1]}  # the confirmation runs' test accuracy, seed 1 first


@pytest.fixture
def capacity_ledger(tmp_path):
    bench = prepare(tmp_path, "dense,local", "mqar,passkey", seeds=2, widths="0.5,2", scales="2,4")
    study = optuna.create_study()
    for cell in bench.cells:
        for job in bench.stage("tune").jobs(bench, cell):
            add(study, job, 0.9 if job.lr == 0.001 else 0.5, 1000)
        for job, value in zip(bench.stage("confirm").jobs(bench, cell, 0.001), OWN[cell.variant], strict=True):
            add(study, job, value, 1000)
        for job in bench.stage("capacity").jobs(bench, cell, 0.001):
            add(study, job, CAPACITY[cell.variant][job.axis, job.value], 4000)
    return Ledger(bench, study.get_trials())


def test_the_capacity_table_has_each_cells_accuracy_at_each_width_and_task_size(capacity_ledger, tmp_path):
    folder = page.write(capacity_ledger, tmp_path)[0].parent
    table = pd.read_csv(folder / "tables" / "capacity.csv").set_index(["variant", "task", "axis", "value"])
    assert table.loc[("dense", "mqar", "width", 128), "test accuracy"] == 1.0
    assert table.loc[("dense", "mqar", "width", 128), "multiple"] == 2
    assert table.loc[("dense", "mqar", "num_pairs", 16), "test accuracy"] == 0.9
    # The cell's own size is its confirmation run with the capacity seed (seed 1), on both axes.
    assert table.loc[("dense", "mqar", "width", 64), "test accuracy"] == 0.8
    assert table.loc[("dense", "mqar", "num_pairs", 8), "test accuracy"] == 0.8
    assert table.loc[("local", "mqar", "num_pairs", 16), "seeds"] == 0  # its run failed
    assert math.isnan(table.loc[("local", "mqar", "num_pairs", 16), "test accuracy"])
    assert ("dense", "passkey", "num_pairs", 16) not in table.index  # passkey declares no capacity option
    assert table.loc[("local", "passkey", "width", 32), "test accuracy"] == 0.2
    assert math.isnan(table.loc[("dense", "mqar", "num_pairs", 32), "test accuracy"])  # x4: skipped
    for name in ("capacity-width", "capacity-count"):
        assert (folder / "figures" / f"{name}.png").is_file()
    count = pd.read_csv(folder / "tables" / "capacity-count.csv")
    assert set(count["task"]) == {"mqar"} and set(count["value"]) == {8, 16}
    text = html.unescape((folder / "index.html").read_text())
    assert "width x0.5" in text and "count x2" in text and "width 32, 64, 128; num_pairs 8, 16, 32" in text
    assert "Capacity: once a cell's confirmation has settled, its chosen learning rate trains again with seed 1" \
           in text and "mqar: num_pairs" in text


def test_capacity_points_skipped_or_failed_are_listed_with_their_size_and_reason(capacity_ledger, tmp_path):
    folder = page.write(capacity_ledger, tmp_path)[0].parent
    problems = pd.read_csv(folder / "tables" / "problems.csv", dtype=str, keep_default_na=False)
    capacity = problems[problems["stage"] == "capacity"].set_index(["variant", "size", "state"])
    skipped = capacity.loc[("dense", "num_pairs=32", "skipped"), "reason"]  # 32 pairs need 128 tokens, not 64
    assert "'seq_len' got 64" in skipped and "4 * num_pairs = 128" in skipped
    assert capacity.loc[("local", "num_pairs=16", "failed"), "reason"] == EVIL_ERROR
    assert set(capacity.index.get_level_values("variant")) == {"dense", "local"} and len(capacity) == 3
    cost = pd.read_csv(folder / "tables" / "cost.csv").set_index("variant")
    assert cost.loc["dense", "runs"] == 2 * (3 + 2) + 3 + 2  # tuning and confirmation, then capacity's runs
    cells = pd.read_csv(folder / "tables" / "cells.csv").set_index(["variant", "task"])
    # the cell's own size, not capacity's
    assert cells.loc[("dense", "mqar"), "parameters"] == capacity_ledger.benchmark.cell("dense", "mqar").size.parameters


def test_one_seed_per_cell_ranks_nothing_and_says_why(tmp_path):
    bench = prepare(tmp_path, "dense,local", "passkey", seeds=1)
    study = optuna.create_study()
    for cell in bench.cells:
        validation, test, parameters = FIGURES[cell.variant, cell.task]
        for job, value in zip(bench.stage("tune").jobs(bench, cell), validation, strict=True):
            add(study, job, value, parameters)
        best = bench.learning_rates(cell)[validation.index(max(validation))]
        (job,) = bench.stage("confirm").jobs(bench, cell, best)
        add(study, job, test[0], parameters)
    index, shown = page.write(Ledger(bench, study.get_trials()), tmp_path / "reports")
    assert list(shown["rank"]) == ["–", "–"]
    assert set(shown["not ranked because"]) == {"one seed on a task, so no interval to rank by (SEEDS=2 or more)"}
    assert "No row is ranked: one seed on a task, so no interval to rank by (SEEDS=2 or more)." in html.unescape(
        index.read_text())


def test_a_row_without_a_result_on_a_task_is_not_ranked_against_rows_that_have_every_task():
    cells = pd.DataFrame([
        {"variant": "dense", "task": "a", "status": "done", "test mean": 0.9, "seeds scored": 3, "seeds failed": 0},
        {"variant": "dense", "task": "b", "status": "done", "test mean": 0.5, "seeds scored": 3, "seeds failed": 0},
        {"variant": "local", "task": "a", "status": "done", "test mean": 0.95, "seeds scored": 3, "seeds failed": 0},
        {"variant": "local", "task": "b", "status": "pending", "test mean": math.nan, "seeds scored": 0,
         "seeds failed": 0}]).assign(coverage=[math.nan, math.nan, 0.4, math.nan])
    assert page.not_ranked(cells, ("a", "b")) == {"local": "no result on b"}
    assert page.not_ranked(cells.assign(**{"seeds failed": [0, 1, 0, 0]}), ("a", "b")) == {
        "dense": "1 of 6 seeds diverged or failed", "local": "no result on b"}


def test_a_layout_cell_attending_more_than_half_its_pairs_says_it_computes_dense_and_is_neither_ranked_nor_compared(
        tmp_path):
    # BigBird at quick (blocks of 16, a global and two random blocks) covers every key block of flip-flop's 64
    # positions, and 81% of passkey's 128; local's window of 32 attends 25% and 46% of them
    bigbird = "sparse:pattern=bigbird"
    figures = {**FIGURES, (bigbird, "passkey"): ([0.3, 0.9, 0.5], [0.68, 0.70, 0.71], 1000),
               (bigbird, "flipflop"): ([0.5, 0.6, 0.7], [0.8, 0.8, 0.8], 1000)}
    ledger = filled(prepare(tmp_path, f"dense,local,{bigbird}", "passkey,flipflop", seeds=3), figures)
    index, shown = page.write(ledger, tmp_path / "reports")
    rows = shown.set_index("variant")
    assert rows.loc[bigbird, "passkey"] == "near dense: attends 81% of the causal pairs at length 128"
    assert rows.loc[bigbird, "flipflop"] == "computes dense: attends 100% of the causal pairs at length 64"
    assert rows.loc["local", "passkey"].endswith("), attends 25% of the causal pairs at length 128")
    assert rows.loc["dense", "passkey"].endswith(")")  # no layout: no share stated
    assert rows.loc[bigbird, "rank"] == "–" and rows.loc[bigbird, "average"] == "–"
    assert rows.loc[bigbird, "not ranked because"] == ("dense or near dense on passkey, flipflop (its layout "
                                                       "attends more than 50% of the pairs there)")
    assert rows.loc["dense", "rank"] == "1"
    tables = index.parent / "tables"
    for task in ("passkey", "flipflop"):
        verdicts = pd.read_csv(tables / f"verdicts-{task}.csv")
        assert bigbird not in set(verdicts["variant"]) | set(verdicts["compared with"])
    cells = pd.read_csv(tables / "cells.csv").set_index(["variant", "task"])
    assert cells.loc[(bigbird, "flipflop"), "coverage"] == 1.0
    assert cells.loc[(bigbird, "passkey"), "coverage"] == pytest.approx(6720 / 8256)
    assert math.isnan(cells.loc[("dense", "passkey"), "coverage"])
    assert html.escape(page.DENSE_RULE) in index.read_text()

def leaderboard_cell(ledger, variant, task):
    """What the leaderboard shows for `variant` on `task`."""
    cells, shown, board = page.boards(ledger)
    (table,) = [block for block in page.leaderboard_blocks(ledger, cells, shown, board)
                if getattr(block, "name", "") == "leaderboard"]
    return table.frame.set_index("variant").loc[variant, task]


def test_a_cell_trained_before_its_variant_was_revised_is_marked_stale_on_the_page_and_in_the_readme(
        ledger, tmp_path, monkeypatch):
    monkeypatch.setattr(revisions, "PROTOCOL", 1)  # the ledger's protocol is current: only the revision is behind
    monkeypatch.setitem(revisions.REVISED[revisions.VARIANT], "local", ((2, "its window now ends at the query"),))
    reason = "variant local is at revision 2 (its window now ends at the query), the row at 1"
    line = f"Stale: local on passkey: {reason}; its results stand as measured then until a benchmark trains them again."
    assert line in html.unescape(page.write(ledger, tmp_path)[0].read_text())
    assert leaderboard_cell(ledger, "local", "passkey").endswith(" (stale)")
    assert not leaderboard_cell(ledger, "dense", "passkey").endswith(" (stale)")  # dense is at the revision it ran
    assert f"- {line}" in results_doc.board_lines(ledger, readme=True)
    assert stale_lines(ledger) == [line, line.replace("passkey", "flipflop")]


def test_a_benchmark_of_an_earlier_protocol_marks_every_result_stale_and_says_why(ledger, tmp_path, monkeypatch):
    monkeypatch.setattr(revisions, "PROTOCOLS", (*revisions.PROTOCOLS[:1], (2, "every run trains its whole budget")))
    monkeypatch.setattr(revisions, "PROTOCOL", 2)
    line = ("Stale: the benchmark's protocol is at version 2 (every run trains its whole budget), the record at 1; "
            "every result here was measured under protocol 1 and stands as measured then.")
    assert stale_lines(ledger) == [line]
    text = html.unescape(page.write(ledger, tmp_path)[0].read_text())
    assert line in text and "Protocol version 1: each cell tunes a grid of learning rates" in text
    assert all(leaderboard_cell(ledger, variant, task).endswith(" (stale)")
               for variant in ("dense", "local") for task in ("passkey", "flipflop"))
    assert f"- {line}" in results_doc.board_lines(ledger, readme=True)


def test_a_record_stored_before_protocols_and_revisions_reads_as_protocol_1_and_says_its_revisions_are_unknown(
        tmp_path, monkeypatch):
    monkeypatch.setattr(revisions, "PROTOCOL", 1)  # the protocol is current: only the revisions are unknown
    monkeypatch.setitem(revisions.REVISED[revisions.VARIANT], "local", ((2, "its window now ends at the query"),))
    bench = prepare(tmp_path, "dense,local", "passkey", seeds=1)
    stored = {key: value for key, value in schema.stored(bench).items() if key != "protocol"}
    older = benchmark.rebuild(stored, study_name=bench.study_name, device="cpu", storage_url=None,
                              runs_dir=tmp_path, heartbeat_seconds=1)
    study = optuna.create_study()
    for cell in older.cells:
        validation, test, parameters = FIGURES[cell.variant, cell.task]
        for job, value in zip(older.stage("tune").jobs(older, cell), validation, strict=True):
            add(study, job, value, parameters, recorded=False)
    ledger = Ledger(older, study.get_trials())
    assert older.protocol == 1
    # Not given revision 1, which would call local stale, nor today's, which would call it current: unknown.
    assert stale_lines(ledger) == [
        "Revisions not recorded: 6 of 6 results were stored before results kept the revisions of their task and "
        "variant; they trained at commit c8d502593777, whose experiments/revisions.py lists the revisions then; "
        "whether a revision since has left them stale is not known here."]
    assert not leaderboard_cell(ledger, "local", "passkey").endswith(" (stale)")


# Selective copying's rows at 4 and 8 tokens, and an MQAR row that differs from its task's profile in another option
# too: the test accuracy of each confirmation seed (seeds 1 and 2).
ROWS = {("dense", "selective_copy"): [0.8, 0.6], ("dense", "selective_copy:num_tokens=8"): [0.5, 0.3],
        ("local", "selective_copy"): [0.4, 0.2], ("local", "selective_copy:num_tokens=8"): [0.2, 0.1]}


def test_a_tasks_rows_that_differ_in_its_capacity_option_alone_draw_the_capacity_axis_with_every_seed(tmp_path):
    bench = prepare(tmp_path, "dense,local", "selective_copy,selective_copy:num_tokens=8,mqar", seeds=2)
    study = optuna.create_study()
    for cell in bench.cells:
        for job in bench.stage("tune").jobs(bench, cell):
            add(study, job, 0.9 if job.lr == 0.001 else 0.5, 1000)
        for job, value in zip(bench.stage("confirm").jobs(bench, cell, 0.001),
                              ROWS.get((cell.variant, cell.task), [0.7, 0.7]), strict=True):
            add(study, job, value, 1000)
    folder = page.write(Ledger(bench, study.get_trials()), tmp_path)[0].parent
    table = pd.read_csv(folder / "tables" / "capacity-rows.csv").set_index(["variant", "value"])
    assert set(table["task"]) == {"selective_copy"} and set(table["axis"]) == {"num_tokens"}  # MQAR has one row
    assert table.loc[("dense", 4), "test accuracy"] == pytest.approx(0.7) and table.loc[("dense", 8), "seeds"] == 2
    assert table.loc[("local", 8), "test accuracy"] == pytest.approx(0.15)
    runs = pd.read_csv(folder / "tables" / "capacity-rows-seeds.csv")
    assert len(runs) == 8 and (folder / "figures" / "capacity-rows-seeds.png").is_file()
