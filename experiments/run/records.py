"""Run records: one folder per run under the runs folder, written so that nothing finished is ever lost.

    runs/<run_id>/config.json     the fully resolved config (written once, before training)
    runs/<run_id>/metrics.jsonl   one JSON object per logged step or evaluation
    runs/<run_id>/summary.json    status and headline figures (`Summary`), rewritten as the run goes
    runs/<run_id>/checkpoint.pt   model, optimiser, data generator and history, for resuming
    runs/<run_id>/training.lock   locked while a process trains the run (`RunRecord.training`)

Every file is replaced atomically (write a temporary file, then rename). Checkpoints load with
`torch.load(weights_only=True)`: a checkpoint cannot run code.
"""

from __future__ import annotations

import dataclasses
import fcntl
import io
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from common.files import atomic_write_bytes, atomic_write_text

LOCK_FILE = "training.lock"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
STATUSES = ("running", "completed", "diverged", "failed", "interrupted", "pruned")


class RecordError(ValueError):
    """A run id, record or checkpoint that cannot be used: the message says why and what is accepted."""


def new_run_id(described_variant: str, task: str, seed: int) -> str:
    """Sortable by time, readable, and unique: 20261129-101500-local_w64-passkey-s0-3fa2."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{described_variant}-{task}-s{seed}-{secrets.token_hex(2)}"


def run_path(runs_dir: Path, run_id: str) -> Path:
    """The folder of `run_id` inside `runs_dir`; a name that could escape the folder is refused."""
    if not RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise RecordError(f"Run id {run_id!r} is not a run name; accepted: letters, digits, '.', '_' and '-', "
                          "starting with a letter or digit, without '..'.")
    root = runs_dir.resolve()
    path = (root / run_id).resolve()
    if path.parent != root:
        raise RecordError(f"Run id {run_id!r} would leave the runs folder {runs_dir}; accepted: a plain name.")
    return path


# Keys that records written by earlier versions use, and their names today: the kernel was once the backend,
# and the held-out test set was once the "eval" set (summaries, metric lines and task options).
RENAMED_KEYS = {"backend": "kernel", "eval_accuracy": "test_accuracy", "eval_loss": "test_loss",
                "eval_size": "test_size"}


def with_current_names(record: Any) -> Any:
    """A config.json or summary.json object with the keys earlier versions wrote under today's names, so that
    a run recorded before a rename still loads, resumes and reports."""
    if not isinstance(record, dict):
        return record
    return {RENAMED_KEYS.get(key, key) if RENAMED_KEYS.get(key) not in record else key: value
            for key, value in record.items()}


def metric_line_as_today(line: Any) -> Any:
    """A metrics.jsonl line (or a checkpoint's history line) with today's names, its extra sets' too."""
    line = with_current_names(line)
    if isinstance(line, dict) and isinstance(line.get("splits"), dict):
        line = {**line, "splits": {name: with_current_names(scores) for name, scores in line["splits"].items()}}
    return line


def _one_sided(window: Any) -> bool:
    return isinstance(window, int) and not isinstance(window, bool) and window >= 1


def config_as_today(config: Any) -> Any:
    """A config.json in today's terms: keys renamed (`with_current_names`), and windows counted as today.

    Configs written before the kernel rename (they hold `backend`) counted `local`'s and longformer's
    `window` to one side, |i - j| < window; today a window counts keys as Longformer's w, |i - j| <= window
    // 2. The same reach is window' = 2 (window - 1), so an old run still means the layout it trained with."""
    if isinstance(config, dict) and isinstance(config.get("task_options"), dict):
        config = {**config, "task_options": with_current_names(config["task_options"])}
    if not isinstance(config, dict) or "backend" not in config:
        return with_current_names(config)
    options = dict(config.get("variant_options") or {})
    windowed = config.get("variant") == "local" or (config.get("variant") == "sparse"
                                                    and options.get("pattern") == "longformer")
    if windowed and _one_sided(options.get("window")):
        options["window"] = 2 * (options["window"] - 1)
    return with_current_names({**config, "variant_options": options})


@dataclass
class Summary:
    """summary.json: a run's status and headline figures, the one definition of its fields. The training loop
    writes it; analysis reads it back with `from_dict`. Every field has a default, so a summary written before
    a field existed still loads (the field is None or empty there)."""

    run_id: str | None = None
    status: str | None = None  # one of STATUSES
    error: str | None = None  # why a run failed or diverged
    variant: str | None = None
    variant_options: dict[str, Any] = field(default_factory=dict)
    variant_name: str | None = None  # the variant as it describes itself, e.g. local_w16
    kernel: str | None = None  # the kernel it ran on (config.json's is the one asked for)
    precision: str | None = None  # float32 or bf16
    compiled: bool | None = None
    parameters: int | None = None  # the model's, every block and embedding included
    task: str | None = None
    task_options: dict[str, Any] = field(default_factory=dict)
    profile: str | None = None
    seed: int | None = None
    test_accuracy: float | None = None  # the test set, at the last evaluation
    test_loss: float | None = None
    val_accuracy: float | None = None  # the validation set (what sweeps select on), at the last evaluation
    val_loss: float | None = None
    chance_accuracy: float | None = None
    accuracy_by_distance: list[dict[str, Any]] = field(default_factory=list)  # {lo, hi, accuracy, count}
    accuracy_by_split: dict[str, float | None] = field(default_factory=dict)
    # {length, accuracy[, scored_max_weight]}: the last where train.attention_stats measured it
    accuracy_by_length: list[dict[str, Any]] = field(default_factory=list)
    tags: dict[str, Any] = field(default_factory=dict)  # e.g. a sweep's study and trial
    steps: int | None = None
    total_steps: int | None = None
    # Where the validation accuracy first reached train.target_accuracy, which stopped the run there (None: no
    # target, or not reached).
    target_step: int | None = None
    target_seconds: float | None = None
    wall_seconds: float | None = None
    tokens_per_second: float | None = None
    peak_memory_bytes: int | None = None
    device: str | None = None
    device_name: str | None = None
    torch_version: str | None = None
    git_commit: str | None = None
    revisions: dict[str, int] = field(default_factory=dict)  # of its task and variant (`experiments.revisions`)
    decayed_parameters: list[str] = field(default_factory=list)  # the parameters AdamW's weight decay pulls to 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """A summary.json object (today's or an earlier version's names) as a Summary; a field this version
        does not know is a RecordError naming it."""
        data = with_current_names(data)
        names = [item.name for item in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise RecordError(f"summary.json has unknown fields {unknown}; accepted: {', '.join(names)}.")
        return cls(**data)


class RunRecord:
    """The files of one run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run_id = path.name

    @classmethod
    def create(cls, runs_dir: Path, run_id: str) -> RunRecord:
        path = run_path(runs_dir, run_id)
        if path.exists():
            raise RecordError(f"Run {run_id!r} already exists in {runs_dir}; accepted: a new run id, "
                              "or `resume` to continue it.")
        path.mkdir(parents=True)
        return cls(path)

    @classmethod
    def open(cls, runs_dir: Path, run_id: str) -> RunRecord:
        path = run_path(runs_dir, run_id)
        if not (path / "config.json").is_file():
            raise RecordError(f"No run {run_id!r} in {runs_dir} (no {run_id}/config.json there); accepted: "
                              "the name of a folder the runs folder holds.")
        return cls(path)

    # -- JSON files ---------------------------------------------------------------------------------

    def _not_json(self, name: str, reason: ValueError | str) -> RecordError:
        """The error for a file of the record that is not UTF-8 JSON (`reason`: the JSON or UTF-8 decoding error)."""
        return RecordError(f"{self.path / name} is not valid UTF-8 JSON ({reason}); accepted: the file a run wrote.")

    def _read_json(self, name: str) -> Any:
        try:
            return json.loads((self.path / name).read_text(encoding="utf-8"))
        except OSError as error:
            raise RecordError(f"{self.path / name} cannot be read as JSON ({error}); accepted: the file "
                              "a run wrote.") from None
        except ValueError as error:  # json.JSONDecodeError, UnicodeDecodeError
            raise self._not_json(name, error) from None

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_text(self.path / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")

    def read_config(self) -> dict[str, Any]:
        return config_as_today(self._read_json("config.json"))

    def write_summary(self, summary: Summary) -> None:
        assert summary.status in STATUSES, summary.status
        atomic_write_text(self.path / "summary.json", json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")

    def read_summary(self) -> Summary:
        """summary.json as a `Summary` (an earlier version's names read as today's)."""
        saved = self._read_json("summary.json")
        if not isinstance(saved, dict):
            raise RecordError(f"{self.path / 'summary.json'} does not hold a JSON object; accepted: the file a run "
                              "wrote.")
        return Summary.from_dict(saved)

    def write_metrics(self, lines: list[dict[str, Any]]) -> None:
        atomic_write_text(self.path / "metrics.jsonl", "".join(json.dumps(line) + "\n" for line in lines))

    def read_metrics(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        if not path.exists():
            return []
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise self._not_json("metrics.jsonl", error) from None
        lines = []
        for number, line in enumerate(text.splitlines(), 1):
            try:
                lines.append(metric_line_as_today(json.loads(line)))
            except json.JSONDecodeError as error:
                raise self._not_json("metrics.jsonl", f"line {number}: {error.msg}") from None
        return lines

    # -- checkpoint ---------------------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoint.pt"

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        atomic_write_bytes(self.checkpoint_path, buffer.getvalue())

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint, or None when the run never wrote one."""
        if not self.checkpoint_path.exists():
            return None
        try:
            state = torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises several types for truncated or foreign files, some without a message
            reason = ("the file is empty" if self.checkpoint_path.stat().st_size == 0
                      else next(iter(str(error).splitlines()), "")[:200] or type(error).__name__)
            raise RecordError(f"Checkpoint {self.checkpoint_path} is corrupt or not a checkpoint ({reason}); "
                              "accepted: a checkpoint.pt written by attnlab.") from None
        if not isinstance(state, dict):
            raise self.mismatched_checkpoint(f"it holds a {type(state).__name__}, not a dict")
        return state

    def mismatched_checkpoint(self, what: str) -> RecordError:
        """The error for a checkpoint that loads but that this run cannot resume from (`what`: why)."""
        return RecordError(f"Checkpoint {self.checkpoint_path} does not match this run: {what}; accepted: the "
                           "checkpoint.pt this run wrote, or none (then the run starts again from step 0).")

    # -- lock -----------------------------------------------------------------------------------------

    @contextmanager
    def training(self) -> Iterator[None]:
        """Hold the run's lock (an advisory lock on its training.lock) while the block trains it, so that no two
        processes write one record: a run another process holds is a RecordError naming it. The operating system
        lets go of the lock when the process ends, however it ends, so a killed run leaves no stale lock."""
        with open(self.path / LOCK_FILE, "a+", encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip()
                raise RecordError(f"Run {self.run_id!r} is being trained by another process (pid {holder or '?'}); "
                                  "accepted: a run no process is training, so resume it once that one has ended "
                                  "(Ctrl-C stops it at a checkpoint).") from None
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")  # who holds it, for the refusal above
            lock.flush()
            yield
