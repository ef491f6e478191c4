"""Folders a command cannot write, met as a user meets them: a path that is a file or lies under one is refused
before anything is written (one sentence, exit 2); a folder the filesystem refuses (read-only, not permitted) is
refused before training, and a disk that fills mid-run ends the command, in one sentence naming the path and the
reason (exit 1), never a traceback, and the run's last checkpoint stays intact."""

import errno
import json
import os
from pathlib import Path

import pytest
import torch
from command_line import refusal
from test_cli import TINY, attnlab

from attnlab.cli import main

FILE_ACCEPTED = "accepted: a folder, existing or new, with no file along its path."
SHORT = [*TINY, "--set", "train.steps=5"]  # what a command would train, were it not refused
ACCEPTS_A_RUNS_FOLDER = [  # each command that writes into the runs folder, with the words it needs besides
    ["run", *SHORT],
    ["resume", "some-run"],
    ["sweep", "--variant", "dense", *SHORT, "--trials", "1"],
    ["benchmark", "--variant", "dense", *SHORT],
    ["calibration", "--variant", "dense", *SHORT],
    ["saturation"],
    ["reproduce", "--estimate"],
]
ACCEPTS_AN_OUT_FOLDER = [["report"], ["saturation"], ["speed", "--device", "cpu"], ["gpu-check"],
                         ["benchmark", "--variant", "dense", *SHORT], ["results"]]


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("words", ACCEPTS_A_RUNS_FOLDER, ids=lambda words: words[0])
def test_a_runs_folder_that_is_a_file_or_under_one_is_refused_in_one_sentence(words, a_file, capsys):
    line = refusal(capsys, [*words, "--runs-dir", str(a_file)], 2)
    assert line == f"attnlab {words[0]}: --runs-dir (or RUNS_DIR) {a_file} is a file; {FILE_ACCEPTED}"
    under = a_file / "runs"
    line = refusal(capsys, [*words, "--runs-dir", str(under)], 2)
    assert line == (f"attnlab {words[0]}: --runs-dir (or RUNS_DIR) {under} lies under {a_file}, which is a file; "
                    f"{FILE_ACCEPTED}")


def test_runs_dir_from_the_environment_naming_a_file_is_refused_in_one_sentence(a_file, capsys, monkeypatch):
    monkeypatch.setenv("RUNS_DIR", str(a_file))
    line = refusal(capsys, ["run", *SHORT], 2)
    assert line == f"attnlab run: --runs-dir (or RUNS_DIR) {a_file} is a file; {FILE_ACCEPTED}"


def test_the_command_line_prints_the_sentence_and_no_traceback(a_file, tmp_path):
    done = attnlab("run", *SHORT, "--runs-dir", str(a_file / "runs"), "--quiet")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"attnlab run: --runs-dir (or RUNS_DIR) {a_file / 'runs'} lies under {a_file}, which is a "
                           f"file; {FILE_ACCEPTED}\n")
    assert sorted(tmp_path.iterdir()) == [a_file]


@pytest.mark.parametrize("words", ACCEPTS_AN_OUT_FOLDER, ids=lambda words: words[0])
def test_an_out_folder_that_is_a_file_is_refused_in_one_sentence(words, a_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a default runs folder would go
    line = refusal(capsys, [*words, "--out", str(a_file)], 2)
    assert line == f"attnlab {words[0]}: --out {a_file} is a file; {FILE_ACCEPTED}"
    assert list(tmp_path.iterdir()) == [a_file]


def test_a_calibration_table_under_a_file_is_refused_in_one_sentence(a_file, tmp_path, capsys):
    line = refusal(capsys, ["calibration", "--variant", "dense", *SHORT, "--runs-dir", str(tmp_path / "runs"),
                            "--out", str(a_file / "calibration.md")], 2)
    assert line == f"attnlab calibration: The folder of --out {a_file} is a file; {FILE_ACCEPTED}"


def test_a_report_of_a_runs_folder_that_is_a_file_says_it_is_a_file(a_file, tmp_path, capsys):
    line = refusal(capsys, ["report", "--runs-dir", str(a_file), "--out", str(tmp_path / "reports")], 2)
    assert line == (f"attnlab report: Runs folder {str(a_file)!r} is a file; accepted: a folder that `attnlab run` "
                    "wrote runs into (RUNS_DIR=, default runs).")


def test_sample_images_into_a_file_is_refused_in_one_sentence(a_file, capsys):
    line = refusal(capsys, ["sample", "pathfinder", "--count", "1", "--images", str(a_file)], 2)
    assert line == f"attnlab sample: --images {a_file} is a file; {FILE_ACCEPTED}"


# -- folders the filesystem refuses ------------------------------------------------------------------------------
# Tests run as root too, whom permissions and chmod do not stop, so the filesystem's answer is simulated in-process:
# os.access denies the folder, or os.statvfs reports its filesystem mounted read-only.


def deny_writing(monkeypatch, folder: Path) -> None:
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not Path(path).is_relative_to(folder)
                                                                and access(path, mode, **kw)))


def mount_read_only(monkeypatch, folder: Path) -> None:
    statvfs = os.statvfs

    def read_only_there(path):
        found = statvfs(path)
        if not Path(path).is_relative_to(folder):
            return found
        return os.statvfs_result((*found[:8], found.f_flag | os.ST_RDONLY, *found[9:]))

    monkeypatch.setattr(os, "statvfs", read_only_there)


READ_ONLY = "Read-only file system; choose a folder on a writable filesystem."
NOT_PERMITTED = "Permission denied; choose a folder this user can write, or let it write there."


@pytest.fixture
def a_run(tmp_path, capsys) -> Path:
    """A runs folder holding one short run, completed."""
    runs = tmp_path / "runs"
    assert main(["run", *SHORT, "--runs-dir", str(runs), "--quiet"]) == 0
    capsys.readouterr()
    return runs


@pytest.mark.parametrize("words", [["run", *SHORT], ["sweep", "--variant", "dense", *SHORT, "--trials", "1"]],
                         ids=lambda words: words[0])
def test_a_read_only_runs_folder_is_refused_before_training(words, tmp_path, capsys, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    mount_read_only(monkeypatch, runs)
    line = refusal(capsys, [*words, "--runs-dir", str(runs), "--quiet"], 1)
    assert line == f"attnlab {words[0]}: The filesystem refused {runs}: {READ_ONLY}"
    assert list(runs.iterdir()) == []


def test_resume_on_a_read_only_filesystem_is_refused_and_leaves_the_run_as_it_was(a_run, capsys, monkeypatch):
    (run,) = a_run.iterdir()
    before = {path.name: path.read_bytes() for path in run.iterdir()}
    mount_read_only(monkeypatch, a_run)
    line = refusal(capsys, ["resume", run.name, "--runs-dir", str(a_run), "--quiet"], 1)
    assert line == f"attnlab resume: The filesystem refused {a_run}: {READ_ONLY}"
    assert {path.name: path.read_bytes() for path in run.iterdir()} == before


def test_a_report_into_a_read_only_folder_is_refused_in_one_sentence(a_run, tmp_path, capsys, monkeypatch):
    (tmp_path / "reports").mkdir()
    mount_read_only(monkeypatch, tmp_path / "reports")
    line = refusal(capsys, ["report", "--runs-dir", str(a_run), "--out", str(tmp_path / "reports")], 1)
    assert line == f"attnlab report: The filesystem refused {tmp_path / 'reports'}: {READ_ONLY}"


def test_a_runs_folder_this_user_cannot_write_is_refused_before_training(tmp_path, capsys, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    deny_writing(monkeypatch, runs)
    line = refusal(capsys, ["run", *SHORT, "--runs-dir", str(runs / "mine"), "--quiet"], 1)
    assert line == f"attnlab run: The filesystem refused {runs / 'mine'}: {NOT_PERMITTED}"
    assert list(runs.iterdir()) == []


def test_sample_images_into_a_folder_this_user_cannot_write_is_refused(tmp_path, capsys, monkeypatch):
    deny_writing(monkeypatch, tmp_path)
    line = refusal(capsys, ["sample", "pathfinder", "--count", "1", "--images", str(tmp_path / "images")], 1)
    assert line == f"attnlab sample: The filesystem refused {tmp_path / 'images'}: {NOT_PERMITTED}"
    assert list(tmp_path.iterdir()) == []


def test_a_disk_that_fills_mid_run_ends_in_one_sentence_and_keeps_the_last_checkpoint(tmp_path, capsys,
                                                                                      monkeypatch):
    fsync, checkpoints = os.fsync, []

    def full_from_the_second_checkpoint(handle):  # as write() or fsync() fail on a full disk: naming no file
        if os.path.basename(os.readlink(f"/proc/self/fd/{handle}")).startswith(".checkpoint.pt."):
            checkpoints.append(handle)
            if len(checkpoints) > 1:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fsync(handle)

    monkeypatch.setattr(os, "fsync", full_from_the_second_checkpoint)
    runs = tmp_path / "runs"
    line = refusal(capsys, ["run", *TINY, "--set", "train.steps=20", "--set", "train.checkpoint_every=10",
                            "--runs-dir", str(runs), "--quiet"], 1)
    (run,) = runs.iterdir()
    assert line == (f"attnlab run: The filesystem refused {run / 'checkpoint.pt'}: No space left on device; free space "
                    "there, or choose a folder on another disk.")
    assert torch.load(run / "checkpoint.pt", weights_only=True)["step"] == 10
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and "No space left on device" in summary["error"]
    assert sorted(path.name for path in run.iterdir()) == ["checkpoint.pt", "config.json", "metrics.jsonl",
                                                           "summary.json", "training.lock"]


# -- attnlab results, which rewrites the checkout it runs in ---------------------------------------------------------

def test_results_outside_the_checkout_is_refused_before_writing_anything(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = refusal(capsys, ["results"], 2)
    assert line == (f"attnlab results: {tmp_path} has no README.md and no docs/records, and `attnlab results` rewrites "
                    "README.md's generated block and docs/ from docs/records/; accepted: run it from the attnlab "
                    "checkout.")
    assert list(tmp_path.iterdir()) == []


def test_results_with_a_readme_without_its_generated_block_is_refused_before_writing_anything(tmp_path, capsys,
                                                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# another project\n")
    (tmp_path / "docs" / "records").mkdir(parents=True)
    line = refusal(capsys, ["results"], 2)
    assert line.startswith("attnlab results: README has no <!-- results:start --> ... <!-- results:end --> block")
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*")) == [
        "README.md", "docs", "docs/records"]
