"""The command that trains a run's config again, as a user types it:

    make experiment VARIANT=local TASK=passkey PROFILE=quick SEED=0 DEVICE=cpu ARGS="--set variant.window=16"

One `--set` for each field that differs from the profile's defaults, every value shell-quoted, so that
the command trains the same resolved config. The sweep prints it for its best trial; the report lists
it for every run.
"""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path
from typing import Any

from experiments.run import config as configs

HEAD = ("variant", "task", "profile", "seed", "device")  # the Makefile's own variables
SECTIONS = (("variant_options", "variant"), ("task_options", "task"), ("model", "model"), ("train", "train"))


@functools.cache
def _defaults(variant: str, task: str, profile: str, device: str, kernel: str) -> dict[str, Any] | None:
    try:  # as config.json holds it: tuples as lists
        return json.loads(configs.to_json(configs.resolve(variant=variant, task=task, profile=profile, seed=0,
                                                          device=device, kernel=kernel)))
    except ValueError:
        return None


def rerun_command(config: configs.RunConfig | dict[str, Any], *, runs_dir: Path | None = None) -> str:
    """The `make experiment` command that trains `config` (a RunConfig, or a config.json as read) again:
    --set for each field that differs from the profile's defaults (every field, when the defaults cannot
    be resolved), and RUNS_DIR when `runs_dir` is given and is not the default `runs`."""
    # As config.json holds it (tuples as lists), so that values compare equal to the defaults'
    config = json.loads(json.dumps(config.to_dict() if isinstance(config, configs.RunConfig) else config))
    head = {name: config.get(name) for name in HEAD}
    kernel = config.get("kernel", "auto")
    defaults = _defaults(*(str(head[name]) for name in ("variant", "task", "profile", "device")), str(kernel)) or {}
    assignments = []
    for section, prefix in SECTIONS:
        default = defaults.get(section, {})
        for name, value in (config.get(section) or {}).items():
            if name not in default or default[name] != value:
                assignments.append(shlex.quote(f"{prefix}.{name}={configs.format_value(value)}"))
    args = " ".join([*(["--kernel", shlex.quote(str(kernel))] if kernel != "auto" else []),
                     *(f"--set {assignment}" for assignment in assignments)])
    variables = [f"{name.upper()}={shlex.quote(str(head[name]))}" for name in HEAD]
    if runs_dir is not None and runs_dir != Path("runs"):
        variables.append(f"RUNS_DIR={shlex.quote(str(runs_dir))}")
    return f"make experiment {' '.join(variables)}" + (f' ARGS="{args}"' if args else "")
