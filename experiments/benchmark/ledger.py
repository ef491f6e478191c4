"""What the storage says of each job and each cell: the benchmark's state, read from its study's trials by any
process on any machine, so that every worker plans alike and the result needs no run folder.

A job is a trial queued with the job as its `job` user attribute. Two processes that plan at the same instant
may both queue a job; the job then belongs to the earliest such trial (its owner), and a later copy, when
a worker takes it, ends at once as a `duplicate` without a run. When a worker dies, Optuna's heartbeat
callback fails its trial and queues a retry that keeps the user attributes (the job, the run id) and names
the failed trial (`failed_trial`); the job's trials are its owner and those retries, and its state is that
of the latest one.

A trial's figures are its `result` user attribute (written when its run ends: status, validation and test
accuracy, parameters, steps, tokens, wall time, run id); a trial that ends without a value says why in
`outcome`: diverged or failed (the job is settled), duplicate or idle (the trial held no job of its own).
"""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field

from optuna.trial import FrozenTrial, TrialState

from experiments.benchmark.definition import Benchmark, Cell, Job
from experiments.sweep.storage import MAX_RETRIES

WAITING, RUNNING, COMPLETED, DIVERGED, FAILED = "waiting", "running", "completed", "diverged", "failed"
SETTLED = (COMPLETED, DIVERGED, FAILED)
DUPLICATE, IDLE = "duplicate", "idle"
RESULT, OUTCOME = "result", "outcome"  # the trials' user attributes


def root(trial: FrozenTrial) -> int:
    """The number of the trial a retry retries (Optuna's callback keeps the first one), or its own number."""
    return trial.system_attrs.get("failed_trial", trial.number)


@dataclass
class JobState:
    """A job's trials (its owner, then its retries) and where it stands."""

    job: Job
    trials: list[FrozenTrial]
    state: str
    reason: str | None = None  # why it diverged or failed

    @property
    def result(self) -> dict | None:
        return self.trials[-1].user_attrs.get(RESULT)

    @property
    def attempts(self) -> int:
        return len(self.trials)


def _state(trials: list[FrozenTrial], now: datetime.datetime, grace_seconds: float) -> tuple[str, str | None]:
    latest = trials[-1]
    if latest.state in (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING):
        return {TrialState.COMPLETE: COMPLETED, TrialState.RUNNING: RUNNING, TrialState.WAITING: WAITING}[
            latest.state], None
    outcome, result = latest.user_attrs.get(OUTCOME), latest.user_attrs.get(RESULT) or {}
    if outcome in (DIVERGED, FAILED):
        return outcome, result.get("error") or outcome
    deaths = len(latest.system_attrs.get("retry_history", [])) + 1
    if deaths > MAX_RETRIES:
        return FAILED, f"its worker died {deaths} times"
    # Failed as stale a moment ago: the heartbeat callback is queueing its retry.
    ended = latest.datetime_complete or now
    if (now - ended).total_seconds() < grace_seconds:
        return WAITING, None
    return FAILED, "its worker stopped with an error (the worker's output says which) and did not queue it again"


def job_states(trials: list[FrozenTrial], grace_seconds: float) -> dict[str, JobState]:
    """Every queued job's state, by key."""
    now = datetime.datetime.now()
    by_key: dict[str, list[FrozenTrial]] = {}
    jobs: dict[str, Job] = {}
    for trial in sorted(trials, key=lambda trial: trial.number):
        key = _key(trial)
        if key is not None:
            by_key.setdefault(key, []).append(trial)
            jobs[key] = Job.from_attr(trial.user_attrs["job"])
    states = {}
    for key, keyed in by_key.items():
        originals = [trial.number for trial in keyed if "failed_trial" not in trial.system_attrs]
        if not originals:  # retries of a trial this study no longer holds: nothing to follow
            continue
        owner = min(originals)
        lineage = [trial for trial in keyed if root(trial) == owner]
        state, reason = _state(lineage, now, grace_seconds)
        states[key] = JobState(jobs[key], lineage, state, reason)
    return states


def _key(trial: FrozenTrial) -> str | None:
    job = Job.from_attr(trial.user_attrs.get("job"))
    return job.key if job is not None else None


def owns_its_job(trial: FrozenTrial, trials: list[FrozenTrial]) -> bool:
    """Whether `trial` runs its job (one of `trials`, the study's): it is the earliest trial queued with the
    job, or a retry of that one."""
    key = _key(trial)
    return root(trial) == min(other.number for other in trials
                              if "failed_trial" not in other.system_attrs and _key(other) == key)


@dataclass
class CellState:
    """A cell's tuning jobs (one per learning rate of its grid), confirmation jobs (one per fresh seed, at the
    best learning rate) and, once confirmation has settled, capacity jobs (one per capacity point and seed, at
    the best learning rate); None where a job is not queued yet."""

    cell: Cell
    tuning: list[JobState | None]
    confirmation: list[JobState | None]
    learning_rates: list[float]
    capacity: list[JobState | None] = field(default_factory=list)
    called: list[Job] = field(default_factory=list)  # the jobs the protocol calls for now, in stage order

    @property
    def tuned(self) -> bool:
        return all(job is not None and job.state in SETTLED for job in self.tuning)

    @property
    def best_lr(self) -> float | None:
        """The learning rate of highest validation accuracy (the first of the grid among equals), once every
        tuning job has settled; None before, or when none completed."""
        if not self.tuned:
            return None
        completed = [(job.result["val_accuracy"], -index, job.job.lr) for index, job in enumerate(self.tuning)
                     if job.state == COMPLETED]
        return max(completed)[2] if completed else None

    @property
    def confirmed(self) -> bool:
        """Whether confirmation has settled, which the capacity stage waits for (it reruns the confirmed
        configuration at other sizes, and its own size is confirmation's)."""
        return bool(self.confirmation) and all(job is not None and job.state in SETTLED for job in self.confirmation)

    @property
    def jobs(self) -> list[JobState]:
        return [job for job in (*self.tuning, *self.confirmation, *self.capacity) if job is not None]


class Ledger:
    """The benchmark's state: each cell's jobs, what is still to queue, and whether everything has settled."""

    def __init__(self, benchmark: Benchmark, trials: list[FrozenTrial]) -> None:
        self.benchmark = benchmark
        self.states = job_states(trials, grace_seconds=2.0 * benchmark.heartbeat_seconds)
        self.cells = [self._cell(cell) for cell in benchmark.cells]

    def _cell(self, cell: Cell) -> CellState:
        """The cell's state, stage by stage: its tuning jobs; once tuning has settled with a best learning rate,
        its confirmation jobs; once confirmation has settled, its capacity jobs."""
        if cell.skipped is not None:
            return CellState(cell, [], [], [])
        state = CellState(cell, [], [], self.benchmark.learning_rates(cell))
        state.tuning = self._call(state, self.benchmark.tuning_jobs(cell))
        if state.best_lr is not None:
            state.confirmation = self._call(state, self.benchmark.confirmation_jobs(cell, state.best_lr))
        if state.confirmed:
            state.capacity = self._call(state, self.benchmark.capacity_jobs(cell, state.best_lr))
        return state

    def _call(self, state: CellState, jobs: list[Job]) -> list[JobState | None]:
        """Add `jobs` to those the cell calls for; their states (None: not queued yet)."""
        state.called += jobs
        return [self.states.get(job.key) for job in jobs]

    def missing(self) -> list[Job]:
        """The jobs the protocol calls for now that no trial holds."""
        return [job for state in self.cells for job in state.called if job.key not in self.states]

    @property
    def complete(self) -> bool:
        """Whether every job the protocol calls for is queued and has settled."""
        return not self.missing() and all(job.state in SETTLED for state in self.cells for job in state.jobs)

    def counts(self) -> Counter:
        """Jobs by stage and state, e.g. {("tune", "completed"): 12, ...}."""
        return Counter((job.job.stage, job.state) for state in self.cells for job in state.jobs)

