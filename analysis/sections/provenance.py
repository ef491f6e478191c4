"""The report's provenance: the environment it was built in, and for each run where and with what it ran
and the command that trains it again."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import platform
import shlex
import time
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.context import Context
from analysis.render import Block, Table, Text
from analysis.sections.registry import section
from common.provenance import git_commit
from experiments import config as configs
from experiments.records import RecordError, RunRecord

PACKAGES = ("torch", "numpy", "pandas", "seaborn", "matplotlib", "optuna", "scikit-learn", "einops")


@functools.cache
def _defaults(variant: str, task: str, profile: str, device: str, kernel: str) -> dict[str, Any] | None:
    try:  # as config.json holds it: tuples as lists
        return json.loads(configs.to_json(configs.resolve(variant=variant, task=task, profile=profile, seed=0,
                                                          device=device, kernel=kernel)))
    except ValueError:
        return None


def rerun_command(config: dict[str, Any]) -> str:
    """The `make experiment` command that trains this config again: --set for each field that differs from
    the profile's defaults (every field, when the defaults cannot be resolved)."""
    fields = ("variant", "task", "profile", "seed", "device")
    head = {name: config.get(name) for name in fields}
    kernel = config.get("kernel", "auto")
    defaults = _defaults(*(str(head[name]) for name in ("variant", "task", "profile", "device")), str(kernel)) or {}
    assignments = []
    for part, prefix in (("variant_options", "variant"), ("task_options", "task"), ("model", "model"),
                         ("train", "train")):
        default = defaults.get(part, {})
        for name, value in (config.get(part) or {}).items():
            if name not in default or default[name] != value:
                assignments.append(shlex.quote(f"{prefix}.{name}={configs.format_value(value)}"))
    args = " ".join([*(["--kernel", shlex.quote(str(kernel))] if kernel != "auto" else []),
                     *(f"--set {assignment}" for assignment in assignments)])
    command = " ".join(f"{name.upper()}={shlex.quote(str(head[name]))}" for name in fields)
    return f"make experiment {command}" + (f' ARGS="{args}"' if args else "")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@section("provenance", "Provenance")
def provenance(context: Context) -> list[Block]:
    environment = [("built", time.strftime("%Y-%m-%d %H:%M:%S %z")), ("attnlab git commit", git_commit() or "unknown"),
                   ("python", platform.python_version()), ("platform", platform.platform()),
                   *((package, _version(package)) for package in PACKAGES)]
    blocks: list[Block] = [Table("environment", "The environment this report was built in",
                                 pd.DataFrame(environment, columns=["item", "value"]))]
    rows = []
    for run in context.runs.sort_values(["task", "variant_name", "seed", "run_id"]).itertuples(index=False):
        try:
            command = rerun_command(RunRecord(Path(run.path)).read_config())
        except RecordError as error:
            command = f"unavailable ({error})"
        rows.append({"run": run.run_id, "status": run.status, "task": run.task, "variant": run.variant_name,
                     "seed": run.seed, "profile": run.profile, "device": run.device, "device name": run.device_name,
                     "kernel": run.kernel, "torch": run.torch_version, "git commit": run.git_commit,
                     "study": run.study, "trial": run.trial, "command": command})
    if rows:
        table = pd.DataFrame(rows)
        shown = table.assign(**{"git commit": table["git commit"].map(lambda commit: str(commit)[:12]
                                                                      if isinstance(commit, str) else commit)})
        blocks.append(Table("provenance", "Each run: where and with what it ran (git commits shortened; the CSV "
                                          "has them whole), and the command that reproduces it", shown, data=table))
    else:
        blocks.append(Text("No runs: nothing to trace."))
    return blocks
