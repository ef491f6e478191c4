"""The benchmark's options are one schema (`experiments.schemas.benchmark.BenchmarkOptions`): its flags, the keys of
its experiment files, the definition its study stores and the command that continues it all come from the fields,
and the command a page prints for a benchmark is the one earlier versions printed."""

import argparse
import ast
import dataclasses
from pathlib import Path

from attnlab import experiment_file
from attnlab.cli import build_parser
from common import schema
from experiments import benchmark
from experiments.benchmark.definition import upgraded
from experiments.schemas.benchmark import BenchmarkOptions

ROOT = Path(__file__).resolve().parents[2]
TINY = ["model.dim=32", "model.depth=1", "train.batch_size=16", "train.steps=20", "task.seq_len=12",
        "task.test_size=32"]


def built(tmp_path, *argv):
    """The benchmark `attnlab benchmark ARGV` builds, as the command line reads its flags."""
    args = build_parser().parse_args(["benchmark", *argv])
    return benchmark.build(schema.from_flags(BenchmarkOptions, vars(args)), device="cpu", runs_dir=tmp_path)


def test_every_field_with_a_help_text_is_a_flag_of_attnlab_benchmark_and_a_key_of_its_experiment_files(tmp_path):
    (commands,) = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    dests = {action.dest for action in commands.choices["benchmark"]._actions}
    flagged = [field for field in dataclasses.fields(BenchmarkOptions) if field.metadata["help"]]
    assert {schema.dest(field) for field in flagged} <= dests
    assert {field.name for field in dataclasses.fields(BenchmarkOptions)} - {field.name for field in flagged} == {
        "interim_test"}  # a rule of every job, stored, no flag
    experiment = tmp_path / "benchmark.toml"
    experiment.write_text('variants = ["dense"]\ntasks = "passkey"\nprotocol = 1\nseeds = 3\nlr_multiples = [1, 3, 9]\n'
                          'target_accuracy = 0.9\ninterim_validation = "all"\ncapacity_widths = "none"\n'
                          'size_to_dense = false\nname = "from-a-file"\n')
    parser = build_parser()
    argv = ["benchmark", "--config", str(experiment)]
    options = schema.from_flags(BenchmarkOptions, vars(experiment_file.apply(parser, argv, parser.parse_args(argv))))
    assert (options.variants, options.tasks, options.protocol, options.seeds, options.lr_multiples) == (
        ("dense",), ("passkey",), 1, 3, (1.0, 3.0, 9.0))
    assert (options.target_accuracy, options.interim_validation, options.capacity_widths, options.capacity_scales,
            options.size_to_dense, options.name) == (0.9, None, (), (2.0,), False, "from-a-file")


def test_the_definition_is_the_stored_options_and_their_stages_and_reads_back_as_the_same_benchmark(tmp_path):
    bench = built(tmp_path, "--variant", "dense", "--task", "passkey", "--protocol", "1", "--name", "round",
                  *[word for assignment in TINY for word in ("--set", assignment)])
    definition = schema.stored(bench)
    assert set(definition) == {field.name for field in dataclasses.fields(BenchmarkOptions)
                               if field.metadata["stored"]} | {"stages"}
    assert {"name", "storage_url", "heartbeat_seconds"}.isdisjoint(definition)  # where it lives, not what it is
    again = benchmark.rebuild(definition, study_name=bench.study_name, device="cpu",
                              storage_url=None, runs_dir=tmp_path, heartbeat_seconds=60)
    assert again == bench and schema.command(again) == schema.command(bench)


def test_a_definition_stored_before_the_protocol_s_fields_reads_as_the_version_that_stored_it_ran(tmp_path):
    stored = {"variants": ["dense"], "tasks": ["passkey"], "profile": "quick", "seed": 0, "seeds": 2,
              "lr_multiples": [0.3, 1.0, 3.0], "kernel": "auto", "sets": TINY, "capacity_widths": [],
              "capacity_scales": [], "capacity_seeds": 1}  # as the first versions stored one
    today = upgraded(stored)
    assert {key: today[key] for key in ("stages", "extend_grid", "size_to_dense", "target_accuracy", "interim_test",
                                        "interim_validation", "protocol", "screen_seeds", "screen_fraction")} == {
        "stages": ["tune", "confirm", "capacity"], "extend_grid": 0, "size_to_dense": False, "target_accuracy": None,
        "interim_test": True, "interim_validation": None, "protocol": 1, "screen_seeds": 1, "screen_fraction": 1.0}
    older = benchmark.rebuild(stored, study_name="benchmark-older", device="cpu", storage_url=None,
                              runs_dir=tmp_path, heartbeat_seconds=60)
    assert (older.name, older.protocol, older.target, older.tuning_seeds, older.interim_test) == (
        "older", 1, None, [0], True)


def test_the_rerun_command_of_a_protocol_1_benchmark_is_the_one_earlier_versions_printed(tmp_path):
    bench = built(tmp_path, "--variant", "dense,relative:kind=alibi", "--task", "passkey", "--seed", "3", "--seeds",
                  "2", "--lr-multiples", "1", "--capacity-widths", "none", "--capacity-scales", "none",
                  "--extend-grid", "0", "--name", "pinned-one", "--no-size-to-dense", "--protocol", "1",
                  "--target-accuracy", "0.95", "--interim-validation", "all", "--kernel", "sdpa", "--set",
                  "model.dim=32", "--set", "train.steps=20", "--storage", "postgresql://user:secret@db.example/attn",
                  "--heartbeat-seconds", "5")
    assert schema.command(bench) == (
        "attnlab benchmark --variant dense,relative:kind=alibi --task passkey --profile quick --seed 3 --seeds 2 "
        "--lr-multiples 1.0 --capacity-widths none --capacity-scales none --capacity-seeds 1 --extend-grid 0 --name "
        "pinned-one --no-size-to-dense --protocol 1 --target-accuracy 0.95 --interim-validation all --kernel sdpa "
        "--set model.dim=32 --set train.steps=20 --storage 'postgresql://user:***@db.example/attn'")


def test_the_rerun_command_of_a_protocol_2_benchmark_is_the_one_earlier_versions_printed(tmp_path):
    bench = built(tmp_path, "--variant", "dense,local", "--task", "passkey,mqar:num_pairs=8", "--seeds", "4",
                  "--lr-multiples", "0.5,1,2", "--capacity-widths", "0.5", "--capacity-seeds", "2", "--extend-grid",
                  "1", "--screen-seeds", "3", "--screen-fraction", "0.5", "--set", "train.steps=40")
    assert schema.command(bench) == (
        "attnlab benchmark --variant dense,local --task passkey,mqar:num_pairs=8 --profile quick --seed 0 --seeds 4 "
        "--lr-multiples 0.5,1.0,2.0 --capacity-widths 0.5 --capacity-scales none --capacity-seeds 2 --extend-grid 1 "
        "--name quick-protocol2 --screen-seeds 3 --screen-fraction 0.5 --set train.steps=40")
    assert schema.stored(bench) == {
        "variants": ["dense", "local"], "tasks": ["passkey", "mqar:num_pairs=8"], "profile": "quick", "seed": 0,
        "seeds": 4, "lr_multiples": [0.5, 1.0, 2.0], "kernel": "auto", "sets": ["train.steps=40"],
        "capacity_widths": [0.5], "capacity_scales": [], "capacity_seeds": 2, "stages": ["tune", "confirm", "capacity"],
        "extend_grid": 1, "size_to_dense": True, "target_accuracy": None, "interim_test": False,
        "interim_validation": None, "protocol": 2, "screen_seeds": 3, "screen_fraction": 0.5,  # as earlier versions
        "task_seeds": {}}  # and, since rows may train more seeds, none that does


def test_the_target_accuracy_is_named_by_the_train_config_the_stop_the_summary_and_the_benchmark_s_schema_only():
    naming = sorted(str(path.relative_to(ROOT)) for package in ("common", "variants", "experiments", "analysis")
                    for path in (ROOT / package).rglob("*.py") if "target_accuracy" in path.read_text())
    assert len(naming) <= 4, naming
    schema_file = ROOT / "experiments" / "schemas" / "benchmark.py"
    assert "target_accuracy" in {node.target.id for node in ast.walk(ast.parse(schema_file.read_text()))
                                 if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def test_each_commands_options_are_written_once_no_class_keeps_its_own_stored_form_or_command_line():
    # The definition, the options read back and the rerun command come from the fields (`common.schema`), for every
    # command alike; a method of one class writing them again is how one field came to be written in 11 files.
    from experiments.schemas.calibration import CalibrationOptions
    from experiments.schemas.reproduce import ReproduceOptions
    from experiments.schemas.sweep import SweepOptions
    from experiments.sweep import Sweep

    classes = (BenchmarkOptions, benchmark.Benchmark, SweepOptions, Sweep, CalibrationOptions, ReproduceOptions)
    kept = [f"{cls.__name__}.{name}" for cls in classes for name in ("definition", "from_definition", "command",
                                                                     "prepare") if hasattr(cls, name)]
    assert kept == []
    packages = ("experiments", "analysis", "attnlab")
    assert [path for package in packages for path in (ROOT / package).rglob("*_options.py")] == []
