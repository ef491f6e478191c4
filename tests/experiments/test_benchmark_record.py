"""The leaderboard of record: a settled benchmark's journal kept under docs/records/, from which the page, the
results document and the README's block are rebuilt without training, and from which the estimate predicts the
steps of runs that stop at the target."""

import dataclasses
import datetime
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis import results_doc
from attnlab.cli import main
from common.options import OptionError
from common.schema import from_flags
from experiments import benchmark, revisions
from experiments.benchmark import check, estimate, record
from experiments.benchmark.ledger import Ledger, busy_seconds
from experiments.benchmark.progress import JobBar
from experiments.schemas.benchmark import BenchmarkOptions
from variants import presets

TINY = ["task.seq_len=12", "task.num_keys=4", "task.num_distractors=4", "task.num_buckets=4", "task.test_size=32",
        "model.dim=32", "model.depth=1", "train.batch_size=16", "train.log_every=5", "train.eval_every=10",
        "train.checkpoint_every=10", "train.warmup_steps=2", "train.steps=30"]
WORDS = ["--variant", "dense,relative:kind=alibi", "--task", "passkey", "--seeds", "2", "--name", "tiny",
         "--capacity-widths", "none", "--capacity-scales", "none", "--extend-grid", "0", "--heartbeat-seconds", "1",
         "--protocol", "1", "--target-accuracy", "0.01", "--quiet",
         *(word for assignment in TINY for word in ("--set", assignment))]


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A tiny benchmark of protocol 1 (the one that stops at a target, whose record, estimate and page these tests
    pin) whose every run stops at its first evaluation (any accuracy reaches 0.01), run and kept."""
    folder = tmp_path_factory.mktemp("record")
    assert main(["benchmark", *WORDS, "--runs-dir", str(folder / "runs"), "--out", str(folder / "reports")]) == 0
    return folder, record.keep("tiny", folder / "runs", folder / "records")


def test_a_kept_record_holds_every_job_with_where_it_stopped_the_commit_and_the_revisions_it_ran_at(kept):
    _, path = kept
    assert path.name == "benchmark-tiny.journal"
    ledger = record.load(path)
    assert ledger.complete and ledger.benchmark.variants == ("dense", "relative:kind=alibi")
    results = [job.result for state in ledger.cells for job in state.jobs]
    assert len(results) == 2 * (3 + 2) and {result["steps"] for result in results} == {10}
    assert {result["target_step"] for result in results} == {10} and all(result["git_commit"] for result in results)
    assert ledger.benchmark.protocol == 1 and all(
        result["revisions"] == revisions.of_run("passkey", presets.base(variant)) for variant, result in zip(
            (state.cell.variant for state in ledger.cells for _ in state.jobs), results, strict=True))
    steps = record.earlier_steps(ledger)
    assert steps[("dense", "passkey", "own", "tune")] == [10, 10, 10] and len(steps) == 4
    assert all(runs == [10] * len(runs) for runs in steps.values())


def test_the_results_page_and_the_benchmark_page_are_rebuilt_from_the_record_without_training(kept, tmp_path):
    _, path = kept
    lines = "\n".join(results_doc.journal_section(path))
    for fragment in ("Benchmark of record: tiny", "records/benchmark-tiny.journal", "relative:kind=alibi",
                     "--target-accuracy 0.01", "- commits: ", "Leaderboard"):
        assert fragment in lines, fragment
    index, shown = benchmark_page_of(path, tmp_path)
    assert index.is_file() and list(shown["variant"]) == ["dense", "relative:kind=alibi"]
    assert not (tmp_path / "benchmark").exists()  # nothing trained, no run folder


def benchmark_page_of(path, out):
    from analysis.benchmark import page
    return page.write(record.load(path), out)


def tiny_plan(runs_dir, variants="dense,relative:kind=alibi", **flags):
    """The benchmark `attnlab benchmark` builds from these flags (and the tiny sizes) under protocol 1, on the CPU."""
    options = from_flags(BenchmarkOptions, {"variant": variants, "task": "passkey", "seeds": 2,
                                            "capacity_widths": "none", "capacity_scales": "none", "set": TINY,
                                            "heartbeat_seconds": 1, "extend_grid": "0", "protocol": 1, **flags})
    return benchmark.build(options, device="cpu", runs_dir=runs_dir)


def again(folder, target, lr_multiples=None, extend_grid="0"):
    """The kept benchmark under another name and folder, with the target `target`."""
    return tiny_plan(folder / "elsewhere", name="again", target_accuracy=target, lr_multiples=lr_multiples,
                     extend_grid=extend_grid)


def test_the_estimate_predicts_the_steps_of_runs_that_stop_at_the_target_from_the_record(kept, monkeypatch):
    folder, path = kept
    monkeypatch.setattr(estimate, "time_run", lambda config: estimate.Timing(0.5, 2.0))
    monkeypatch.setattr(record, "path_of", lambda name, records=None: path)
    sizes = estimate.estimate(again(folder, "0.01"), workers=1, quiet=True)
    assert set(sizes["tune steps"]) == {10.0} and set(sizes["confirm steps"]) == {10.0}  # not the profile's 30
    assert (sizes["predicted from"] == "tune: earlier runs of its stage; confirm: earlier runs of its stage").all()
    assert sizes["seconds"].sum() == pytest.approx(2 * (3 + 2) * (10 * 0.5 + 1 * 2.0))
    assert set(estimate.estimate(again(folder, "0.5"), workers=1, quiet=True)["tune steps"]) == {30.0}  # other target
    assert set(estimate.estimate(again(folder, "none"), workers=1, quiet=True)["tune steps"]) == {30.0}


def test_a_cell_the_record_cannot_replay_counts_half_the_tuning_the_grid_may_extend_by(kept, monkeypatch):
    folder, path = kept
    monkeypatch.setattr(estimate, "time_run", lambda config: estimate.Timing(0.5, 2.0))
    monkeypatch.setattr(record, "path_of", lambda name, records=None: path)
    sizes = estimate.estimate(again(folder, "0.01", "1,3,27", extend_grid="3"), workers=1, quiet=True)
    assert sizes["beyond the grid unknown"].all()  # the record never ran x27: where each cell's best lies is unknown
    assert list(sizes["tune jobs beyond the grid"]) == [2, 2] and list(sizes["tune jobs"]) == [3 + 2, 3 + 2]
    printed = estimate.summary(sizes, again(folder, "0.01", "1,3,27", extend_grid="3"), 1)
    assert "2 cells' grids hold learning rates the record never ran" in printed
    # Its own grid: every cell ties at the first learning rate, the bottom edge, and extends below it, to a
    # learning rate the record never ran: the larger of the one it calls for and half of 3, rounded up.
    extended = estimate.estimate(again(folder, "0.01", extend_grid="3"), workers=1, quiet=True)
    assert extended["beyond the grid unknown"].all() and list(extended["tune jobs beyond the grid"]) == [2, 2]
    replayed = estimate.estimate(again(folder, "0.01"), workers=1, quiet=True)
    assert not replayed["beyond the grid unknown"].any() and list(replayed["tune jobs"]) == [3, 3]


def test_without_a_record_every_cell_counts_half_the_tuning_the_grid_may_extend_by(kept, tmp_path, monkeypatch):
    folder, _ = kept
    monkeypatch.setattr(estimate, "time_run", lambda config: estimate.Timing(0.5, 2.0))
    monkeypatch.setattr(record, "path_of", lambda name, records=None: tmp_path / "no-such-record.journal")
    sizes = estimate.estimate(again(folder, "0.01", extend_grid="3"), workers=1, quiet=True)
    assert sizes["beyond the grid unknown"].all() and list(sizes["tune jobs"]) == [3 + 2, 3 + 2]
    assert set(sizes["tune steps"]) == {30.0}  # no earlier run: the profile's steps


def test_sizes_are_timed_side_by_side_by_as_many_processes_as_the_benchmark_has_workers(kept):
    folder, _ = kept
    configs = [again(folder, "none").config(job) for job in again(folder, "none").planned_jobs()[:3]]
    parallel = estimate.measured(configs, workers=2, device="cpu", desc="timing", quiet=True)
    assert [error for _, error in parallel] == [None] * 3
    assert all(0 < timing.step_seconds < 60 for timing, _ in parallel)
    broken = dataclasses.replace(configs[0], variant="no-such-variant")
    (timing, error), _ = estimate.measured([broken, configs[1]], workers=2, device="cpu", desc="timing", quiet=True)
    assert math.isnan(timing.step_seconds) and "no-such-variant" in error  # its jobs would fail alike


def test_only_a_settled_benchmark_is_kept_and_a_file_that_is_no_record_is_refused(tmp_path):
    with pytest.raises(OptionError, match="'missing' has no storage"):
        record.keep("missing", tmp_path, tmp_path / "records")
    broken = tmp_path / "benchmark-broken.journal"
    broken.write_text("not a journal\n")
    with pytest.raises(OptionError, match="benchmark-broken.journal line 1 is not one of Optuna's records"):
        record.load(broken)


def test_a_record_in_progress_is_kept_apart_and_read_by_no_page(kept, tmp_path):
    _, journal = kept
    records = tmp_path / "records"
    (records / "in-progress").mkdir(parents=True)
    (records / "in-progress" / journal.name).write_bytes(journal.read_bytes())  # a journal still growing
    (records / "in-progress" / "benchmark-estimate-more-seeds.csv").write_text("what,jobs,hours\n")
    assert record.records(records) == []
    docs = Path(__file__).resolve().parents[2] / "docs"
    (tmp_path / "calibration.csv").write_bytes((docs / "calibration.csv").read_bytes())
    assert "in-progress" not in results_doc.page(tmp_path)  # docs/results.md lists no record of it
    (records / journal.name).write_bytes(journal.read_bytes())
    assert record.records(records) == [records / journal.name]


def test_a_record_whose_last_line_was_cut_is_read_up_to_its_last_whole_line(kept, tmp_path, capsys):
    _, path = kept
    torn = b'{"op_code":6,"worker_id":"9f1c","trial_id":3,"sta'  # a write cut short by a full disk
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes() + torn)
    assert record.load(copy).complete
    (aside,) = tmp_path.glob(f"{path.name}.torn-*")
    assert aside.read_bytes() == torn and copy.read_bytes() == path.read_bytes()
    assert f"its last {len(torn)} bytes are set aside in {aside}" in capsys.readouterr().err


def test_attnlab_results_keeps_a_benchmark_and_names_what_it_wrote(kept, tmp_path, monkeypatch, capsys):
    folder, _ = kept
    monkeypatch.setattr(results_doc, "write", lambda: Path("docs/results.md"))
    monkeypatch.setattr(results_doc.reproduce, "write", lambda out: out / "reproductions" / "index.html")
    monkeypatch.setattr(record, "RECORDS", tmp_path / "records")
    (tmp_path / "records").mkdir()  # the checkout's records folder, where `results` runs
    monkeypatch.setattr(record, "records", lambda folder=None: [])  # no page to rebuild here
    assert main(["results", "--keep", "tiny", "--runs-dir", str(folder / "runs"), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert f"kept {tmp_path / 'records' / 'benchmark-tiny.journal'}" in printed
    assert (tmp_path / "records" / "benchmark-tiny.journal").is_file()


def test_the_job_bar_counts_settled_running_and_left_and_the_hours_the_estimate_leaves(kept, tmp_path):
    folder, path = kept
    plan = again(tmp_path, "0.01")
    plan.folder.mkdir(parents=True)
    pd.DataFrame({"variant": ["dense", "relative:kind=alibi"], "task": ["passkey"] * 2, "size": ["own"] * 2,
                  "job seconds": [360.0, 720.0]}).to_csv(plan.folder / "estimate.csv", index=False)
    bar = JobBar(plan, quiet=False)
    bar.update(Ledger(plan, []))
    assert (bar.bar.n, bar.bar.total) == (0, 10)
    assert bar.bar.postfix == "running=0, left=10, estimate left=1.5 h of runs"  # 5 jobs x 0.1 h + 5 x 0.2 h
    done = record.load(path)
    bar.update(Ledger(plan, [trial for state in done.states.values() for trial in state.trials]))
    assert bar.bar.n == 10 and bar.bar.postfix == "running=0, left=0, estimate left=0.0 h of runs"
    bar.close()


def sizes_before(steps=0.5, interim=2.0, last=3.0):
    """An estimate made before the tiny benchmark ran: its two sizes, with the timings given."""
    return pd.DataFrame({"variant": ["dense", "relative:kind=alibi"], "task": ["passkey"] * 2, "size": ["own"] * 2,
                         "step seconds": [steps] * 2, "eval seconds": [interim] * 2, "last eval seconds": [last] * 2,
                         "seconds": [100.0, 120.0]})


def test_the_estimate_check_sets_the_estimate_made_before_the_run_against_what_each_job_took(kept):
    _, path = kept
    ledger = record.load(path)
    frame = check.compare(ledger.benchmark, ledger, sizes_before(), workers=2).set_index("what")
    every = frame.loc["every job"]
    results = [job.result for state in ledger.cells for job in state.jobs]
    # Each run stopped at step 10, its only evaluation (so its last): 10 x 0.5 s + 3 s, at the estimate's timings.
    assert every["runs measured"] == 10 and every["at the steps each run took (s)"] == 10 * (10 * 0.5 + 3.0)
    assert every["estimated (s)"] == 220 and every["measured (s)"] == round(sum(r["wall_seconds"] for r in results))
    assert frame.loc["variant dense", "runs measured"] == 5 and frame.loc["variant dense", "estimated (s)"] == 100
    wall = frame.loc["wall time with 2 workers"]
    assert wall["estimated (s)"] == 110 and wall["measured (s)"] > 0
    assert set(frame["source"]) == {f"written by the command from {check.BEFORE} and the benchmark's storage"}


def test_the_estimate_check_needs_the_estimate_kept_before_the_run_and_keeps_only_that_one(kept, tmp_path, capsys):
    folder, _ = kept
    words = [*WORDS, "--runs-dir", str(folder / "runs"), "--estimate-check"]
    assert main(["benchmark", *words]) == 2
    assert "has no estimate from before it ran" in capsys.readouterr().err
    ran = folder / "runs" / "benchmark" / "tiny"
    sizes_before().to_csv(ran / "estimate.csv", index=False)
    fresh = again(tmp_path, "0.01")  # a benchmark that has not started: its estimate is kept
    fresh.folder.mkdir(parents=True)
    sizes_before().to_csv(fresh.folder / "estimate.csv", index=False)
    check.keep_estimate(fresh)
    assert (fresh.folder / check.BEFORE).read_text() == (fresh.folder / "estimate.csv").read_text()
    plan = tiny_plan(folder / "runs", name="tiny", target_accuracy="0.01")
    check.keep_estimate(plan)  # it has run: an estimate made now is not the one from before
    assert not (ran / check.BEFORE).exists()
    sizes_before().to_csv(ran / check.BEFORE, index=False)
    assert main(["benchmark", *words]) == 0
    assert "every job" in capsys.readouterr().out and (ran / "estimate-check.csv").is_file()


def test_the_readme_block_shows_the_record_s_leaderboard_and_a_sentence_per_task_not_the_verdict_tables(kept,
                                                                                                      monkeypatch):
    _, path = kept
    monkeypatch.setattr(results_doc, "HEADLINE_RECORD", "tiny")
    block = results_doc.headline(path.parent.parent)  # records under <folder>/records, as docs/records
    assert "| variant | passkey" in block and "\n- passkey: " in block and "has the highest mean" in block
    assert "Verdicts on passkey" not in block and "- command: `attnlab benchmark" in block
    assert "parameters" not in block.split("| variant |")[1].splitlines()[0]  # the page keeps the parameters
    assert "hours (while at least one of its jobs ran)" in block
    assert "Verdicts on passkey" in "\n".join(results_doc.journal_section(path))  # the results page keeps them


def test_the_wall_time_is_the_union_of_the_jobs_spans_so_a_pause_between_stop_and_resume_is_left_out():
    at = datetime.datetime(2026, 1, 1)
    def span(start, end):
        return at + datetime.timedelta(seconds=start), at + datetime.timedelta(seconds=end)
    # two workers overlap over 0..15, a job inside another counts nothing more, then an hour's pause, then 10 s
    spans = [span(0, 10), span(5, 15), span(6, 7), span(3600, 3610), (at, None)]
    assert busy_seconds(spans) == 25.0
    assert busy_seconds([]) == 0.0


def test_one_learning_rate_is_stated_as_untuned_where_the_benchmark_states_its_tuning(tmp_path):
    from experiments.benchmark.stages import STAGES

    plan = tiny_plan(tmp_path, variants="dense", name="one", lr_multiples="1", target_accuracy="0.01")
    assert STAGES["tune"].header(plan) == ["tuning: one learning rate, 1.0 x each task's, seed 0: nothing to choose"]
    assert "nothing is chosen" in STAGES["tune"].protocol(plan)
