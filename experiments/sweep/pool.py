"""The workers of a sweep: one process runs trials until the study holds `--trials` complete ones
(`work`), and `--workers N` starts N such processes on this machine (`run_workers`). A worker process is given
only what is local to it (`WorkerSettings`); it reads the definition it joins from the storage
(`experiments.sweep.worker`).

Exactly `--trials` complete trials: before each trial a worker counts the study's complete and running
trials; it starts one only while they fall short of the target, and waits (taking over trials whose
worker died) while the last ones are in flight. Workers that start trials at the same instant are ordered
by trial number: a trial that finds the target already filled by earlier ones fails at once as `surplus`,
before its run begins. Running the same command again continues the study until the target is reached.
Pruned and failed trials do not count.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.trial import FrozenTrial, TrialState

from experiments.sweep.definition import Sweep
from experiments.sweep.objective import Objective, SweepInterrupted, TrialDiverged, TrialSurplus
from experiments.sweep.storage import open_storage, retry_callback, shown, stored_definition


def short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _params(trial: FrozenTrial) -> str:
    return " ".join(f"{name}={short(value)}" for name, value in trial.params.items())


def announce(prefix: str) -> Callable[[optuna.Study, FrozenTrial], None]:
    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        run = trial.user_attrs.get("run_id", "-")
        if trial.state == TrialState.COMPLETE:
            outcome = f"completed: validation accuracy {trial.value:.3f}"
        elif trial.state == TrialState.PRUNED:
            step, accuracy = max(trial.intermediate_values.items())
            outcome = f"pruned at step {step}: validation accuracy {accuracy:.3f}"
        else:
            outcome = f"failed ({trial.user_attrs.get('status', 'error')})"
        print(f"{prefix}trial {trial.number} {outcome}; {_params(trial)}; run {run}", flush=True)

    return callback


def work(sweep: Sweep, study: optuna.Study, *, worker: int | None = None, quiet: bool = False,
         should_stop: Callable[[int], bool] = lambda step: False) -> int:
    """Run trials until the study holds `sweep.trials` complete ones: 0; stopped by a signal: 130;
    more diverged trials than the target: 1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        objective = Objective(sweep, quiet=quiet, should_stop=should_stop)
        callbacks = [announce("" if worker is None else f"[worker {worker}] ")]
        poll = max(0.5, min(5.0, sweep.heartbeat_seconds / 2))
        while not should_stop(0):
            optuna.storages.fail_stale_trials(study)
            trials = study.get_trials(deepcopy=False)
            count = Counter(trial.state for trial in trials)
            if count[TrialState.COMPLETE] >= sweep.trials:
                return 0
            diverged = sum(trial.user_attrs.get("status") == "diverged" for trial in trials)
            if diverged > sweep.trials:
                print(f"sweep {sweep.study_name}: stopped after {diverged} diverged trials, more than the "
                      f"{sweep.trials} asked for; their run records say where (a narrower train.lr may help)",
                      file=sys.stderr)
                return 1
            if count[TrialState.COMPLETE] + count[TrialState.RUNNING] >= sweep.trials:
                time.sleep(poll)  # the last trials are in flight: wait, and take over any whose worker dies
                continue
            try:
                study.optimize(objective, n_trials=1, catch=(TrialDiverged, TrialSurplus), callbacks=callbacks)
            except SweepInterrupted as interrupted:
                # Queued again with its run id, so the next invocation resumes the run from its checkpoint.
                retry_callback()(study, study.get_trials(deepcopy=False)[interrupted.number])
                print(f"sweep {sweep.study_name}: trial {interrupted.number} interrupted; run the same command to "
                      "continue", file=sys.stderr)
                return 130
    return 130


def worker_count(workers: int | None, device: str, per_core: bool = False) -> int:
    """The processes to run: `workers`, or by default one per GPU on cuda, and elsewhere one, or with `per_core` one
    per CPU core (a benchmark's jobs are small models, which one thread each trains faster in all than a process
    with every thread); refused below 1."""
    import torch

    if workers is None:
        if device == "cuda":
            return max(1, torch.cuda.device_count())
        return max(1, os.cpu_count() or 1) if per_core else 1
    if workers < 1:
        raise ValueError(f"--workers got {workers}; accepted: an integer >= 1.")
    return workers


def cpu_threads(workers: int) -> int:
    """The threads each of `workers` processes on this machine's CPU gets: OMP_NUM_THREADS where it is set, else
    its share of the cores."""
    return int(os.environ.get("OMP_NUM_THREADS") or max(1, (os.cpu_count() or 1) // workers))


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker process of a sweep or a benchmark is started with: only what is local to this machine and
    this command. The definition of what it joins (variants, tasks, settings, space) is the study's own, which the
    worker reads from the storage (`experiments.sweep.worker`)."""

    kind: str  # "sweep" or "benchmark": which definition the study holds
    study: str
    storage_url: str | None  # a database shared by machines, or None: the journal file
    journal: str
    runs_dir: str
    device: str
    heartbeat_seconds: int
    quiet: bool
    trials: int = 0  # a sweep's target of complete trials, this command's (a later command may raise it)
    index: int = 0  # which of the command's workers it is

    def command(self, index: int) -> list[str]:
        """The command line of worker `index`: these settings as one JSON argument."""
        return [sys.executable, "-m", "experiments.sweep.worker",
                json.dumps(dataclasses.asdict(self) | {"index": index})]

    @classmethod
    def from_json(cls, text: str) -> WorkerSettings:
        return cls(**json.loads(text))

    def stored_definition(self) -> dict[str, Any]:
        """The definition the study holds, which the worker joins."""
        storage = open_storage(self.storage_url, Path(self.journal), self.heartbeat_seconds)
        where = shown(self.storage_url) if self.storage_url else self.journal
        return stored_definition(storage, self.study, kind=self.kind, shown=where)


def spawn_workers(settings: WorkerSettings, workers: int, *, label: str) -> list[int]:
    """Run `workers` worker processes (`settings`, each with its index; or anything with the same `command` and
    `device`, as `experiments.claims.lanes.Lanes`) and wait for them; their exit codes. On
    CUDA each sees one GPU (round robin), on CPU each gets its share of the cores. SIGINT or SIGTERM here is passed
    on to each; they die with this process. A worker that did not end with 0 is named, with `label` first."""
    import torch

    def die_with_parent() -> None:  # Linux: a worker whose parent is killed gets SIGTERM, and checkpoints
        if sys.platform == "linux":
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    gpus = torch.cuda.device_count() if settings.device == "cuda" else 0
    processes = []
    for index in range(workers):
        env = dict(os.environ)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(index % gpus)
        else:
            env["OMP_NUM_THREADS"] = str(cpu_threads(workers))
        processes.append(subprocess.Popen(settings.command(index), env=env, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=die_with_parent))

    def forward(signum, frame):
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    codes = [process.wait() for process in processes]
    for index, code in enumerate(codes):
        if code != 0:
            ended = f"was killed by signal {-code}" if code < 0 else f"ended with exit code {code}"
            print(f"{label}: worker {index} {ended}", file=sys.stderr)
    return codes


def settings_of(sweep: Sweep, quiet: bool) -> WorkerSettings:
    """What each worker of `sweep` is started with."""
    return WorkerSettings("sweep", sweep.study_name, sweep.storage_url, str(sweep.journal), str(sweep.runs_dir),
                          sweep.device, sweep.heartbeat_seconds, quiet, trials=sweep.trials)


def run_workers(sweep: Sweep, study: optuna.Study, workers: int, *, quiet: bool) -> int:
    """`workers` worker processes of `sweep` (`spawn_workers`): 0 when the study reached its target; else 130
    after a signal, 1 otherwise."""
    codes = spawn_workers(settings_of(sweep, quiet), workers, label=f"sweep {sweep.study_name}")
    complete = sum(trial.state == TrialState.COMPLETE for trial in study.get_trials(deepcopy=False))
    return 0 if complete >= sweep.trials else 130 if 130 in codes else 1
