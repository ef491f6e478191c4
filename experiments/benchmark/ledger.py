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
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from experiments.benchmark.definition import Benchmark, Cell
from experiments.benchmark.stages import CAPACITY, CONFIRM, TUNE, Job
from experiments.sweep.storage import MAX_RETRIES

WAITING, RUNNING, COMPLETED, DIVERGED, FAILED = "waiting", "running", "completed", "diverged", "failed"
SETTLED = (COMPLETED, DIVERGED, FAILED)
DUPLICATE, IDLE = "duplicate", "idle"
RESULT, OUTCOME = "result", "outcome"  # the trials' user attributes
RENAMED_RESULT_KEYS = {"chance": "chance_accuracy"}  # storages written before results took the Summary's names


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
        """The stored figures of its run (`worker.job_result`), under today's names."""
        result = self.trials[-1].user_attrs.get(RESULT)
        return {RENAMED_RESULT_KEYS.get(key, key): value for key, value in result.items()} if result else result

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


def _tuning_score(result: dict[str, Any], target: float | None) -> tuple[float, float]:
    """(validation accuracy, how fast it came) of a tuning run. Under a `target` (the benchmark's), minus the steps to
    it: the accuracy counts up to the target (what a run reached past it was not measured further), and a run that
    never reached it counts all its steps; so among runs at the target the fewest steps to it win, and a run that
    reached it in full by step s beats every run not at it by s, whatever that run reaches later (`outdone`). Without a
    target, the area under its learning curve (`worker.curve_area`; 0 for a result stored without one), which
    separates runs of equal accuracy only."""
    if target is None:
        return result["val_accuracy"], result.get("curve_area") or 0.0
    return min(result["val_accuracy"], target), -(result.get("target_step") or result["steps"])


def at_target(result: dict[str, Any], target: float | None) -> int | None:
    """The step where a run stopped at the benchmark's `target` with its whole validation set there (what scores
    the most `_tuning_score` gives, at that step); None where it did not, or there is no target."""
    step = result.get("target_step")
    return step if step is not None and target is not None and result["val_accuracy"] >= target else None


def outdone(job: Job, trials: list[FrozenTrial], step: int, target: float | None) -> tuple[float, int] | None:
    """(learning rate, step) of the tuning run of `job`'s cell at another learning rate that stopped at `target`
    soonest, at or before `step`, with its whole validation set at the target; None when none has. A tuning run of
    the cell that is not at the target by `step` can then no longer be chosen (`_tuning_score`), whatever it would
    reach later: the worker stops it there. Runs of other stages compete with nothing: None."""
    if job.stage != TUNE:
        return None
    reached = []
    for trial in trials:
        other, result = Job.from_attr(trial.user_attrs.get("job")), trial.user_attrs.get(RESULT) or {}
        if trial.state != TrialState.COMPLETE or other is None or other.stage != TUNE or other.lr == job.lr \
                or (other.variant, other.task) != (job.variant, job.task):
            continue
        if (reached_at := at_target(result, target)) is not None and reached_at <= step:
            reached.append((reached_at, other.lr))
    return (min(reached)[1], min(reached)[0]) if reached else None


def mean_validation(jobs: list[JobState | None]) -> float | None:
    """The mean validation accuracy of one learning rate's tuning jobs (one per tuning seed) where every one has
    completed; else None."""
    if not all(job is not None and job.state == COMPLETED for job in jobs):
        return None
    return sum(job.result["val_accuracy"] for job in jobs) / len(jobs)


@dataclass
class CellState:
    """A cell's jobs, stage by stage, of the stages the cell is ready for (`Stage.ready`); None where a job is
    not queued yet. Tuning's jobs choose the learning rate of the stages after it (`best_lr`)."""

    cell: Cell
    target: float | None = None  # the benchmark's: where every job stops, which tuning scores (`best_lr`)
    fixed: float | None = None  # the cell's one learning rate where the benchmark tunes none (`fixed_rate`)
    stages: dict[str, list[JobState | None]] = field(default_factory=dict)  # by stage name, in stage order
    called: list[Job] = field(default_factory=list)  # the jobs the protocol calls for now, in stage order

    @property
    def learning_rates(self) -> list[float]:
        """The learning rates tuning calls for, each once: the grid's, then those beyond its edges
        (`Tuning.further`)."""
        return list(dict.fromkeys(job.lr for job in self.called if job.stage == TUNE))

    def of(self, stage: str) -> list[JobState | None]:
        """The jobs of stage `stage` (none where the cell is not ready for it)."""
        return self.stages.get(stage, [])

    def settled(self, stage: str) -> bool:
        """Whether the stage has called for jobs of the cell and each of them has settled."""
        return bool(self.of(stage)) and all(job is not None and job.state in SETTLED for job in self.of(stage))

    @property
    def tuning(self) -> list[JobState | None]:
        return self.of(TUNE)

    @property
    def confirmation(self) -> list[JobState | None]:
        return self.of(CONFIRM)

    @property
    def capacity(self) -> list[JobState | None]:
        return self.of(CAPACITY)

    @property
    def tuned(self) -> bool:
        return self.settled(TUNE)

    @property
    def tuning_by_rate(self) -> dict[float, list[JobState | None]]:
        """Tuning's jobs by learning rate, in the order tuning calls for them, each with one job per tuning seed
        (None where it is not queued yet)."""
        by_rate: dict[float, list[JobState | None]] = {}
        for job, state in zip((job for job in self.called if job.stage == TUNE), self.tuning, strict=True):
            by_rate.setdefault(job.lr, []).append(state)
        return by_rate

    @property
    def best_lr(self) -> float | None:
        """The learning rate of highest mean validation accuracy over its tuning seeds, once every tuning job,
        extensions included, has settled; None before, or when no learning rate completed on every seed (one whose
        run diverged or failed is not chosen). A run that stopped at the benchmark's target scores the target (what
        it reached past it was not measured further), and among those the fewest steps to it win; without a target,
        among equal accuracies the larger area under the learning curve (`_tuning_score`, averaged over the seeds
        like the accuracy); then the first of the grid among equals, the grid before its extensions. At a fixed
        rate, that rate, with no tuning."""
        if self.fixed is not None:
            return self.fixed
        if not self.tuned:
            return None
        scores = [(*(sum(values) / len(values)
                     for values in zip(*(_tuning_score(job.result, self.target) for job in jobs), strict=True)),
                   -index, lr)
                  for index, (lr, jobs) in enumerate(self.tuning_by_rate.items())
                  if mean_validation(jobs) is not None]
        return max(scores)[-1] if scores else None

    @property
    def jobs(self) -> list[JobState]:
        return [job for jobs in self.stages.values() for job in jobs if job is not None]


class Ledger:
    """The benchmark's state: each cell's jobs, what is still to queue, and whether everything has settled."""

    def __init__(self, benchmark: Benchmark, trials: list[FrozenTrial]) -> None:
        self.benchmark = benchmark
        self.states = job_states(trials, grace_seconds=2.0 * benchmark.heartbeat_seconds)
        self.cells = [self._cell(cell) for cell in benchmark.cells]

    def _cell(self, cell: Cell) -> CellState:
        """The cell's state, stage by stage: each stage the cell is ready for, given the stages before it (tuning
        always; confirmation once tuning, its extensions included, has settled with a best learning rate; capacity
        once confirmation has settled), calls for its jobs at the best learning rate, then for those its jobs so
        far call for (`Stage.further`: tuning's learning rates beyond an edge of the grid), one by one."""
        state = CellState(cell, self.benchmark.target)
        if cell.skipped is not None:
            return state
        if self.benchmark.fixed_rate:
            (state.fixed,) = self.benchmark.learning_rates(cell)
        for stage in self.benchmark.stages:
            if not stage.ready(state):
                continue
            jobs = stage.jobs(self.benchmark, cell, state.best_lr)
            while jobs:
                state.called += jobs
                state.stages[stage.name] = [*state.of(stage.name), *(self.states.get(job.key) for job in jobs)]
                jobs = stage.further(self.benchmark, state)
        return state

    def missing(self) -> list[Job]:
        """The jobs the protocol calls for now that no trial holds."""
        return [job for state in self.cells for job in state.called if job.key not in self.states]

    def wave(self, job: Job) -> int:
        """Where `job` is queued (`queued`): a learning rate of tuning's grid by its distance from the grid's centre
        (the lower first among equals: 1, 3, 9 run as 3, 1, 9), every other job after the grid's (the grid's size)."""
        grid = sorted(self.benchmark.learning_rates(self.benchmark.cell(job.variant, job.task)))
        if job.stage != TUNE or job.lr not in grid:
            return len(grid)
        centre, index = (len(grid) - 1) // 2, grid.index(job.lr)
        return sorted(range(len(grid)), key=lambda i: (abs(i - centre), i)).index(index)

    def queued(self, jobs: list[Job]) -> list[Job]:
        """`jobs` in the order workers take them: tuning's grid in waves, every cell's centre learning rate, then
        every cell's next, and so on, then the rest in the order the cells call for them. By the time a cell's
        other learning rates run its first has settled, so a run the rule stops (`outdone`: a sibling at the
        target sooner) stops at its first evaluation past the sibling's step, not only once the sibling running
        beside it ends. The centre first: the default grid is centred where the leaderboard of record chose, so
        the first run is the likeliest to reach the target soonest and stop the others; the highest first ran its
        diverging or slow runs in full. The choice does not depend on the order (`CellState.best_lr` breaks ties
        by grid position). Confirmation runs in waves of seeds too, every cell's first seed before any cell's next,
        so that a benchmark stopped part way (or growing, `definition.grows`) holds its variants on the same seeds:
        what it has settled pairs."""
        return sorted(jobs, key=lambda job: (self.wave(job), job.seed if job.stage == CONFIRM else 0))  # stable

    @property
    def complete(self) -> bool:
        """Whether every job the protocol calls for is queued and has settled."""
        return not self.missing() and all(job.state in SETTLED for state in self.cells for job in state.jobs)

    def counts(self) -> Counter:
        """Jobs by stage and state, e.g. {("tune", "completed"): 12, ...}."""
        return Counter((job.job.stage, job.state) for state in self.cells for job in state.jobs)

    def spans(self) -> list[tuple[datetime.datetime | None, datetime.datetime | None]]:
        """Each settled job's last trial, its start and end."""
        return [(job.trials[-1].datetime_start, job.trials[-1].datetime_complete)
                for state in self.cells for job in state.jobs if job.state in SETTLED]

    def busy_seconds(self) -> float:
        """The benchmark's wall time: the seconds during which at least one of its settled jobs ran (the union of
        their `spans`), so that a pause between a stop and its resume is left out."""
        return busy_seconds(self.spans())


def busy_seconds(spans: list[tuple[datetime.datetime | None, datetime.datetime | None]]) -> float:
    """The length in seconds of the union of the (start, end) spans; a span missing either end counts nothing."""
    total, reach = 0.0, None
    for start, end in sorted((start, end) for start, end in spans if start and end):
        if reach is None or end > reach:
            total += (end - max(start, reach or start)).total_seconds()
            reach = end
    return total


def curve_area(curve: list[list[Any]], budget_steps: int) -> float:
    """The normalised area under the validation learning curve: the trapezoid rule over the evaluations' steps and
    accuracies, divided by the budget in steps, so in [0, 1]. The span before the first evaluation counts nothing
    (every variant of a task evaluates at the same steps), and a run that ended early counts nothing after its
    end."""
    points = [(step, accuracy) for step, _, accuracy in curve if accuracy is not None]
    return sum((later - earlier) * (low + high) / 2
               for (earlier, low), (later, high) in zip(points, points[1:], strict=False)) / budget_steps
