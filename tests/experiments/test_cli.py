"""The command line as a user meets it: runs, samples, listings, resume after a kill, and bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from experiments import tasks

TINY = ["--task", "passkey", "--set", "task.seq_len=12", "--set", "task.num_keys=4", "--set", "task.test_size=64",
        "--set", "task.num_buckets=4", "--set", "model.dim=32", "--set", "model.depth=1", "--set", "model.heads=2",
        "--set", "train.batch_size=16", "--set", "train.log_every=5", "--set", "train.eval_every=20"]


def attnlab(*args, check=False, **kwargs):
    result = subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, **kwargs)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def only_run(runs_dir):
    (run,) = [path for path in runs_dir.iterdir() if path.is_dir()]
    return run


def test_run_prints_the_results_table_and_saves_the_runs(tmp_path):
    result = attnlab("run", "--variant", "dense,local", *TINY, "--set", "train.steps=20", "--set", "variant.window=2",
                     "--runs-dir", str(tmp_path), "--quiet", check=True)
    assert "task passkey" in result.stdout and "d1-3" in result.stdout
    assert "dense " in result.stdout and "local_w2 " in result.stdout
    summaries = [json.loads((path / "summary.json").read_text()) for path in tmp_path.iterdir()]
    assert sorted(summary["variant_name"] for summary in summaries) == ["dense", "local_w2"]
    assert all(summary["status"] == "completed" for summary in summaries)
    for summary in summaries:
        assert summary["run_id"] in result.stdout


def test_run_sets_the_normaliser_of_dense_local_and_sparse_and_names_their_runs_by_it(tmp_path):
    attnlab("run", "--variant", "dense,local,sparse", *TINY, "--set", "train.steps=5",
            "--set", "variant.normaliser=entmax15", "--runs-dir", str(tmp_path), "--quiet", check=True)
    runs = {json.loads((path / "summary.json").read_text())["variant_name"]: path for path in tmp_path.iterdir()}
    assert sorted(runs) == ["dense_nentmax15", "local_w32_nentmax15", "sparse_longformer_w64_g1_nentmax15"]
    for name, path in runs.items():
        assert json.loads((path / "summary.json").read_text())["status"] == "completed"
        assert json.loads((path / "config.json").read_text())["variant_options"]["normaliser"] == "entmax15"
        assert f"-{name}-passkey-" in path.name  # run folders differ by normaliser


def test_sample_prints_readable_lines_and_json(tmp_path):
    text = attnlab("sample", "passkey", "--count", "3", "--seed", "1", check=True).stdout.splitlines()
    assert len(text) == 3 and all(line.endswith(tuple(f"-> K{key}" for key in range(16))) or "->" in line
                                  for line in text)
    lines = attnlab("sample", "mqar", "--count", "2", "--format", "json", check=True).stdout.splitlines()
    examples = [json.loads(line) for line in lines]
    assert len(examples) == 2 and {"input", "label", "metadata"} <= set(examples[0])
    again = attnlab("sample", "mqar", "--count", "2", "--format", "json", check=True).stdout.splitlines()
    assert again == lines


def test_list_names_variants_tasks_and_profiles():
    output = attnlab("list", check=True).stdout
    for word in ("dense", "local", "sparse", "passkey", "mqar", "quick", "standard", "long", "Claims", "zoology_mqar"):
        assert word in output


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_resumes_to_the_metrics_of_an_uninterrupted_one(tmp_path, how):
    steps = ["--set", "train.steps=400", "--set", "train.checkpoint_every=10"]
    whole_dir, split_dir = tmp_path / "whole", tmp_path / "split"
    attnlab("run", *TINY, *steps, "--runs-dir", str(whole_dir), "--quiet", check=True)
    process = subprocess.Popen([sys.executable, "-m", "attnlab", "run", *TINY, *steps, "--runs-dir",
                                str(split_dir), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(split_dir.glob("*/checkpoint.pt")):
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(how)
    _, stderr = process.communicate(timeout=60)
    run = only_run(split_dir)
    status = json.loads((run / "summary.json").read_text())["status"]
    if how == signal.SIGTERM:
        assert process.returncode == 130 and status == "interrupted", stderr
        assert f"attnlab resume {run.name}" in stderr
    else:
        assert process.returncode == -signal.SIGKILL and status == "running"
    resumed = attnlab("resume", run.name, "--runs-dir", str(split_dir), "--quiet", check=True)
    assert run.name in resumed.stdout
    split = json.loads((run / "summary.json").read_text())
    whole = json.loads((only_run(whole_dir) / "summary.json").read_text())
    assert split["status"] == whole["status"] == "completed"
    for key in ("test_accuracy", "test_loss", "accuracy_by_distance", "steps"):
        assert split[key] == whole[key], key


def one_line_error(result):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("args, fragments", [
    (["run", "--variant", "dnse"], ["'dnse'", "did you mean 'dense'", "local"]),
    (["run", "--task", "paskey"], ["'paskey'", "did you mean 'passkey'", "mqar"]),
    (["run", "--profile", "huge"], ["'huge'", "quick"]),
    (["run", "--set", "train.lrr=1"], ["'lrr'", "did you mean 'lr'"]),
    (["run", "--set", "trian.lr=1"], ["'trian'", "train"]),
    (["run", "--set", "train.lr"], ["malformed", "section.field=value"]),
    (["run", "--set", "train.steps=abc"], ["'steps'", "'abc'", "integer"]),
    (["run", "--set", "model.dim=30"], ["'dim'", "30", "multiple of heads"]),
    (["run", "--set", "task.seq_len=1"], ["'seq_len'", "1"]),
    (["run", "--task", "pathfinder", "--set", "task.num_distractors=7"], ["9 paths", "in 0 of 2000", "at least 10"]),
    (["run", "--variant", "local", "--set", "variant.window=0"], ["'window'", "0", ">= 1"]),
    (["run", "--variant", "dense", "--set", "variant.window=8"], ["variant.window", "'dense'"]),
    (["resume", "no-such-run"], ["'no-such-run'", "No run"]),
    (["resume", "../outside"], ["'../outside'", "run name"]),
    (["sample", "nope"], ["'nope'", "passkey"]),
])
def test_bad_input_gets_one_sentence_and_exit_code_2(tmp_path, args, fragments):
    line = one_line_error(attnlab(*args, "--runs-dir", str(tmp_path)) if args[0] != "sample" else attnlab(*args))
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not any(tmp_path.iterdir())  # nothing was created


def test_a_calibration_record_it_cannot_merge_into_is_refused_before_anything_trains(tmp_path):
    (tmp_path / "calibration.csv").write_text("task,variant\npasskey,dense\n")
    line = one_line_error(attnlab("calibration", "--variant", "dense", "--task", "passkey", "--runs-dir",
                                  str(tmp_path / "runs"), "--out", str(tmp_path / "calibration.md")))
    assert "calibration.csv" in line and "lacks the columns" in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "calibration.md").exists()


def test_a_corrupt_checkpoint_is_named_and_left_as_it_was(tmp_path):
    attnlab("run", *TINY, "--set", "train.steps=10", "--runs-dir", str(tmp_path), "--quiet", check=True)
    run = only_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    summary["status"] = "interrupted"
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "checkpoint.pt").write_bytes(b"not a checkpoint")
    line = one_line_error(attnlab("resume", run.name, "--runs-dir", str(tmp_path)))
    assert "checkpoint.pt" in line and "corrupt" in line
    assert (run / "checkpoint.pt").read_bytes() == b"not a checkpoint"


def test_resuming_a_completed_run_is_refused(tmp_path):
    attnlab("run", *TINY, "--set", "train.steps=5", "--runs-dir", str(tmp_path), "--quiet", check=True)
    line = one_line_error(attnlab("resume", only_run(tmp_path).name, "--runs-dir", str(tmp_path)))
    assert "already completed" in line


def test_help_describes_the_commands():
    output = attnlab("--help", check=True).stdout
    for command in ("run", "resume", "sample", "list", "speed", "speed-train"):
        assert command in output
    assert "--set" in attnlab("run", "--help", check=True).stdout


@pytest.fixture(autouse=True)
def _no_ci_progress(monkeypatch):
    monkeypatch.setenv("CI", os.environ.get("CI", "true"))


@pytest.mark.parametrize("text, value", [("256,512", [256, 512]), ("3e-4", 3e-4), ("true", True), ("none", None),
                                         ("a, 2", ["a", 2]), ("local", "local")])
def test_set_values_are_parsed_into_numbers_flags_and_lists(text, value):
    from experiments.run import config as configs

    assert configs.parse_value(text) == value


def test_sample_saves_pathfinder_images_and_refuses_tasks_without_images(tmp_path):
    done = attnlab("sample", "pathfinder", "--count", "2", "--images", str(tmp_path / "images"))
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2
    written = sorted(path.name for path in (tmp_path / "images").glob("*.png"))
    side = tasks.create_task("pathfinder", profile="quick").image_size
    assert len(written) == 2 and all(name.startswith(f"pathfinder_{side}x{side}_") for name in written)
    refused = attnlab("sample", "passkey", "--images", str(tmp_path / "other"))
    assert refused.returncode == 2 and "'passkey' has no images" in refused.stderr and not refused.stdout
    assert not (tmp_path / "other").exists()


def test_sample_prints_listops_in_lra_notation():
    done = attnlab("sample", "listops", "--count", "3")
    assert done.returncode == 0
    for line in done.stdout.splitlines():
        expression, answer = line.split(" -> ")
        assert expression.startswith("[") and expression.endswith("]") and answer.isdigit() and "_" not in line


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_backend_is_an_alias_of_kernel(command):
    from attnlab.cli import build_parser

    assert build_parser().parse_args([command, "--backend", "sdpa"]).kernel == "sdpa"


@pytest.mark.parametrize("command, old_name", [("speed", "bench-variants"), ("speed-train", "bench-train")])
def test_the_timing_commands_answer_to_their_old_names_too(command, old_name):
    from attnlab.cli import build_parser

    parser = build_parser()
    assert vars(parser.parse_args([old_name])) == {**vars(parser.parse_args([command])), "command": old_name}


def test_the_modules_that_do_the_work_do_not_import_the_command_line():
    # The command line is the top layer: it parses and dispatches, and nothing below it imports it.
    code = ("import sys, experiments.sweep, experiments.run.launch, attnlab.catalogue, experiments.speed.kernels; "
            "sys.exit('attnlab.cli' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_bidirectional_variant_skips_the_tasks_that_need_causality_with_the_reason_and_runs_the_others(tmp_path):
    common = ["--set", "task.seq_len=12", "--set", "task.test_size=64", "--set", "model.dim=32", "--set",
              "model.depth=1", "--set", "model.heads=2", "--set", "train.batch_size=16", "--set", "train.steps=5",
              "--set", "train.log_every=5", "--set", "train.eval_every=5", "--runs-dir", str(tmp_path), "--quiet"]
    result = attnlab("run", "--variant", "linformer", "--task", "flipflop,passkey", *common, check=True)
    assert ("skipped linformer on flipflop: variant 'linformer' is bidirectional in its paper and task 'flipflop' "
            "needs causal attention") in result.stderr
    (summary,) = [json.loads((path / "summary.json").read_text()) for path in tmp_path.iterdir() if path.is_dir()]
    assert summary["status"] == "completed" and summary["variant_name"] == "linformer_r64_sharenone"
    config = json.loads((tmp_path / summary["run_id"] / "config.json").read_text())
    assert config["task"] == "passkey" and config["model"]["causal"] is False
    alone = attnlab("run", "--variant", "linformer", "--task", "flipflop", *common)
    assert alone.returncode == 2 and "Traceback" not in alone.stderr and alone.stderr.count("\n") == 1
    assert "attnlab run: variant 'linformer' is bidirectional" in alone.stderr
    assert [path for path in tmp_path.iterdir() if path.is_dir()] == [tmp_path / summary["run_id"]]  # nothing started
