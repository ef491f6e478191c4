"""Task rows: a task with some options fixed (`mqar:num_pairs=16`) is a row of its own wherever a list of tasks is
read by the benchmark and the calibration: its runs are the task's with those options, pages show the row as written
(canonical), and the row a run trained is read back from its config."""

import optuna
import pytest
from test_benchmark import TINY_RUNS, plan

from common import schema
from common.options import OptionError
from experiments.benchmark import worker
from experiments.benchmark.definition import rebuild as rebuild_benchmark
from experiments.calibration import runs as calibration
from experiments.run import config as configs
from experiments.run.records import run_path
from experiments.tasks import presets as task_presets

TINY_MQAR_SETS = ["task.seq_len=16", "task.test_size=32", *TINY_RUNS]


def test_a_preset_fixes_the_task_options_it_names_and_keeps_the_profiles_others():
    config = configs.resolve(variant="dense", task="mqar:num_pairs=16", profile="quick", seed=0, device="cpu")
    default = configs.resolve(variant="dense", task="mqar", profile="quick", seed=0, device="cpu")
    assert config.task == "mqar"  # the config holds the task's name and every option
    assert config.task_options.num_pairs == 16 and default.task_options.num_pairs == 8
    assert config.task_options.seq_len == default.task_options.seq_len == 64


@pytest.mark.parametrize(("row", "words"), [
    ("mqar:pairs=16", ["'mqar:pairs=16'", "no option 'pairs'", "did you mean 'num_pairs'"]),
    ("mqar:num_pairs=x", ["'mqar:num_pairs=x'", "'num_pairs' got 'x'", "an integer"]),
    ("mqar:num_pairs", ["has 'num_pairs'", "name:option=value"]),
    ("mqar:num_pairs=4:num_pairs=8", ["each option once"]),
    ("nosuch:seq_len=8", ["Unknown task 'nosuch'"]),
])
def test_a_malformed_row_is_one_sentence_naming_it_and_what_is_accepted(row, words):
    with pytest.raises(ValueError) as error:
        task_presets.parse(row)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_a_set_that_contradicts_a_preset_is_refused_and_one_that_agrees_is_not():
    overrides = configs.parse_sets(["task.num_pairs=8"])
    with pytest.raises(OptionError, match=r"task.num_pairs=8 contradicts preset 'mqar:num_pairs=16'"):
        configs.resolve(variant="dense", task="mqar:num_pairs=16", profile="quick", seed=0, device="cpu",
                        overrides=overrides)
    agreeing = configs.parse_sets(["task.num_pairs=16", "task.num_keys=32"])
    config = configs.resolve(variant="dense", task="mqar:num_pairs=16", profile="quick", seed=0, device="cpu",
                             overrides=agreeing)
    assert (config.task_options.num_pairs, config.task_options.num_keys) == (16, 32)


@pytest.mark.parametrize(("row", "expected"), [
    ("mqar:num_pairs=16", "mqar:num_pairs=16"),
    ("mqar:num_pairs=8", "mqar"),  # the profile's own value: the task itself
    ("flipflop:sparse_ignore_prob=0.99", "flipflop:sparse_ignore_prob=0.99"),
    ("induction:eval_lengths=64", "induction:eval_lengths=64"),  # quick's are 64 and 128
])
def test_the_row_a_run_trained_is_read_back_from_its_config(row, expected):
    config = configs.resolve(variant="dense", task=row, profile="quick", seed=0, device="cpu")
    options = config.to_dict()["task_options"]
    assert task_presets.row_of(config.task, config.profile, options) == expected


def test_a_rows_folder_name_is_a_run_name_that_stays_in_the_runs_folder(tmp_path):
    name = task_presets.folder_name("induction:eval_lengths=64,128")
    assert name == "induction-eval_lengths-64-128"
    assert run_path(tmp_path, f"{name}-dense-s0").parent == tmp_path.resolve()


def test_the_calibration_trains_a_row_under_a_folder_named_after_it():
    (run,) = calibration.plan(["dense"], ["mqar:num_pairs=16"], profile="quick", seed=0, device="cpu")
    assert run.name == "mqar-num_pairs-16-dense-s0" and run.config.task_options.num_pairs == 16


def test_a_benchmark_cell_of_a_row_trains_the_rows_options_and_its_definition_reads_back(tmp_path):
    bench = plan(tmp_path, variants="dense", task="mqar:num_pairs=2,mqar:num_pairs=3", tiny=TINY_MQAR_SETS,
                 capacity_widths="none", capacity_scales="none")
    assert bench.tasks == ("mqar:num_pairs=2", "mqar:num_pairs=3")  # two rows of one task, each its own cell
    jobs = {job.task: job for job in bench.planned_jobs() if job.stage == "confirm"}
    assert {task: bench.config(job).task_options.num_pairs for task, job in jobs.items()} == {
        "mqar:num_pairs=2": 2, "mqar:num_pairs=3": 3}
    again = rebuild_benchmark(schema.stored(bench), study_name=bench.study_name, device="cpu", storage_url=None,
                              runs_dir=tmp_path, heartbeat_seconds=1)
    assert again.tasks == bench.tasks and again.cells == bench.cells
    assert "--task mqar:num_pairs=2,mqar:num_pairs=3 " in schema.command(bench)
    study = optuna.create_study()
    study.enqueue_trial({}, user_attrs={"job": jobs["mqar:num_pairs=3"].to_attr()})
    study.optimize(worker.Objective(bench, quiet=True, should_stop=lambda step: False), n_trials=1)
    assert study.trials[0].user_attrs["result"]["status"] == "completed"


def test_a_row_listed_twice_in_a_benchmark_is_refused_as_written_the_same_way(tmp_path):
    with pytest.raises(OptionError, match=r"Benchmark task 'mqar:gap_power=1.0' is listed twice"):
        plan(tmp_path, variants="dense", task="mqar:gap_power=1,mqar:gap_power=1.0", tiny=TINY_MQAR_SETS)
