"""Where a study lives, and the heartbeats of its running trials.

Without `--storage`, Optuna's journal file storage under `runs/sweeps/<study>.journal`: no server, safe
for many processes on one machine (Optuna's recommendation for that; SQLite is not). With `--storage
URL`, Optuna's RDB storage (PostgreSQL), where workers on several machines join one study and the
database coordinates them.

Every running trial has a heartbeat: Optuna's own on RDB storage, and on the journal (which has none in
Optuna 5.0) a `heartbeat` system attribute that names the worker's machine and process. A trial whose
heartbeat is older than twice the interval, or, on the same machine, whose worker process is gone, is
failed and queued again by Optuna's `RetryHeartbeatStaleTrialCallback`; the retry keeps the parameters
and the run id, and resumes that run from its checkpoint.

Every journal is opened through `common.journals.journal_backend`, which first sets aside a last line that a
killed worker or a full disk cut short.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.storages import JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages._heartbeat import BaseHeartbeat  # the interface Optuna's heartbeat thread drives
from optuna.trial import FrozenTrial, TrialState

from common.journals import journal_backend
from common.options import OptionError, shown
from experiments.sweep.liveness import this_worker, worker_alive

MAX_RETRIES = 3  # a trial whose worker dies this many times is left failed
HEARTBEAT = "heartbeat"  # the journal trial's system attribute


class HeartbeatJournalStorage(JournalStorage, BaseHeartbeat):
    """Optuna's journal file storage with the heartbeat of its RDB storage (Optuna 5.0's journal has none).

    Optuna's heartbeat thread calls `record_heartbeat` every interval while a trial runs: it writes
    the trial's `heartbeat` system attribute (the trial, the time, the worker process). Optuna's
    `fail_stale_trials` asks `_get_stale_trial_ids` before each trial: a running trial whose worker
    process is gone (same machine) or whose heartbeat is older than the grace period (any machine).
    """

    def __init__(self, path: Path, *, heartbeat_interval: int, grace_period: int,
                 stale_callback: Callable[[optuna.Study, FrozenTrial], None]) -> None:
        super().__init__(journal_backend(path))
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
            raise ValueError(f"Storage {shown(url)!r} cannot be used ({reason}); accepted: the URL of a reachable "
                             "database such as postgresql://user@host:5432/name, or no storage for the embedded "
                             "store.") from None


def create_or_join(storage: optuna.storages.BaseStorage, name: str, definition: dict[str, Any], *, kind: str,
                   shown: str, accepted: str, pruner: optuna.pruners.BasePruner | None = None,
                   upgrade: Callable[[dict[str, Any]], dict[str, Any]] = dict,
                   grows: Callable[[dict[str, Any], dict[str, Any]], bool] = lambda stored, today: False,
                   keep: bool = True) -> optuna.Study:
    """Create the study `name`, or join it after checking that it was created with the same `definition`
    (what makes its trials comparable, and all a worker process reads to join it; stored as the study's user
    attribute `definition`): a study made for another `kind` of job (a sweep, a benchmark) with other settings
    is a one-sentence error, unless `grows(stored, definition)` says the new one only adds jobs to it (a benchmark's
    seeds raised). A definition an older version stored is compared in today's form, `upgrade(it)` (the fields
    added since as that version ran them), and stored again in today's form when it agrees (unless `keep` is
    False: an estimate reads the study and changes nothing in it)."""
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize", load_if_exists=True,
                                pruner=pruner)
    stored = study.user_attrs.get("definition")
    if stored is None:
        if keep:
            study.set_user_attr("definition", definition)
        return study
    theirs = upgrade(stored)
    if theirs != definition and not grows(theirs, definition):
        keys = [*definition, *(key for key in theirs if key not in definition)]  # a newer version's fields too
        differing = ", ".join(key for key in keys if definition.get(key) != theirs.get(key))
        raise OptionError(f"Study {name!r} in {shown} was created for another {kind} (its {differing} differ); "
                          f"accepted: {accepted}.")
    if stored != definition and keep:
        study.set_user_attr("definition", definition)
    return study


def stored_definition(storage: optuna.storages.BaseStorage, name: str, *, kind: str, shown: str) -> dict[str, Any]:
    """The definition the study `name` was created with, as stored: what a worker process joins; a study that
    does not exist, or holds none, is a one-sentence error."""
    try:
        definition = optuna.load_study(study_name=name, storage=storage).user_attrs.get("definition")
    except KeyError:
        definition = None
    if not isinstance(definition, dict):
        raise OptionError(f"Study {name!r} in {shown} holds no {kind}'s definition; accepted: the study of a {kind} "
                          f"that `attnlab {kind}` created.")
    return definition


def field_of(definition: dict[str, Any], key: str, *, where: str) -> Any:
    """`definition[key]`; a definition without it, which a version before the field stored and no process of
    today's has joined since, is a one-sentence error."""
    if key not in definition:
        raise OptionError(f"The {where} stores no {key!r} in its definition (an older version created it); "
                          "accepted: joining it once with the command that created it, which records it.")
    return definition[key]
