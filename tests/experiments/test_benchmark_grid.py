"""The learning-rate grid's edges: where a cell's best learning rate lies at an edge of the grid, tuning adds the
next multiple beyond it (the grid's own ratio: x9 above 0.3, 1, 3; x0.1 below), while the best stays at the edge,
up to --extend-grid of them; confirmation waits until tuning, extensions included, has settled; the page shows
the extended multiples and the cells still at an edge; a bad --extend-grid is a one-sentence error."""

import html

import optuna
import pandas as pd
import pytest
from command_line import refusal
from optuna.trial import TrialState
from test_benchmark import add, plan

from analysis.benchmark import page
from common import schema
from experiments import benchmark
from experiments.benchmark import Ledger

GRID = (0.0003, 0.001, 0.003)  # passkey's learning rate, 0.001, at 0.3, 1 and 3 times


def tuning(tmp_path, extend_grid="2"):
    return plan(tmp_path, variants="dense", task="passkey", capacity_widths="none", capacity_scales="none",
                extend_grid=extend_grid)


def tuned(bench, study, accuracy, outcome=None):
    """Each job the ledger calls for now, a tuning job, completed with validation accuracy `accuracy[lr]` (or ended
    with `outcome`); the ledger after."""
    for job in Ledger(bench, study.get_trials()).missing():
        assert job.stage == "tune"
        if outcome:
            add(study, job, TrialState.FAIL, outcome=outcome)
        else:
            add(study, job, TrialState.COMPLETE, val=accuracy[job.lr], test=0.5)
    return Ledger(bench, study.get_trials())


def test_a_best_at_the_top_edge_is_extended_while_it_stays_there_up_to_the_cap_and_confirmation_waits(tmp_path):
    bench = tuning(tmp_path)
    study = optuna.create_study()
    ledger = tuned(bench, study, dict(zip(GRID, (0.5, 0.6, 0.7), strict=True)))
    (job,) = ledger.missing()
    assert (job.stage, job.lr, job.seed) == ("tune", 0.009, 0)  # 3 x 3: the grid's ratio beyond its top
    assert ledger.cells[0].best_lr is None  # confirmation waits for the extension
    ledger = tuned(bench, study, {0.009: 0.8})  # better, and at the new edge: the next one
    assert [job.lr for job in ledger.missing()] == [0.027] and ledger.cells[0].best_lr is None
    ledger = tuned(bench, study, {0.027: 0.9})  # better still, at the edge, but two extensions is the cap
    assert ledger.cells[0].best_lr == 0.027 and ledger.cells[0].learning_rates == [*GRID, 0.009, 0.027]
    assert {(job.stage, job.lr) for job in ledger.missing()} == {("confirm", 0.027)}
    folder = page.write(ledger, tmp_path / "reports")[0].parent
    table = pd.read_csv(folder / "tables" / "tuning.csv", keep_default_na=False)
    assert list(table.columns) == ["variant", "task", "lr x0.3", "lr x1", "lr x3", "lr x9", "lr x27", "chosen lr",
                                   "at an edge"]
    assert (table.loc[0, "lr x27"], table.loc[0, "at an edge"]) == (0.9, "top")
    text = html.unescape((folder / "report.md").read_text())
    assert "The grid was extended beyond an edge where the best lay in 1 of 1 cells: dense on passkey (x9, x27)." \
        in text
    assert "lies at an edge of what was tuned in 1 of 1 cells (dense on passkey (top))" in text


def test_an_extension_that_is_no_better_settles_tuning_at_the_grids_best(tmp_path):
    bench = tuning(tmp_path)
    study = optuna.create_study()
    ledger = tuned(bench, study, dict(zip(GRID, (0.7, 0.6, 0.5), strict=True)))
    assert [job.lr for job in ledger.missing()] == [0.0001]  # 0.3 / 3: below the bottom edge
    ledger = tuned(bench, study, {}, outcome="diverged")  # settled, though not completed
    assert ledger.cells[0].best_lr == 0.0003  # no longer at an edge of what was tuned: no further extension
    assert {(job.stage, job.lr) for job in ledger.missing()} == {("confirm", 0.0003)}
    study = optuna.create_study()
    tuned(bench, study, dict(zip(GRID, (0.7, 0.6, 0.5), strict=True)))
    ledger = tuned(bench, study, {0.0001: 0.7})  # as good: the grid's comes first among equals
    assert ledger.cells[0].best_lr == 0.0003 and {job.stage for job in ledger.missing()} == {"confirm"}


def test_extend_grid_0_and_a_definition_stored_before_extensions_never_extend(tmp_path):
    bench = tuning(tmp_path, extend_grid="0")
    ledger = tuned(bench, optuna.create_study(), dict(zip(GRID, (0.5, 0.6, 0.7), strict=True)))
    assert ledger.cells[0].best_lr == 0.003 and {job.stage for job in ledger.missing()} == {"confirm"}
    assert "--extend-grid 0" in schema.command(bench)
    assert "the grid is not extended" in bench.stage("tune").protocol(bench)
    extended = tuning(tmp_path)
    stored = {key: value for key, value in schema.stored(extended).items() if key != "extend_grid"}
    older = benchmark.rebuild(stored, study_name=extended.study_name, device="cpu",
                              storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1)
    assert older.extend_grid == 0 and extended.extend_grid == 2 and "--extend-grid 2" in schema.command(extended)
    assert "x9 above, x0.1 below" in extended.stage("tune").protocol(extended)


@pytest.mark.parametrize("value, fragments", [
    ("x", ["extend-grid got 'x'", "an integer >= 0"]),
    ("-1", ["extend-grid got -1", "an integer >= 0", "(0: none)"]),
])
def test_a_bad_extend_grid_gets_one_sentence_and_exit_code_2(tmp_path, capsys, value, fragments):
    line = refusal(capsys, ["benchmark", "--variant", "dense", "--task", "passkey", "--runs-dir", str(tmp_path),
                            "--extend-grid", value])
    assert line.startswith("attnlab benchmark: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not any(tmp_path.iterdir())
