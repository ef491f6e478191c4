"""Bad numbers, sizes and names on every command: one sentence naming the value and what is accepted, exit 2, no
traceback, nothing written; and what is allowed but worth knowing (a window that covers the whole sequence) is
said on one line while the run goes on."""

import json
import re
import subprocess
import sys

import pytest
from command_line import refusal

SPEED = ["speed", "--variants", "dense", "--lengths", "16", "--dims", "--step-lengths", "--quiet"]
TINY_RUN = ["--task", "passkey", "--set", "task.seq_len=12", "--set", "task.num_keys=4", "--set", "task.test_size=64",
            "--set", "model.dim=32", "--set", "model.depth=1", "--set", "model.heads=2", "--set", "train.steps=1",
            "--set", "train.batch_size=4", "--quiet"]
KERNELS = ("auto, sdpa, flex, xformers, blocked, linear, lowrank, additive, chunked, reference, naive, direct, masked, "
           "torch")
MEMORY = r"[\d,.]+ GiB, more than the [\d,.]+ GiB of memory on this machine"


@pytest.mark.parametrize("args, sentence", [
    (["--repeats", "0"], "--repeats got 0; accepted: an integer >= 1."),
    (["--batch", "0"], "--batch got 0; accepted: an integer >= 1."),
    (["--batch", "-1"], "--batch got -1; accepted: an integer >= 1."),
    (["--heads", "0"], "--heads got 0; accepted: an integer >= 1."),
    (["--head-dim", "0"], "--head-dim got 0; accepted: an integer >= 1."),
    (["--budget", "0"], "--budget got 0; accepted: a number of seconds > 0 (inf: no budget)."),
    (["--budget", "nan"], "--budget got nan; accepted: a number of seconds > 0 (inf: no budget)."),
    (["--kernels", "nope"], f"--kernels got 'nope'; accepted: {KERNELS}."),
    (["--kernels", "xformers"], "--kernels xformers runs none of the variants asked for on cpu; accepted: a kernel "
                                "they list that runs there (`attnlab list` names each variant's)."),
])
def test_speed_refuses_settings_no_case_could_be_timed_at_before_timing_anything(tmp_path, capsys, args, sentence):
    line = refusal(capsys, [*SPEED, "--out", str(tmp_path / "speed"), *args])
    assert line == f"attnlab speed: {sentence}"
    assert not (tmp_path / "speed").exists()


@pytest.mark.parametrize("argv, sentence", [
    (["speed-train", "--rounds", "0"], "--rounds got 0; accepted: an integer >= 1 (the median of that many rounds)."),
    (["gpu-check", "--seconds", "-1"], "--seconds got -1; accepted: a number of seconds > 0, the time for the whole "
                                       "check."),
    (["sample", "passkey", "--count", "0"], "--count got 0; accepted: an integer >= 1, the examples to print."),
    (["sample", "passkey", "--seed", "-5"], "Training seed got -5; accepted: an integer from 0 to 2**31 - 1 (seeds "
                                            "from 2**31 up are kept for test sets)."),
    (["sample", "passkey", "--set", "train.steps=abc"], "Config section 'train' option 'steps' got 'abc'; accepted: "
                                                        "an integer."),
    (["sample", "passkey", "--set", "train.lr=inf"], "Config section 'train' option 'lr' got inf; accepted: a finite "
                                                     "number."),
])
def test_each_command_names_the_bad_number_and_what_it_accepts(capsys, argv, sentence):
    assert refusal(capsys, argv) == f"attnlab {argv[0]}: {sentence}"


@pytest.mark.parametrize("seed", ["-5", str(2**31)])
def test_run_and_sample_refuse_a_seed_by_one_rule(tmp_path, capsys, seed):
    refused = [refusal(capsys, ["sample", "passkey", "--seed", seed]).removeprefix("attnlab sample: "),
               refusal(capsys, ["run", "--seed", seed, "--runs-dir", str(tmp_path)]).removeprefix("attnlab run: ")]
    assert refused[0] == refused[1] == (f"Training seed got {seed}; accepted: an integer from 0 to 2**31 - 1 (seeds "
                                        "from 2**31 up are kept for test sets).")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, owner, name, value, accepted", [
    # inf passes lr > 0 and weight_decay >= 0: the check on every float option catches it
    (["--set", "train.lr=inf"], "Config section 'train'", "lr", "inf", "a finite number"),
    (["--set", "train.weight_decay=inf"], "Config section 'train'", "weight_decay", "inf", "a finite number"),
    # nan fails every range check first, whose sentence says what the option accepts; so does -inf below a bound
    (["--set", "train.lr=nan"], "Config section 'train'", "lr", "nan", "a number > 0"),
    (["--variant", "softcap", "--set", "variant.cap=inf"], "Variant 'softcap'", "cap", "inf", "a finite number > 0"),
    (["--task", "mqar", "--set", "task.gap_power=-inf"], "Task 'mqar' (profile 'quick')", "gap_power", "-inf",
     "a finite number > 0"),
])
def test_a_float_option_that_is_not_finite_is_refused_before_a_run_folder_exists(tmp_path, capsys, args, owner, name,
                                                                                 value, accepted):
    line = refusal(capsys, ["run", "--task", "passkey", *args, "--runs-dir", str(tmp_path)])
    assert line == f"attnlab run: {owner} option {name!r} got {value}; accepted: {accepted}."
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["benchmark", "reproduce"])
def test_negative_learning_rate_multiples_are_read_as_a_value_and_refused_naming_them(tmp_path, capsys, command):
    argv = [command, "--lr-multiples", "-1,3,9", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "page")]
    line = refusal(capsys, [*argv, *(["--variant", "dense", "--task", "passkey"] if command == "benchmark"
                                          else ["--estimate"])])
    assert line == (f"attnlab {command}: Benchmark lr-multiples got -1.0,3.0,9.0; accepted: at least 3 distinct finite "
                    "numbers > 0, comma-separated, e.g. 0.3,1,3 (tuned on the validation set), or one (every cell at "
                    "that multiple of its task's learning rate, untuned).")
    assert not any(tmp_path.iterdir())


def test_a_model_too_large_for_memory_is_refused_naming_its_size_before_allocating(tmp_path, capsys):
    line = refusal(capsys, ["run", "--task", "passkey", "--set", "model.dim=1000000", "--runs-dir", str(tmp_path)])
    assert re.fullmatch(r"attnlab run: A model of at least 16,000,161,000,000 parameters \(model.dim=1000000, "
                        r"model.depth=2, model.mlp_ratio=4\) on task 'passkey', trained with AdamW, needs " + MEMORY +
                        r"; accepted: a smaller model.dim, model.depth or model.mlp_ratio\.", line), line
    assert not any(tmp_path.iterdir())


def test_a_saved_config_too_large_for_this_machine_is_still_read_by_the_analysis():
    from experiments.run import config as configs

    large = {"variant": {}, "task": {}, "model": {"dim": 1_000_000}, "train": {}}
    config = configs.resolve(variant="dense", task="passkey", profile="quick", seed=0, device="cuda",
                             overrides=large, trains_here=False)  # trained on a larger GPU, read on a laptop
    assert config.model.dim == 1_000_000


def test_a_sample_too_large_for_memory_is_refused_naming_its_size_before_allocating(capsys):
    line = refusal(capsys, ["sample", "passkey", "--count", "100000000"])
    assert re.fullmatch(r"attnlab sample: --count 100000000 of task 'passkey', at 3,088 bytes an example, needs "
                        + MEMORY + r"; accepted: fewer examples\.", line), line


def test_an_experiment_file_cannot_hold_help(tmp_path, capsys):
    (tmp_path / "run.toml").write_text("help = true\n")
    line = refusal(capsys, ["run", "--config", str(tmp_path / "run.toml"), *TINY_RUN, "--runs-dir", str(tmp_path)])
    assert line == (f"attnlab run: Experiment file {tmp_path / 'run.toml'} has 'help', which attnlab run does not "
                    "take; accepted: device, kernel, profile, seed, tasks, variants, and the tables [variant], [task], "
                    "[model], [train].")


@pytest.mark.parametrize("window, note", [(100000, True), (22, True), (21, False)])
def test_a_window_covering_the_whole_sequence_runs_and_says_it_computes_dense_attention(tmp_path, window, note):
    result = subprocess.run([sys.executable, "-m", "attnlab", "run", "--variant", "local", "--set",
                             f"variant.window={window}", *TINY_RUN, "--runs-dir", str(tmp_path)],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    said = (f"note: local_w{window} attends every pair of the 12 positions of task 'passkey', so it computes dense "
            "attention.")
    assert result.stderr.splitlines() == ([said] if note else [])
    (run,) = tmp_path.iterdir()
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"


def test_a_report_filter_that_selects_no_run_says_so_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    line = refusal(capsys, ["report", "--filter", "task=nomatch", "--runs-dir", str(tmp_path / "runs"), "--out",
                                 str(tmp_path / "reports")])
    assert line == ("attnlab report: Filter task=nomatch matches none of the 0 runs; accepted: one of the values "
                    "column task has, of which there are none.")
    assert not (tmp_path / "reports").exists()
