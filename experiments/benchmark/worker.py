"""A worker of a benchmark: it plans (queues the jobs the protocol calls for that no trial holds yet), takes
the next queued job, trains its run and writes the run's figures into the storage, until every job has
settled. Any number of workers, here (`--workers N`) or on other machines (the same command and storage),
share one storage: each job is trained once, by whichever worker takes it.

A worker that dies leaves its trial running; another worker finds it stale (its process is gone, or its
heartbeat is older than twice the interval), fails it and queues a retry that keeps the run id, so the
run resumes from its checkpoint (`experiments.sweep.storage`). SIGINT or SIGTERM checkpoint the run and
queue its job again at once; the same command continues.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from experiments import revisions
from experiments.benchmark.definition import Benchmark, Job
from experiments.benchmark.ledger import (
    DIVERGED,
    DUPLICATE,
    FAILED,
    IDLE,
    OUTCOME,
    RESULT,
    Ledger,
    curve_area,
    outdone,
    owns_its_job,
)
from experiments.benchmark.progress import JobBar, tally
from experiments.run import config as configs
from experiments.run.records import RecordError, RunRecord, Summary
from experiments.run.train import train
from experiments.sweep.liveness import machine
from experiments.sweep.objective import inherited_record
from experiments.sweep.storage import retry_callback


class JobEnded(Exception):
    """The trial ends without a value: its run diverged or failed, or the trial held no job of its own."""


class JobInterrupted(Exception):
    """SIGINT or SIGTERM stopped the job's run at a checkpoint; the job is queued again."""


# The fields of a job's run `Summary` that the storage keeps, under the Summary's own names.
RESULT_FIELDS = ("status", "error", "run_id", "variant_name", "val_accuracy", "test_accuracy", "chance_accuracy",
                 "parameters", "steps", "wall_seconds", "device", "device_name", "accuracy_by_distance",
                 "accuracy_by_length", "accuracy_by_split", "target_step", "target_seconds", "git_commit")


# Protocol 2's events: the validation accuracies whose first evaluation reaching them a job's result records.
EVENT_LEVELS = (0.9, 0.99)


def events(curve: list[list[Any]], levels: tuple[float, ...] = EVENT_LEVELS) -> dict[str, int | None]:
    """{"0.9": step, "0.99": step}: the step of the first evaluation of `curve` ([step, wall seconds, validation
    accuracy], ...) whose accuracy reaches each level (an accuracy at the level counts), None where none does (the
    event is censored at the run's last evaluation)."""
    return {f"{level:g}": next((step for step, _, accuracy in curve if accuracy is not None and accuracy >= level),
                               None) for level in levels}


def job_result(summary: Summary, config: configs.RunConfig, metrics: list[dict[str, Any]],
               protocol: int) -> dict[str, Any]:
    """The figures of a job's run that the storage keeps, so that the result needs no run folder: the
    `RESULT_FIELDS` of its summary, the tokens it trained on, its validation accuracy at each evaluation (`curve`:
    step, wall seconds, accuracy; interim evaluations read part of the set under protocol 1,
    `experiments.run.evaluation`); the target it stopped at is the benchmark's (`Benchmark.target`). Its `revisions` are
    those of the task and variant it trained on (`experiments.revisions`): the summary's, or, for a run that failed
    before writing one, this code's. Under protocol 2, where every evaluation reads the whole validation set and
    every run trains its whole budget, also its `events` (`events`), its `budget_steps` (train.steps) and its
    `curve_area` (`curve_area`)."""
    curve = [[line["step"], line["wall_seconds"], line.get("val_accuracy", line.get("test_accuracy"))]
             for line in metrics if line["kind"] == "eval"]  # a line from before validation sets: the test set's
    result = {**{name: getattr(summary, name) for name in RESULT_FIELDS},
              "revisions": summary.revisions or revisions.of_run(config.task, config.variant),
              "tokens": (summary.steps or 0) * config.train.batch_size * config.task_options.seq_len, "curve": curve}
    if protocol >= 2:
        result.update(events=events(curve), budget_steps=config.train.steps,
                      curve_area=curve_area(curve, config.train.steps))
    return result


def failed_summary(record: RunRecord, error: Exception) -> Summary:
    """The summary of a run that raised `error`: what the run wrote (train writes the steps it reached), as
    failed with the error."""
    try:
        written = record.read_summary()
    except RecordError:  # it failed before writing one
        written = Summary()
    return dataclasses.replace(written, run_id=record.run_id, status="failed", error=f"{type(error).__name__}: {error}")


class Objective:
    """One trial: its job, its run (new, or the run of the trial it retries), training, and the figures."""

    def __init__(self, benchmark: Benchmark, *, quiet: bool, should_stop: Callable[[int], bool]) -> None:
        self.benchmark = benchmark
        self.quiet = quiet
        self.should_stop = should_stop
        self.current: int | None = None  # the number of the trial it runs or ran last

    @staticmethod
    def _end(trial: optuna.Trial, outcome: str, why: str) -> None:
        trial.set_user_attr(OUTCOME, outcome)
        raise JobEnded(why)

    def __call__(self, trial: optuna.Trial) -> float:
        self.current = trial.number
        trial.set_user_attr("worker", {"machine": machine(), "pid": os.getpid()})
        job = Job.from_attr(trial.user_attrs.get("job"))
        if job is None:  # no job was queued when this worker asked for one: another took the last
            self._end(trial, IDLE, "no job was waiting")
        trials = trial.study.get_trials(deepcopy=False)
        if not owns_its_job(trials[trial.number], trials):
            self._end(trial, DUPLICATE, f"job {job.key} was queued twice; an earlier trial holds it")
        config = self.benchmark.config(job)
        record = inherited_record(self.benchmark.folder, trial, config)
        trial.set_user_attr("run_id", record.run_id)
        tags = {"benchmark": self.benchmark.name, "stage": job.stage, "job": job.key}
        beaten: dict[str, tuple[float, int]] = {}  # "by": the sibling that outdid the run, once one has

        def should_prune(step: int, accuracy: float) -> bool:
            """A tuning run that has not reached the target by a step where a sibling had can no longer be chosen."""
            target = self.benchmark.target
            by = target is not None and outdone(job, trial.study.get_trials(deepcopy=False), step, target)
            if by:
                beaten["by"] = by
            return bool(by)

        try:
            summary = train(config, record, quiet=self.quiet, should_stop=self.should_stop,
                            should_prune=should_prune, tags=tags)
        except Exception as error:  # the benchmark lists the error with the job and goes on
            summary = failed_summary(record, error)
        if summary.status == "interrupted":
            raise JobInterrupted(f"trial {trial.number} interrupted")
        result = job_result(summary, config, record.read_metrics(), self.benchmark.protocol)
        if summary.status == "pruned":  # its figures as of the evaluation where it stopped; the trial completes
            lr, step = beaten["by"]
            result["outdone"] = {"lr": lr, "step": step}
        trial.set_user_attr(RESULT, result)
        if summary.status not in ("completed", "pruned"):
            self._end(trial, DIVERGED if summary.status == "diverged" else FAILED, str(summary.error))
        return result["val_accuracy"]


def describe(job: Job) -> str:
    size = f", {job.axis} {job.value}" if job.axis is not None else ""
    return f"{job.stage} {job.variant} on {job.task}, lr {job.lr:g}, seed {job.seed}{size}"


def announce(benchmark: Benchmark, prefix: str) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Print each job's outcome as its trial ends, with how many of the benchmark's jobs have settled so far, out of
    those it calls for: the planned ones, or more once tuning has gone beyond the grid's edges."""
    planned = len(benchmark.planned_jobs())

    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        job = Job.from_attr(trial.user_attrs.get("job"))
        result = trial.user_attrs.get(RESULT) or {}
        if trial.state == TrialState.COMPLETE and "outdone" in result:
            outcome = (f"stopped at step {result['steps']}, validation accuracy {result['val_accuracy']:.3f}: lr "
                       f"{result['outdone']['lr']:g} reached the target by step {result['outdone']['step']}; run "
                       f"{result['run_id']}")
        elif trial.state == TrialState.COMPLETE:
            outcome = (f"validation accuracy {result['val_accuracy']:.3f}, test accuracy "
                       f"{result['test_accuracy']:.3f}; run {result['run_id']}")
        elif trial.user_attrs.get(OUTCOME) in (DIVERGED, FAILED):
            outcome = f"{trial.user_attrs[OUTCOME]}: {result.get('error')}; run {result.get('run_id')}"
        else:
            return  # a trial that held no job of its own: nothing ran
        settled, _, called = tally(Ledger(benchmark, study.get_trials(deepcopy=False)))
        tqdm.write(f"{prefix}{describe(job)}: {outcome} [{settled:,} of {max(planned, called):,} jobs settled]")

    return callback


def work(benchmark: Benchmark, study: optuna.Study, *, worker: int | None = None, quiet: bool = False,
         should_stop: Callable[[int], bool] = lambda step: False, leave: bool = False) -> int:
    """Plan and take jobs until every job has settled: 0; stopped by a signal: 130. With `leave`, 0 as soon as no
    job is left to take while the last ones are in flight with other workers (which plan what follows them), so
    that this worker can go on to another benchmark (`experiments.claims.lanes`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        objective = Objective(benchmark, quiet=quiet, should_stop=should_stop)
        callbacks = [announce(benchmark, "" if worker is None else f"[worker {worker}] ")]
        poll = max(0.5, min(5.0, benchmark.heartbeat_seconds / 2))
        bar = JobBar(benchmark, quiet=quiet)
        while not should_stop(0):
            optuna.storages.fail_stale_trials(study)
            ledger = Ledger(benchmark, study.get_trials(deepcopy=False))
            bar.update(ledger)
            if ledger.complete:
                bar.close()
                return 0
            for job in ledger.queued(ledger.missing()):
                study.enqueue_trial({}, user_attrs={"job": job.to_attr()})
            if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                if leave:
                    bar.close()
                    return 0
                time.sleep(poll)  # the last jobs are in flight: wait, and take over any whose worker dies
                continue
            try:
                study.optimize(objective, n_trials=1, catch=(JobEnded,), callbacks=callbacks)
            except (JobInterrupted, KeyboardInterrupt) as interrupted:
                # Queued again with its run id, so the next invocation resumes the run from its checkpoint.
                trial = study.get_trials(deepcopy=False)[objective.current]
                if trial.state == TrialState.FAIL and OUTCOME not in trial.user_attrs:
                    retry_callback()(study, trial)
                if isinstance(interrupted, KeyboardInterrupt):  # a second signal: stop now
                    raise
                print(f"benchmark {benchmark.name}: a run was interrupted; run the same command to continue",
                      file=sys.stderr)
                return 130
    return 130
