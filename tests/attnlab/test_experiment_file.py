"""Experiment files (`--config`): a command's options and config sections in TOML, or a run's config.json; the
command line over the file; a bad key or value is one sentence naming the file, the key and what is accepted."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from attnlab import experiment_file
from attnlab.cli import build_parser, main
from common.schema import from_flags
from experiments import benchmark, revisions
from experiments.run import config as configs
from experiments.schemas.benchmark import BenchmarkOptions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "experiments"
TINY = ["task.seq_len=12", "task.num_keys=4", "task.num_distractors=4", "task.num_buckets=4", "task.test_size=32",
        "model.dim=32", "model.depth=1", "train.batch_size=16", "train.log_every=5", "train.eval_every=10",
        "train.checkpoint_every=10", "train.warmup_steps=2", "train.steps=20"]


def applied(argv):
    parser = build_parser()
    return experiment_file.apply(parser, argv, parser.parse_args(argv))


@pytest.mark.parametrize("command", ["run", "sweep", "benchmark", "calibration"])
def test_every_example_file_is_read_and_its_sections_resolve(command, tmp_path):
    path = EXAMPLES / f"{command}.toml"
    args = applied([command, "--config", str(path)])
    overrides = configs.parse_sets(args.set)
    rows = args.variant.split(",")
    task = (args.task or "mqar").split(",")[0]
    if command == "benchmark":  # built as `attnlab benchmark` builds it, every cell resolved, nothing trained
        assert "lr" not in overrides["train"]
        plan = benchmark.build(from_flags(BenchmarkOptions, vars(args)), device="cpu", runs_dir=tmp_path)
        assert plan.protocol == revisions.PROTOCOL and all(cell.skipped is None for cell in plan.cells)
        return
    config = configs.resolve(variant=rows[-1], task=task, profile=args.profile, seed=args.seed, device="cpu",
                             overrides=configs.for_task(configs.for_variant(overrides, rows[-1], rows), task,
                                                        args.task.split(",")))
    assert config.task == task


def test_the_run_example_gives_its_values_and_the_command_line_overrides_them(tmp_path):
    args = applied(["run", "--config", str(EXAMPLES / "run.toml")])
    assert (args.variant, args.task, args.seed) == ("dense,relative:kind=alibi", "mqar,induction", 0)
    assert "train.steps=1000" in args.set and "task.num_pairs=8" in args.set
    args = applied(["run", "--config", str(EXAMPLES / "run.toml"), "--variant", "local", "--seed", "3",
                    "--set", "train.steps=50"])
    assert (args.variant, args.seed) == ("local", 3)
    assert configs.parse_sets(args.set)["train"]["steps"] == 50  # --set comes after the file's sections


def test_a_runs_config_json_trains_that_run_again_bit_for_bit(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    words = [word for assignment in TINY for word in ("--set", assignment)]
    assert main(["run", "--variant", "local", "--task", "passkey", "--seed", "4", *words, "--device", "cpu",
                 "--runs-dir", str(first), "--quiet"]) == 0
    (config,) = first.glob("*/config.json")
    assert main(["run", "--config", str(config), "--runs-dir", str(second), "--quiet"]) == 0
    (again,) = second.glob("*/config.json")
    assert json.loads(again.read_text()) == json.loads(config.read_text())

    def metrics(path):
        return [{key: value for key, value in json.loads(line).items() if key != "wall_seconds"}
                for line in (path.parent / "metrics.jsonl").read_text().splitlines()]

    assert metrics(again) == metrics(config)


@pytest.mark.parametrize("text, fragments", [
    ("variants = 'dense'\nsteps = 3\n", ["'steps'", "attnlab run does not take", "variants", "[train]"]),
    ("seed = 'one'\n", ["seed = 'one'", "an integer"]),
    ("seed = true\n", ["seed = True", "an integer"]),
    ("device = 'tpu'\n", ["device = 'tpu'", "'cpu', 'cuda'"]),
    ("[train]\nsteps = -1\n", ["[train]", "'steps' got -1", "an integer >= 1"]),
    ("[train]\nstep = 10\n", ["[train]", "no option 'step'", "did you mean 'steps'"]),
    ("[model]\npositions = 'rotary'\n", ["[model]", "'positions' got 'rotary'", "'sinusoidal'"]),
    ("variants = 'local'\n[variant]\nwindow = 'wide'\n", ["[variant]", "'window' got 'wide'", "an integer"]),
    ("variants = 'local'\n[variant]\nwindw = 8\n", ["[variant] has 'windw'", "did you mean 'window'"]),
    ("tasks = 'mqar'\n[task]\nnum_pairs = 0\n", ["[task]", "num_pairs"]),
    ("seed = \n", ["cannot be read"]),
])
def test_a_bad_file_is_one_sentence_naming_the_file_and_the_key(tmp_path, capsys, text, fragments):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    assert main(["run", "--config", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error and str(path) in error, error
    for fragment in fragments:
        assert fragment in error, (fragment, error)
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_a_table_gives_an_option_of_key_value_pairs_its_pairs(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text('tasks = ["induction", "mqar:num_pairs=12"]\n[task_seeds]\ninduction = 12\n'
                    '"mqar:num_pairs=12" = 9\n')
    args = applied(["benchmark", "--config", str(path)])
    assert args.task_seeds == "induction=12,mqar:num_pairs=12=9"  # as --task-seeds reads it, the last '=' the count
    assert applied(["benchmark", "--config", str(path), "--task-seeds", "induction=8"]).task_seeds == "induction=8"


def test_an_empty_list_survives_the_way_through_set(tmp_path):
    assert configs.parse_sets([f"task.eval_lengths={configs.format_value([])}"])["task"]["eval_lengths"] == []


@pytest.mark.parametrize("target, command, seed", [("experiment", "run", "SEED"), ("sweep", "sweep", "SEED"),
                                                   ("benchmark", "benchmark", "SEEDS"),
                                                   ("calibration", "calibration", "SEED")])
def test_make_hands_the_file_over_and_only_the_variables_given(target, command, seed):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MAKE", "MFLAGS"))}

    def line(*variables):
        result = subprocess.run(["make", "-n", "--no-print-directory", target, *variables], cwd=ROOT, env=env,
                                capture_output=True, text=True, stdin=subprocess.DEVNULL)
        return " ".join(result.stdout.replace("\\\n", " ").split())

    given = line("CONFIG=exp.toml", f"{seed}=2")
    assert f"attnlab {command}" in given and "--config exp.toml" in given and f"--{seed.lower()} 2" in given, given
    plain = line("CONFIG=exp.toml")
    assert "--variant" not in plain and "--seed" not in plain and "--profile" not in plain, plain  # the file's
