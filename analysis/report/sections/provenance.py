"""The report's provenance: the environment it was built in, and for each run where and with what it ran
and the command that trains it again."""

from __future__ import annotations

import importlib.metadata
import platform
import time

import pandas as pd

from analysis.report.context import Context
from analysis.report.render import Block, Table, Text
from analysis.report.sections.registry import section
from analysis.runs import saved_config
from common.provenance import git_commit
from experiments.run.records import RecordError
from experiments.run.rerun import rerun_command

PACKAGES = ("torch", "numpy", "pandas", "seaborn", "matplotlib", "optuna", "scikit-learn", "einops")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment() -> pd.DataFrame:
    """Where a report is built: the time, the commit, Python, the platform and the packages' versions."""
    rows = [("built", time.strftime("%Y-%m-%d %H:%M:%S %z")), ("attnlab git commit", git_commit() or "unknown"),
            ("python", platform.python_version()), ("platform", platform.platform()),
            *((package, _version(package)) for package in PACKAGES)]
    return pd.DataFrame(rows, columns=["item", "value"])


@section("provenance", "Provenance")
def provenance(context: Context) -> list[Block]:
    blocks: list[Block] = [Table("environment", "The environment this report was built in", environment())]
    rows = []
    for run in context.runs.sort_values(["task", "variant_name", "seed", "run_id"]).itertuples(index=False):
        try:
            command = rerun_command(saved_config(run))
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
