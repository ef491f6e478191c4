"""Damaged or busy run records: a checkpoint that does not match its run, a record's JSON that is not UTF-8 JSON, a
run another process trains, and a second Ctrl-C. Each ends in one sentence (exit 2 from the command line, 130 for
the second signal), leaves the record as it was, and a run that can resume still resumes exactly."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from attnlab.cli import main
from experiments import sweep as sweeps
from experiments.run import config as configs
from experiments.run import launch
from experiments.run.build import build
from experiments.run.records import RecordError, RunRecord
from experiments.run.train import train
from experiments.schemas.sweep import SweepOptions

TINY = {"task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 64},
        "model": {"dim": 32, "depth": 1, "heads": 2},
        "train": {"steps": 40, "batch_size": 16, "lr": 3e-3, "warmup_steps": 5, "eval_every": 20,
                  "checkpoint_every": 10, "log_every": 5}}
RUN = "run"


def tiny_config():
    return configs.resolve(variant="dense", task="passkey", profile="quick", seed=3, device="cpu",
                           overrides={"variant": {}, **{section: dict(values) for section, values in TINY.items()}})


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory):
    """A run folder stopped at step 10, with its checkpoint, made once and copied by each test."""
    runs_dir = tmp_path_factory.mktemp("interrupted")
    config = tiny_config()
    record = RunRecord.create(runs_dir, RUN)
    record.write_config(config.to_dict())
    assert train(config, record, quiet=True, should_stop=lambda step: step == 10).status == "interrupted"
    return record.path


@pytest.fixture
def record(interrupted_run, tmp_path):
    shutil.copytree(interrupted_run, tmp_path / RUN)
    return RunRecord(tmp_path / RUN)


def attnlab(*args):
    return subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def signal_handlers():
    """The SIGINT and SIGTERM handlers as they were, restored after a test that installs `StopFlag` in this process."""
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


@pytest.fixture
def resume_refused(capsys, signal_handlers):
    """`attnlab resume` of a record, in this process: exit 2 and one line on stderr, which it returns."""
    def refused(record):
        assert main(["resume", RUN, "--runs-dir", str(record.path.parent), "--quiet"]) == 2
        output = capsys.readouterr()
        assert output.out == "" and len(output.err.splitlines()) == 1, output.err
        return output.err.strip()

    return refused


def one_line_refusal(result):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def files_of(record):
    return {path.name: path.read_bytes() for path in record.path.iterdir() if path.name != "training.lock"}


def damaged(record, damage):
    checkpoint = torch.load(record.checkpoint_path, weights_only=True)
    damage(checkpoint)
    record.save_checkpoint(checkpoint)


MATCH = "; accepted: the checkpoint.pt this run wrote, or none (then the run starts again from step 0)."


@pytest.mark.parametrize("damage, sentence", [
    (lambda checkpoint: checkpoint["model"].update({"embed.weight": torch.zeros(9, 16)}),
     "does not match this run: model parameter 'embed.weight' has shape (9, 16) in the checkpoint and (9, 32) in "
     "this run"),
    (lambda checkpoint: checkpoint.pop("optimizer"), "does not match this run: it lacks 'optimizer'"),
    (lambda checkpoint: checkpoint.update(step="10"),
     "does not match this run: its step is '10' (a str), not an integer >= 0"),
])
def test_resume_from_a_checkpoint_that_does_not_match_the_run_names_what_differs(record, resume_refused, damage,
                                                                                 sentence):
    damaged(record, damage)
    before = files_of(record)
    line = resume_refused(record)
    assert line == f"attnlab resume: Checkpoint {record.checkpoint_path} {sentence}{MATCH}"
    assert files_of(record) == before  # nothing written, the checkpoint left as it was


def test_resume_from_an_empty_checkpoint_says_it_is_empty(record, resume_refused):
    record.checkpoint_path.write_bytes(b"")
    assert resume_refused(record) == (f"attnlab resume: Checkpoint {record.checkpoint_path} is corrupt or not a "
                                      "checkpoint (the file is empty); accepted: a checkpoint.pt written by attnlab.")
    assert record.checkpoint_path.read_bytes() == b""


@pytest.mark.parametrize("damage, what", [
    (lambda checkpoint: checkpoint["optimizer"]["state"][0].update(exp_avg=torch.zeros(2)),
     "the optimiser's exp_avg of parameter 'embed.weight' has shape (2,) in the checkpoint and (9, 32) in this run"),
    (lambda checkpoint: checkpoint["optimizer"]["param_groups"].pop(),
     "its optimiser has groups of [6] parameters in the checkpoint and of [6, 12] in this run"),
    (lambda checkpoint: checkpoint.update(generator=checkpoint["generator"].float()),
     "its generator state holds torch.float32, not torch.uint8"),
    (lambda checkpoint: checkpoint.update(running_sums=torch.zeros(2, dtype=torch.float64)),
     "its running_sums has shape (2,) in the checkpoint and (3,) in this run"),
    (lambda checkpoint: checkpoint.update(wall_seconds=None), "its wall_seconds is None (a NoneType), not a number"),
    (lambda checkpoint: checkpoint["history"].append("line"), "its history is not a list of train and eval lines"),
    (lambda checkpoint: checkpoint["model"].pop("embed.weight"),
     "its model lacks the parameters 'embed.weight', which this run's model has"),
])
def test_training_checks_the_whole_checkpoint_against_the_run_before_writing_anything(record, damage, what):
    """The check sweeps' trials and benchmarks' jobs meet too: they resume through `train`."""
    damaged(record, damage)
    before = files_of(record)
    with pytest.raises(RecordError) as error:
        train(tiny_config(), record, quiet=True)
    assert str(error.value) == f"Checkpoint {record.checkpoint_path} does not match this run: {what}{MATCH}"
    assert files_of(record) == before


def test_a_retried_sweep_trial_whose_checkpoint_does_not_match_stops_the_sweep_with_the_sentence(tmp_path):
    sets = tuple(f"{section}.{name}={value}" for section in ("task", "model", "train")
                 for name, value in TINY[section].items() if name not in ("lr", "warmup_steps"))
    plan = sweeps.build(SweepOptions(variant="dense", task="passkey", sets=sets, trials=1, pruner="none",
                                     heartbeat_seconds=1), device="cpu", runs_dir=tmp_path)
    study = sweeps.open_study(plan)
    assert sweeps.work(plan, study, quiet=True, should_stop=lambda step: step == 10) == 130  # queued again
    record = RunRecord(tmp_path / study.trials[0].user_attrs["run_id"])
    damaged(record, lambda checkpoint: checkpoint.pop("optimizer"))
    with pytest.raises(RecordError) as error:  # the command line prints it as `attnlab sweep: ...`, exit 2
        sweeps.work(plan, study, quiet=True)
    assert str(error.value) == (f"Checkpoint {record.checkpoint_path} does not match this run: it lacks 'optimizer'"
                                f"{MATCH}")


@pytest.mark.parametrize("name", ["config.json", "summary.json"])
def test_resume_of_a_record_whose_json_is_not_utf8_names_the_file(record, resume_refused, name):
    (record.path / name).write_bytes(b'{"status": "interrupted\xff"}')
    assert resume_refused(record) == (
        f"attnlab resume: {record.path / name} is not valid UTF-8 JSON ('utf-8' codec can't decode byte 0xff in "
        "position 23: invalid start byte); accepted: the file a run wrote.")


def test_a_metrics_line_that_is_not_json_is_named_by_its_file_and_line(record):
    lines = (record.path / "metrics.jsonl").read_text().splitlines()
    (record.path / "metrics.jsonl").write_text("\n".join([lines[0], '{"kind": "train", "step": 1', *lines[1:]]))
    with pytest.raises(RecordError) as error:
        record.read_metrics()
    assert str(error.value) == (f"{record.path / 'metrics.jsonl'} is not valid UTF-8 JSON (line 2: Expecting ',' "
                                "delimiter); accepted: the file a run wrote.")


LOCKED = "Run 'run' is being trained by another process (pid {}); accepted: a run no process is training, so resume " \
         "it once that one has ended (Ctrl-C stops it at a checkpoint)."


def test_resume_of_a_run_another_process_trains_is_refused_while_it_holds_the_lock(record):
    before = files_of(record)
    with record.training():  # this process trains it
        result = attnlab("resume", RUN, "--runs-dir", str(record.path.parent), "--quiet")
        assert one_line_refusal(result) == f"attnlab resume: {LOCKED.format(os.getpid())}"
        with pytest.raises(RecordError) as error:  # a sweep's trial or a benchmark's job meets it in `train`
            train(tiny_config(), RunRecord(record.path), quiet=True)
        assert str(error.value) == LOCKED.format(os.getpid())
    assert files_of(record) == before
    assert train(tiny_config(), record, quiet=True).status == "completed"  # once it is released


def test_a_killed_process_leaves_no_stale_lock(record):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from experiments.run.records import RunRecord\n"
         f"with RunRecord(Path({str(record.path)!r})).training():\n    print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(RecordError, match=r"is being trained by another process \(pid \d+\)"):
        with record.training():
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    with record.training():  # free at once
        pass


def test_a_second_ctrl_c_stops_the_run_at_once_with_one_sentence_and_it_resumes_exactly(
        tmp_path, monkeypatch, capsys, signal_handlers):
    config = tiny_config()
    whole = RunRecord.create(tmp_path, "whole")
    whole.write_config(config.to_dict())
    expected = train(config, whole, quiet=True)

    from experiments.run import train as training
    step = training.train_step

    def ctrl_c_twice_at_step_23(run, state):  # between two checkpoints (every 10 steps)
        step(run, state)
        if state.step == 23:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)  # the first is handled: the run is asked to stop at a checkpoint
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)

    monkeypatch.setattr(training, "train_step", ctrl_c_twice_at_step_23)
    record = RunRecord.create(tmp_path, "split")
    record.write_config(config.to_dict())
    assert launch.train_runs([(build(config), record)], tmp_path, quiet=True) == 130
    assert capsys.readouterr().err == (
        f"run split interrupted again before its checkpoint was written; its folder {record.path} keeps the last "
        f"checkpoint; continue it with: attnlab resume split --runs-dir {tmp_path}\n")
    assert torch.load(record.checkpoint_path, weights_only=True)["step"] == 20
    summary = record.read_summary()
    assert (summary.status, summary.error) == ("failed", "KeyboardInterrupt: stopped by a second signal before its "
                                                         "checkpoint was written")
    monkeypatch.undo()
    resumed = train(config, RunRecord.open(tmp_path, "split"), quiet=True)
    assert (resumed.status, resumed.test_loss, resumed.val_loss) == ("completed", expected.test_loss, expected.val_loss)
    assert [line for line in record.read_metrics() if line["kind"] == "eval"][-1]["test_loss"] == expected.test_loss


@pytest.mark.parametrize("command", ["sweep", "benchmark", "calibration", "saturation", "reproduce"])
def test_a_second_ctrl_c_in_any_command_ends_in_one_sentence_and_exit_130(command, monkeypatch, capsys):
    from attnlab import cli

    def interrupted(args):
        raise KeyboardInterrupt  # as StopFlag raises it at the second signal

    monkeypatch.setattr(cli, f"_{command}", interrupted)
    assert cli.main([command]) == 130
    assert capsys.readouterr().err.splitlines() == [
        f"attnlab {command}: stopped by a second interrupt; every finished result and checkpoint is kept, and the "
        "same command (a single run: `attnlab resume RUN_ID`) continues from them."]


def test_a_module_s_extra_state_is_checked_by_its_type_not_read_as_a_tensor():
    from torch import nn

    from experiments.run.checkpoints import weights_mismatch

    class Redrawn(nn.Module):  # as Performer keeps its redraw count and generator beside its weights
        def get_extra_state(self):
            return {"draws": 1}

        def set_extra_state(self, state):
            pass

    assert weights_mismatch({"model": {"_extra_state": {"draws": 3}}}, Redrawn()) is None
    assert weights_mismatch({"model": {"_extra_state": [3]}}, Redrawn()) == (
        "its model entry '_extra_state' is a list, not the dict it holds here")
