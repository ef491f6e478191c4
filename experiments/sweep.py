"""Hyperparameter sweeps: an Optuna study whose trials are ordinary runs.

    attnlab sweep --variant local --task passkey --trials 30              # embedded store under runs/sweeps/
    attnlab sweep --variant local --task passkey --trials 30 --workers 4  # four processes, one study
    attnlab sweep ... --storage postgresql://user@host/db                 # one study across machines

Each trial samples the variant's declared options and the training hyperparameters (`experiments.space`)
with a seeded TPE sampler, trains with the same `train()` as `attnlab run`, into an ordinary run
folder tagged with the study and the trial number (the trial's user attribute `run_id` names it), and
reports the eval accuracy at every evaluation, so that the median pruner can stop it early (its run
says `pruned`). A diverged run fails its trial and the study goes on. The objective is the final eval
accuracy, maximised.

Storage. Without `--storage`, Optuna's journal file storage under `runs/sweeps/<study>.journal`:
no server, safe for many processes on one machine (Optuna's recommendation for that; SQLite is not).
With `--storage URL`, Optuna's RDB storage (PostgreSQL), where workers on several machines join one
study and the database coordinates them.

Stale trials. Every running trial has a heartbeat: Optuna's own on RDB storage, and on the journal
(which has none in Optuna 5.0) a `heartbeat` system attribute that names the worker's machine and
process. A trial whose heartbeat is older than twice the interval, or, on the same machine, whose
worker process is gone, is failed and queued again by Optuna's `RetryHeartbeatStaleTrialCallback`;
the retry keeps the parameters and the run id, and resumes that run from its checkpoint.

Exactly `--trials` complete trials: before each trial a worker counts the study's complete and
running trials; it starts one only while they fall short of the target, and waits (taking over trials
whose worker died) while the last ones are in flight. Workers that start trials at the same instant
are ordered by trial number: a trial that finds the target already filled by earlier ones fails at
once as `surplus`, before its run begins. Running the same command again continues the study until
the target is reached. Pruned and failed trials do not count.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.storages import JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages._heartbeat import BaseHeartbeat  # the interface Optuna's heartbeat thread drives
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

import variants
from common.options import OptionError
from experiments import config as configs
from experiments import space as spaces
from experiments.cli import start_record
from experiments.records import RUN_ID, RunRecord
from experiments.rerun import rerun_command
from experiments.train import train

MAX_RETRIES = 3  # a trial whose worker dies this many times is left failed
PRUNERS = ("median", "none")
HEARTBEAT = "heartbeat"  # the journal trial's system attribute


class TrialDiverged(Exception):
    """The trial's run diverged: the trial fails, the study goes on."""


class TrialSurplus(Exception):
    """Workers started trials at the same instant, and the earlier ones already fill the target."""


class SweepInterrupted(Exception):
    """SIGINT or SIGTERM stopped the trial's run at a checkpoint; the trial is queued again."""

    def __init__(self, number: int) -> None:
        super().__init__(f"trial {number} interrupted")
        self.number = number


# -- which process runs a trial ---------------------------------------------------------------------


def _process_start(pid: int) -> str | None:
    """The start time of a live process (Linux /proc), None when there is none or it is a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *rest = stat.rsplit(")", 1)[1].split()
    return None if state in ("Z", "X") else rest[18]  # field 22 of proc(5): starttime


def _machine() -> str:
    """This machine as processes on it see it: host name and, on Linux, the PID namespace."""
    try:
        return f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return socket.gethostname()


def this_worker() -> dict[str, Any]:
    return {"machine": _machine(), "pid": os.getpid(), "started": _process_start(os.getpid())}


def worker_alive(worker: dict[str, Any]) -> bool:
    """Whether the process `worker` names still runs; True when it cannot be told (another machine)."""
    if worker["machine"] != _machine():
        return True
    if worker["started"] is not None:  # Linux: same pid and same start time, so a reused pid is not mistaken
        return _process_start(worker["pid"]) == worker["started"]
    try:
        os.kill(worker["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class HeartbeatJournalStorage(JournalStorage, BaseHeartbeat):
    """Optuna's journal file storage with the heartbeat of its RDB storage (Optuna 5.0's journal has none).

    Optuna's heartbeat thread calls `record_heartbeat` every interval while a trial runs: it writes
    the trial's `heartbeat` system attribute (the trial, the time, the worker process). Optuna's
    `fail_stale_trials` asks `_get_stale_trial_ids` before each trial: a running trial whose worker
    process is gone (same machine) or whose heartbeat is older than the grace period (any machine).
    """

    def __init__(self, path: Path, *, heartbeat_interval: int, grace_period: int,
                 stale_callback: Callable[[optuna.Study, FrozenTrial], None]) -> None:
        super().__init__(JournalFileBackend(str(path)))
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.stale_callback = stale_callback
        self.worker = this_worker()

    def record_heartbeat(self, trial_id: int) -> None:
        number = self.get_trial(trial_id).number
        try:
            self.set_trial_system_attr(trial_id, HEARTBEAT, {"trial": number, "time": time.time(), **self.worker})
        except UpdateFinishedTrialError:  # another worker found it stale meanwhile; its tell will say so
            pass

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        stale = []
        for trial in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            beat = trial.system_attrs.get(HEARTBEAT)
            if beat is None or beat["trial"] != trial.number:  # no beat yet, or one a retry inherited
                continue
            if not worker_alive(beat) or time.time() - beat["time"] > self.grace_period:
                stale.append(self.get_trial_id_from_study_id_trial_number(study_id, trial.number))
        return stale

    def get_heartbeat_interval(self) -> int:
        return self.heartbeat_interval

    def get_heartbeat_stale_trial_callback(self) -> Callable[[optuna.Study, FrozenTrial], None]:
        return self.stale_callback


def _shown(url: str) -> str:
    """A storage URL with its password hidden."""
    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


def retry_callback() -> RetryHeartbeatStaleTrialCallback:
    """Queue a failed trial again with its parameters, run id and reported values (Optuna's callback)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES, inherit_intermediate_values=True)


def _rdb_storage(url: str, heartbeat_seconds: int, attempts: int = 3) -> RDBStorage:
    import sqlalchemy.exc

    connect = {"connect_args": {"connect_timeout": 10}} if url.startswith("postgres") else {}
    try:
        return RDBStorage(url, engine_kwargs=connect, heartbeat_interval=heartbeat_seconds,
                          grace_period=2 * heartbeat_seconds, heartbeat_stale_trial_callback=retry_callback())
    except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
        if attempts == 1:
            raise
        time.sleep(1.0)  # workers that meet a new database at once race to create its tables; the loser retries
        return _rdb_storage(url, heartbeat_seconds, attempts - 1)


def open_storage(url: str | None, journal: Path, heartbeat_seconds: int) -> optuna.storages.BaseStorage:
    """The journal file `journal` (no URL) or Optuna's RDB storage at `url`, both with heartbeats and
    stale trials retried; a database that cannot be used is a one-sentence error."""
    import sqlalchemy.exc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)  # heartbeats are experimental in Optuna 5.0
        if url is None:
            journal.parent.mkdir(parents=True, exist_ok=True)
            return HeartbeatJournalStorage(journal, heartbeat_interval=heartbeat_seconds,
                                           grace_period=2 * heartbeat_seconds, stale_callback=retry_callback())
        try:
            return _rdb_storage(url, heartbeat_seconds)
        except (sqlalchemy.exc.SQLAlchemyError, ImportError) as error:
            reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
            raise ValueError(f"Storage {_shown(url)!r} cannot be used ({reason}); accepted: the URL of a reachable "
                             "database such as postgresql://user@host:5432/name, or no storage for the embedded "
                             "store.") from None


# -- the sweep, validated -------------------------------------------------------------------------


def check_study_name(name: str) -> str:
    if not RUN_ID.fullmatch(name) or ".." in name:
        raise OptionError(f"Study name {name!r} is not a plain name; accepted: letters, digits, '.', '_' and '-', "
                          "starting with a letter or digit, without '..'.")
    return name


@dataclass(frozen=True)
class Sweep:
    """A sweep's definition, validated and resolved before anything runs."""

    variant: str
    task: str
    profile: str
    seed: int
    device: str
    kernel: str
    overrides: dict[str, dict[str, Any]]  # the user's --set, fixed in every trial
    space: spaces.Space
    study_name: str
    storage_url: str | None
    runs_dir: Path
    trials: int
    pruner: str
    prune_after: int
    heartbeat_seconds: int

    @property
    def journal(self) -> Path:
        return self.runs_dir / "sweeps" / f"{self.study_name}.journal"

    @property
    def storage_shown(self) -> str:
        return _shown(self.storage_url) if self.storage_url else str(self.journal)

    def definition(self) -> dict[str, Any]:
        """What makes trials comparable; workers joining a study must agree on it."""
        return json.loads(json.dumps({
            "variant": self.variant, "task": self.task, "profile": self.profile, "seed": self.seed,
            "overrides": self.overrides, "space": [param.describe() for param in self.space.params],
        }))

    def config(self, chosen: dict[str, dict[str, Any]]) -> configs.RunConfig:
        """The run config of a trial: the sweep's overrides plus the trial's values."""
        overrides = {section: {**values, **chosen.get(section, {})} for section, values in self.overrides.items()}
        return configs.resolve(variant=self.variant, task=self.task, profile=self.profile, seed=self.seed,
                               device=self.device, kernel=self.kernel, overrides=overrides)

    def make_pruner(self) -> optuna.pruners.BasePruner:
        if self.pruner == "none":
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(n_startup_trials=self.prune_after)


def prepare(*, variant: str, task: str, profile: str, seed: int, device: str, kernel: str, sets: list[str],
            space_args: list[str], space_file: str | None, study: str | None, storage: str | None,
            runs_dir: Path, trials: int, pruner: str, prune_after: int, heartbeat_seconds: int) -> Sweep:
    """Validate everything a sweep needs, touching nothing: a bad value is a one-sentence error."""
    for name, value, least in (("trials", trials, 1), ("heartbeat seconds", heartbeat_seconds, 1),
                               ("prune-after", prune_after, 0)):
        if value < least:
            raise OptionError(f"Sweep {name} got {value}; accepted: an integer >= {least}.")
    if pruner not in PRUNERS:
        raise OptionError(f"Pruner {pruner!r} is unknown; accepted: {', '.join(PRUNERS)}.")
    variants.variant_class(variant)
    overrides = configs.for_variant(configs.parse_sets(sets), variant, [variant])
    searched = spaces.declared(variant)
    for section in spaces.SECTIONS:
        for name in overrides[section]:
            if f"{section}.{name}" in searched:
                raise OptionError(f"--set {section}.{name} names an option the sweep searches; accepted: narrowing "
                                  f"or fixing it with --space {section}.{name}=VALUE.")
    base = configs.resolve(variant=variant, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
                           overrides=overrides)
    sizes = {"seq_len": base.task_options["seq_len"], "head_dim": base.model.attention_head_dim,
             "steps": base.train.steps}
    narrowing = spaces.read_space_file(Path(space_file)) if space_file else {}
    narrowing.update(spaces.parse_space_args(space_args))
    resolved = spaces.resolve(variant, sizes, narrowing)
    name = check_study_name(study or f"{variant}-{task}-{profile}-s{seed}")
    return Sweep(variant=variant, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
                 overrides=overrides, space=resolved, study_name=name, storage_url=storage, runs_dir=runs_dir,
                 trials=trials, pruner=pruner, prune_after=prune_after, heartbeat_seconds=heartbeat_seconds)


def open_study(sweep: Sweep) -> optuna.Study:
    """Create the sweep's study, or join it after checking that it was created for the same sweep."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each trial is announced by the sweep itself
    storage = open_storage(sweep.storage_url, sweep.journal, sweep.heartbeat_seconds)
    study = optuna.create_study(storage=storage, study_name=sweep.study_name, direction="maximize",
                                load_if_exists=True, pruner=sweep.make_pruner())
    mine, theirs = sweep.definition(), study.user_attrs.get("definition")
    if theirs is None:
        study.set_user_attr("definition", mine)
    elif theirs != mine:
        differing = ", ".join(key for key in mine if mine[key] != theirs.get(key))
        raise OptionError(f"Study {sweep.study_name!r} in {sweep.storage_shown} was created for another sweep (its "
                          f"{differing} differ); accepted: the variant, task, profile, seed, --set and --space it was "
                          "created with, or another study name.")
    return study


# -- one worker -----------------------------------------------------------------------------------


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _params(trial: FrozenTrial) -> str:
    return " ".join(f"{name}={_short(value)}" for name, value in trial.params.items())


def trial_seed(seed: int, number: int) -> int:
    """The sampler seed of trial `number` of a sweep seeded with `seed`."""
    return zlib.crc32(f"{seed}/{number}".encode())


class Objective:
    """One trial: its values, its run (new, or the run of the trial it retries), train, and the verdict."""

    def __init__(self, sweep: Sweep, *, quiet: bool, should_stop: Callable[[int], bool]) -> None:
        self.sweep = sweep
        self.quiet = quiet
        self.should_stop = should_stop

    def record(self, trial: optuna.Trial, config: configs.RunConfig) -> RunRecord:
        inherited = trial.user_attrs.get("run_id")  # a retried trial continues the run of the trial it retries
        if inherited is not None:
            try:
                record = RunRecord.open(self.sweep.runs_dir, inherited)
                if configs.from_dict(record.read_config()) == config:
                    return record
            except ValueError:  # not in this runs folder (another machine's), never written, or no longer valid
                pass
        return start_record(self.sweep.runs_dir, config)

    def __call__(self, trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", {"machine": _machine(), "pid": os.getpid()})
        ahead = [other for other in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                                                   TrialState.RUNNING))
                 if other.number < trial.number]
        if len(ahead) >= self.sweep.trials:  # another worker passed the check in work() at the same instant
            trial.set_user_attr("status", "surplus")
            raise TrialSurplus(f"trials {[other.number for other in ahead]} already fill the target")
        # Each trial draws from a seed of its own, the sweep's seed and the trial's number: no two trials of
        # concurrent workers draw alike, and a study run again draws what it drew before.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            trial.study.sampler = optuna.samplers.TPESampler(seed=trial_seed(self.sweep.seed, trial.number))
        config = self.sweep.config(self.sweep.space.suggest(trial))
        record = self.record(trial, config)
        trial.set_user_attr("run_id", record.run_id)

        def should_prune(step: int, accuracy: float) -> bool:
            trial.report(accuracy, step)
            return trial.should_prune()

        try:
            summary = train(config, record, quiet=self.quiet, should_stop=self.should_stop, should_prune=should_prune,
                            tags={"study": self.sweep.study_name, "trial": trial.number})
        except ValueError as error:  # inputs were validated before training: this is a bug, show its trace
            raise RuntimeError(f"run {record.run_id} of trial {trial.number} failed") from error
        trial.set_user_attr("status", summary["status"])
        if summary["status"] == "pruned":
            raise optuna.TrialPruned(f"eval accuracy {summary['eval_accuracy']:.3f} at step {summary['steps']}")
        if summary["status"] == "diverged":
            raise TrialDiverged(summary["error"])
        if summary["status"] == "interrupted":
            raise SweepInterrupted(trial.number)
        return summary["eval_accuracy"]


def announce(prefix: str) -> Callable[[optuna.Study, FrozenTrial], None]:
    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        run = trial.user_attrs.get("run_id", "-")
        if trial.state == TrialState.COMPLETE:
            outcome = f"completed: eval accuracy {trial.value:.3f}"
        elif trial.state == TrialState.PRUNED:
            step, accuracy = max(trial.intermediate_values.items())
            outcome = f"pruned at step {step}: eval accuracy {accuracy:.3f}"
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


def run_workers(sweep: Sweep, study: optuna.Study, command: list[str], workers: int) -> int:
    """`workers` processes running `command --worker-index I`; on CUDA each sees one GPU (round robin),
    on CPU each gets its share of the cores. SIGINT or SIGTERM here is passed on to each; they die with
    this process. 0 when the study reached its target; else 130 after a signal, 1 otherwise."""
    import torch

    def die_with_parent() -> None:  # Linux: a worker whose parent is killed gets SIGTERM, and checkpoints
        if sys.platform == "linux":
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    gpus = torch.cuda.device_count() if sweep.device == "cuda" else 0
    threads = max(1, (os.cpu_count() or 1) // workers)
    processes = []
    for index in range(workers):
        env = dict(os.environ)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(index % gpus)
        else:
            env.setdefault("OMP_NUM_THREADS", str(threads))
        processes.append(subprocess.Popen([*command, "--worker-index", str(index)], env=env,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          preexec_fn=die_with_parent))

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
            print(f"sweep {sweep.study_name}: worker {index} {ended}", file=sys.stderr)
    complete = sum(trial.state == TrialState.COMPLETE for trial in study.get_trials(deepcopy=False))
    return 0 if complete >= sweep.trials else 130 if 130 in codes else 1


# -- the result -----------------------------------------------------------------------------------


def report(sweep: Sweep, study: optuna.Study) -> str:
    """The study's counts, its best trial (value, values, run, config) and the command that reruns it."""
    trials = study.get_trials(deepcopy=False)
    count = Counter(trial.state for trial in trials)
    lines = [f"study {sweep.study_name} ({sweep.storage_shown}): {count[TrialState.COMPLETE]} of {sweep.trials} "
             f"complete, {count[TrialState.PRUNED]} pruned, {count[TrialState.FAIL]} failed, "
             f"{count[TrialState.RUNNING]} running"]
    complete = [trial for trial in trials if trial.state == TrialState.COMPLETE]
    if not complete:
        return "\n".join([*lines, "no trial has completed yet"])
    best = max(complete, key=lambda trial: (trial.value, -trial.number))
    run_id = best.user_attrs["run_id"]
    lines.append(f"best: trial {best.number}, eval accuracy {best.value:.4f}, run {run_id} "
                 f"(config: {sweep.runs_dir / run_id / 'config.json'})")
    lines += [f"  {name} = {_short(value)}" for name, value in best.params.items()]
    config = sweep.config(spaces.as_overrides(best.params))
    lines.append(f"rerun it: {rerun_command(config, runs_dir=sweep.runs_dir)}")
    return "\n".join(lines)
