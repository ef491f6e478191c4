"""A benchmark stage is one object: a stage written in a few lines (a second confirmation at twice the steps)
and added to a benchmark is planned by the ledger, counted by the estimate and shown on the page; the built-in
stages keep the job keys older storages hold, and each names a page section the page has."""

import dataclasses
import html

import optuna
import pandas as pd
from optuna.trial import TrialState
from test_benchmark import add, plan, settle_tuning_and_confirmation

from analysis.benchmark import page
from analysis.benchmark.stages import SECTIONS
from experiments.benchmark import STAGES, Job, Ledger, Stage, estimate
from experiments.benchmark.command import header
from experiments.benchmark.stages import CONFIRM


class LongerConfirmation(Stage):
    """The chosen learning rate trained again at twice the profile's steps, with the first confirmation seed."""

    name, title, page = "confirm-2x", "Confirmation at twice the steps", "seeds"

    def ready(self, state):
        return state.settled(CONFIRM)

    def jobs(self, benchmark, cell, lr=None):
        return [Job(self.name, cell.variant, cell.task, lr, benchmark.confirmation_seeds(cell.task)[0])]

    def changes(self, benchmark, job, own):
        return (("train.steps", 2 * own.train.steps),)

    def size(self, job):
        return "steps x2"


def with_longer_confirmation(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", capacity_widths="none", capacity_scales="none")
    return dataclasses.replace(bench, stages=(*bench.stages, LongerConfirmation()))


def test_a_stage_added_to_a_benchmark_is_planned_once_the_stage_it_waits_for_has_settled(tmp_path):
    bench = with_longer_confirmation(tmp_path)
    study = optuna.create_study()
    ledger = settle_tuning_and_confirmation(bench, study)  # tuning chose 0.001; confirmation's 2 seeds completed
    (job,) = ledger.missing()
    assert (job.stage, job.lr, job.seed) == ("confirm-2x", 0.001, 1)
    assert job.key == "confirm-2x/passkey/dense/lr=0.001/seed=1"
    config, own = bench.config(job), bench.config(Job("confirm", "dense", "passkey", 0.001, 1))
    assert config.train.steps == 2 * own.train.steps == 40 and config.model == own.model
    assert not ledger.complete
    add(study, job, TrialState.COMPLETE, val=0.8, test=0.7)
    ledger = Ledger(bench, study.get_trials())
    assert ledger.complete and ledger.counts()[("confirm-2x", "completed")] == 1
    assert "  confirm-2x: Confirmation at twice the steps" in header(bench, workers=1).splitlines()


def test_the_estimate_counts_an_added_stages_jobs_at_the_size_it_trains_at(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(estimate, "time_run", lambda config: estimate.Timing(0.5, 2.0))
    bench = with_longer_confirmation(tmp_path)
    assert estimate.run(bench, workers=1, quiet=True) == 0
    sizes = pd.read_csv(bench.folder / "estimate.csv").set_index("size")
    assert list(sizes.index) == ["own", "steps x2"]
    assert sizes.loc["own", ["tune jobs", "confirm jobs", "confirm-2x jobs"]].tolist() == [3, 2, 0]
    assert sizes.loc["steps x2", ["tune jobs", "confirm jobs", "confirm-2x jobs"]].tolist() == [0, 0, 1]
    # 40 steps at 0.5 s and 4 evaluations (every 10 steps) at 2 s, against 20 steps and 2 evaluations.
    assert sizes.loc["steps x2", "steps"] == 40 and sizes.loc["steps x2", "job seconds"] == 28.0
    stage_rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()
                  if line.split() and line.split()[0] in ("tune", "confirm", "confirm-2x")}
    assert stage_rows["confirm-2x"][0] == "1" and stage_rows["tune"][0] == "3"  # jobs per stage


def test_the_page_shows_an_added_stage_in_its_section(tmp_path):
    bench = with_longer_confirmation(tmp_path)
    study = optuna.create_study()
    (job,) = settle_tuning_and_confirmation(bench, study).missing()
    add(study, job, TrialState.COMPLETE, val=0.8, test=0.75)
    index, _ = page.write(Ledger(bench, study.get_trials()), tmp_path / "reports")
    table = pd.read_csv(index.parent / "tables" / "stage-confirm-2x.csv")
    assert table[["variant", "task", "test mean", "seeds completed"]].values.tolist() == [["dense", "passkey", 0.75, 1]]
    text = html.unescape(index.read_text())
    assert 'id="stage-confirm-2x"' in text and "Confirmation at twice the steps" in text
    assert "0.750 (n=1; test set " in text  # beside it, the Wilson interval of its fixed test set
    sections = [line for line in (index.parent / "report.md").read_text().splitlines() if line.startswith("## ")]
    assert sections[:5] == ["## Leaderboard", "## Tuning", "## Confirmation", "## Capacity",
                            "## Confirmation at twice the steps"]


def test_the_built_in_stages_keep_the_job_keys_older_storages_hold_and_have_their_page_sections(tmp_path):
    bench = plan(tmp_path, task="mqar,passkey", variants="dense", seeds=1, sets=["task.num_pairs=2"],
                 tiny=["task.seq_len=16", "task.test_size=32", "task.num_keys=4", "task.num_buckets=4",
                       "model.dim=32"], capacity_widths="2", capacity_scales="2")
    assert [stage.name for stage in bench.stages] == list(STAGES) == ["tune", "confirm", "capacity"]
    keys = [job.key for job in bench.planned_jobs() if job.task == "mqar"]
    assert keys == ["tune/mqar/dense/lr=0.0003/seed=0", "tune/mqar/dense/lr=0.001/seed=0",
                    "tune/mqar/dense/lr=0.003/seed=0", "confirm/mqar/dense/lr=0.001/seed=1",
                    "capacity/mqar/dense/lr=0.001/seed=1/width=64", "capacity/mqar/dense/lr=0.001/seed=1/num_pairs=4"]
    assert all(stage.page in SECTIONS for stage in STAGES.values())
