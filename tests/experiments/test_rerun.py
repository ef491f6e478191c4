"""The command that trains a run's config again: shell-quoted, only what differs from the defaults."""

import shlex
from pathlib import Path

from experiments.run import config as configs
from experiments.run.rerun import rerun_command


def resolved_from(command):
    """The config `make experiment` would resolve from the command, read as the shell and make read it."""
    words = shlex.split(command)
    assert words[:2] == ["make", "experiment"]
    variables = dict(word.split("=", 1) for word in words[2:])
    args = shlex.split(variables.get("ARGS", ""))
    sets = [value for flag, value in zip(args[::2], args[1::2], strict=True) if flag == "--set"]
    kernel = dict(zip(args[::2], args[1::2], strict=True)).get("--kernel", "auto")
    config = configs.resolve(variant=variables["VARIANT"], task=variables["TASK"], profile=variables["PROFILE"],
                             seed=int(variables["SEED"]), device=variables["DEVICE"], kernel=kernel,
                             overrides=configs.for_variant(configs.parse_sets(sets), variables["VARIANT"],
                                                           [variables["VARIANT"]]))
    return config, variables, sets


def test_the_rerun_command_resolves_to_the_same_config_and_sets_only_what_differs():
    config = configs.resolve(variant="sparse", task="passkey", profile="quick", seed=3, device="cpu", kernel="blocked",
                             overrides={"variant": {"pattern": "longformer", "window": 8}, "task": {"seq_len": 40},
                                        "model": {}, "train": {"lr": 0.00123}})
    command = rerun_command(config)
    again, variables, sets = resolved_from(command)
    assert again == config
    assert "RUNS_DIR" not in variables
    # longformer is sparse's default pattern: left out
    assert {assignment.split("=")[0] for assignment in sets} == {"variant.window", "task.seq_len", "train.lr"}
    assert rerun_command(config.to_dict()) == command  # a config.json as read gives the same command


def test_the_rerun_command_quotes_what_the_shell_would_split():
    config = configs.resolve(variant="dense", task="passkey", profile="quick", seed=0, device="cpu")
    command = rerun_command(config, runs_dir=Path("my runs/a;b"))
    _, variables, sets = resolved_from(command)
    assert variables["RUNS_DIR"] == "my runs/a;b" and sets == []
    assert "ARGS" not in variables  # nothing differs from the defaults
    assert "RUNS_DIR" not in rerun_command(config, runs_dir=Path("runs"))
