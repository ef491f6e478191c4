"""Experiment trackers: a run mirrored to Weights & Biases and/or TensorBoard as it trains (`train.tracker`).

The run folder stays the record (`experiments.run.records`); a tracker shows the same numbers under the same names:
every metrics.jsonl line (`scalars` flattens it: `loss`, `accuracy`, `test_accuracy`, `val_accuracy`,
`accuracy_by_distance/d1-16/accuracy`, `splits/dense/test_accuracy`, `attention/layer0/head1/entropy`, ...) at
its step, the resolved config and the run's id when it starts, the summary when it ends. Runs that belong together
are grouped by their tags (`grouping`): a sweep's trials and confirmation runs under the study, a benchmark's jobs
under `benchmark-NAME` and their stage, as W&B's `group` and `job_type` and as TensorBoard's folders.

    wandb        W&B run id = the run's id, resumed by it (`resume="allow"`); files under the run folder's
                 `wandb/` unless WANDB_DIR is set; project `attnlab` unless WANDB_PROJECT is set
    tensorboard  event files in the run folder's `tensorboard/<group>/<job_type>/`, or, with TENSORBOARD_LOGDIR
                 set, in `$TENSORBOARD_LOGDIR/<group>/<job_type>/<run_id>/`; a resumed run appends to the same
                 folder and hides what the killed run logged after its checkpoint (`purge_step`)

Each package is an extra (`pip install -e '.[wandb]'`, `'.[tensorboard]'`), imported only by a run that asks for
it. At config resolution (before a run folder is made) `check_available` refuses a missing one, and, where the config
is to train here, `check_usable` one that could not start: W&B with a setting it refuses (WANDB_MODE=bogus) or online
without an API key, TensorBoard with a TENSORBOARD_LOGDIR it cannot write.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from common.files import writable_folder
from common.options import OptionError

# Each tracker's name, and the package (and the extra that installs it) it needs.
PACKAGES = {"wandb": "wandb", "tensorboard": "tensorboard"}
# How an item of a list in a metric line is named: by its own keys (a distance bucket, a layer's head).
ITEM_NAMES = ((("lo", "hi"), "d{lo}-{hi}"), (("layer", "head"), "layer{layer}/head{head}"))


def check_available(names: tuple[str, ...] | None) -> None:
    """Refuse, in one sentence, a tracker named twice and one whose package is not installed (found without
    importing it)."""
    names = names or ()
    for name in names:
        if names.count(name) > 1:
            raise OptionError(f"option 'tracker' names {name!r} twice; accepted: each of {', '.join(PACKAGES)} once.")
        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise OptionError(f"option 'tracker' got {name!r}, whose package {PACKAGES[name]} is not installed; "
                              f"accepted: pip install -e '.[{name}]', or train.tracker=none.")


def check_usable(names: tuple[str, ...] | None) -> None:
    """Refuse, in one sentence, a tracker that could not start here (`check_wandb`, `check_tensorboard_folder`):
    asked where a run is about to train, not where a saved config is only read (`experiments.run.config.resolve`)."""
    names = names or ()
    if "wandb" in names:
        check_wandb()
    if "tensorboard" in names:
        check_tensorboard_folder()


def check_wandb() -> None:
    """W&B's settings and API key as `wandb.init` finds them (the settings from WANDB_* variables and W&B's
    settings files; the key from WANDB_API_KEY, a netrc entry for the server or the settings), read without
    starting W&B's service or touching the network: a setting W&B refuses (WANDB_MODE=bogus), or a mode that
    logs online with no key, is refused. Offline, dryrun and disabled need no key."""
    import pydantic
    import wandb
    from wandb.errors import AuthenticationError
    from wandb.sdk import wandb_setup
    from wandb.sdk.lib import wbauth

    try:
        settings = wandb_setup.singleton().settings
    except pydantic.ValidationError as error:
        wandb.teardown()  # W&B keeps the settings it had read when it refused one: start afresh next time
        (problem, *_) = error.errors()
        setting = ".".join(map(str, problem["loc"]))
        raise OptionError(f"option 'tracker' names 'wandb', whose setting {setting!r} got {problem['input']!r} "
                          f"(WANDB_{setting.upper()}, or a W&B settings file); accepted: "
                          f"{problem['msg'].removeprefix('Input should be ')}.") from None
    if settings._offline or settings._noop:  # wandb.init's own test for a run that needs no login
        return
    try:
        key = wbauth.authenticate_session(host=settings.base_url, source="attnlab", prompt=False,
                                          update_session=False)
    except AuthenticationError as error:
        raise OptionError(f"option 'tracker' names 'wandb', whose credentials W&B refuses ({error}); accepted: "
                          "a key as `wandb login` writes it, or WANDB_MODE=offline.") from None
    if key is None:
        raise OptionError(f"option 'tracker' names 'wandb' in W&B mode {settings.mode!r}, which logs to "
                          f"{settings.base_url} and needs an API key, and none is set; accepted: WANDB_API_KEY or a "
                          "netrc entry (`wandb login` writes one), WANDB_MODE=offline or WANDB_MODE=disabled.")


def check_tensorboard_folder() -> None:
    """TENSORBOARD_LOGDIR, where set, names a folder that is there or can be made, and can be written
    (`common.files.writable_folder`; unset, the event files go into the run folder, which the run makes)."""
    root = os.environ.get("TENSORBOARD_LOGDIR")
    if root:
        try:
            writable_folder(Path(root), "TENSORBOARD_LOGDIR")
        except ValueError as error:
            raise OptionError(f"option 'tracker' names 'tensorboard', whose {error}") from None


def grouping(tags: dict[str, Any]) -> tuple[str | None, str | None]:
    """The group and the job type of a run with `tags`: a sweep's study and `trial` or `confirm`, a benchmark's
    `benchmark-NAME` and the job's stage; (None, None) for a run of its own."""
    if "benchmark" in tags:
        return f"benchmark-{tags['benchmark']}", str(tags["stage"])
    if "study" in tags:
        return str(tags["study"]), "confirm" if tags.get("confirm") is True else "trial"
    return None, None


def scalars(value: Any, prefix: str = "") -> dict[str, float]:
    """The numbers of a metric line (or part of one), flattened: nested names joined with '/', a list's items
    named by their own keys (ITEM_NAMES) or else by position; text, None and the line's `step` left out."""
    if isinstance(value, bool | int | float):
        return {prefix: float(value)}
    found: dict[str, float] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            if not (prefix == "" and key == "step"):
                found.update(scalars(item, f"{prefix}/{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            keys, name = next(((keys, name) for keys, name in ITEM_NAMES
                               if isinstance(item, dict) and all(key in item for key in keys)), ((), str(index)))
            rest = {key: part for key, part in item.items() if key not in keys} if keys else item
            found.update(scalars(rest, f"{prefix}/{name.format(**item) if keys else name}"))
    return found


def as_text(data: Any) -> str:
    """JSON as a Markdown code block (TensorBoard's text tab renders Markdown)."""
    return "\n".join("    " + line for line in json.dumps(data, indent=2, sort_keys=True, default=str).splitlines())


class Tracker(Protocol):
    """What the training loop calls: `start` before the first step (`step` > 0: resumed from a checkpoint
    there), `log` for every metric line, `finish` with the summary (summary.json's object)."""

    def start(self, config: dict[str, Any], run_id: str, tags: dict[str, Any], step: int) -> None: ...

    def log(self, line: dict[str, Any]) -> None: ...

    def finish(self, summary: dict[str, Any]) -> None: ...


class WandbTracker:
    """A W&B run whose id is the run's: a resumed run continues it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.run: Any = None
        self.first_step = 0  # W&B's next step: lines before it it already has (logged before a resume)

    def start(self, config: dict[str, Any], run_id: str, tags: dict[str, Any], step: int) -> None:
        import wandb

        group, job_type = grouping(tags)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "attnlab"), id=run_id, name=run_id, resume="allow",
            dir=None if os.environ.get("WANDB_DIR") else str(self.folder), group=group, job_type=job_type,
            tags=[f"{key}={value}"[:64] for key, value in tags.items()], config=config)
        self.first_step = self.run.step if step else 0

    def log(self, line: dict[str, Any]) -> None:
        if line["step"] >= self.first_step:
            self.run.log(scalars(line), step=line["step"])

    def finish(self, summary: dict[str, Any]) -> None:
        self.run.summary.update(summary)
        self.run.finish(exit_code=0 if summary["status"] in ("completed", "pruned") else 1)


class TensorBoardTracker:
    """Event files through torch's SummaryWriter: scalars per metric line, the config, id, tags and summary as
    text."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.writer: Any = None
        self.step = 0

    def log_dir(self, run_id: str, tags: dict[str, Any]) -> Path:
        layout = [re.sub(r"[^A-Za-z0-9._=-]", "-", part) for part in grouping(tags) if part]
        root = os.environ.get("TENSORBOARD_LOGDIR")
        return Path(root, *layout, run_id) if root else self.folder.joinpath("tensorboard", *layout)

    def start(self, config: dict[str, Any], run_id: str, tags: dict[str, Any], step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # A resumed run logs again what followed its checkpoint: what the killed run logged there is hidden.
        self.writer = SummaryWriter(log_dir=str(self.log_dir(run_id, tags)), purge_step=step + 1 if step else None)
        self.step = step
        for name, text in (("run_id", run_id), ("tags", as_text(tags)), ("config", as_text(config))):
            self.writer.add_text(name, text, global_step=step)

    def log(self, line: dict[str, Any]) -> None:
        self.step = line["step"]
        for name, value in scalars(line).items():
            self.writer.add_scalar(name, value, global_step=line["step"])
        self.writer.flush()

    def finish(self, summary: dict[str, Any]) -> None:
        self.writer.add_text("summary", as_text(summary), global_step=self.step)
        self.writer.close()


TRACKERS: dict[str, Callable[[Path], Tracker]] = {"wandb": WandbTracker, "tensorboard": TensorBoardTracker}


class Trackers:
    """The trackers a run asked for (`train.tracker`; none: nothing is called), as one `Tracker`."""

    def __init__(self, names: tuple[str, ...] | None, folder: Path) -> None:
        self.trackers = [TRACKERS[name](folder) for name in names or ()]

    def start(self, config: dict[str, Any], run_id: str, tags: dict[str, Any], step: int) -> None:
        for tracker in self.trackers:
            tracker.start(config, run_id, tags, step)

    def log(self, line: dict[str, Any]) -> None:
        for tracker in self.trackers:
            tracker.log(line)

    def finish(self, summary: dict[str, Any]) -> None:
        for tracker in self.trackers:
            tracker.finish(summary)
