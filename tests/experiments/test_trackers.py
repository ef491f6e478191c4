"""Trackers (`train.tracker`): every metric line at its step, the resolved config, the summary and the run's id
reach W&B and TensorBoard, read back from the files each writes (W&B offline: nothing touches a network); runs
that belong together are grouped; a resumed run continues its own; a missing package, W&B without a key or with a
mode it refuses, and a TensorBoard folder that cannot be written are refused before a run folder is made; neither
package is imported unless a run asks for it."""

import ast
import json
import os
import sys
import typing
from pathlib import Path

import pytest
from test_train import new_record, tiny_config

from attnlab import experiment_file
from attnlab.cli import build_parser, main
from common.options import OptionError
from experiments.run import config as configs
from experiments.run import trackers
from experiments.run.records import RunRecord
from experiments.run.train import train

ROOT = Path(__file__).resolve().parents[2]
SWEEP_TAGS = {"study": "local-passkey-quick-s0", "trial": 3}
BENCHMARK_TAGS = {"benchmark": "quick", "stage": "tune", "job": "tune/dense/passkey/lr0.003/s0"}
TRAIN_STEPS, EVAL_STEPS = list(range(5, 41, 5)), [20, 40]  # tiny_config: 40 steps, log every 5, evaluate every 20


class Stop(Exception):
    """A run killed between two checkpoints, as far as its records and trackers can tell."""


def stop_at(step):
    def should_stop(current):
        if current == step:
            raise Stop(f"killed at step {step}")
        return False
    return should_stop


def metric(record, name, kind):
    """(step, value) of `name` in every `kind` line of the run's metrics.jsonl."""
    return [(line["step"], line[name]) for line in record.read_metrics() if line["kind"] == kind]


@pytest.fixture(autouse=True)
def wandb_knows_nothing_of_this_machine(tmp_path, monkeypatch):
    """No W&B variable, key, netrc or settings file of the machine running the tests reaches W&B, and W&B reads its
    settings afresh in each test (it keeps them for the process once read)."""
    for name in [name for name in os.environ if name.startswith("WANDB_")] + ["NETRC"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_BASE_URL", "https://api.wandb.ai")
    wandb = sys.modules.get("wandb")
    if wandb is not None:
        wandb.teardown()
    yield
    if sys.modules.get("wandb") is not None:
        sys.modules["wandb"].teardown()


# -- the option ---------------------------------------------------------------------------------------------

def test_the_tracker_is_none_by_default_and_takes_either_name_or_both(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert tiny_config().train.tracker is None
    assert configs.parse_sets(["train.tracker=wandb,tensorboard"])["train"]["tracker"] == ["wandb", "tensorboard"]
    assert tiny_config(tracker=["wandb", "tensorboard"]).train.tracker == ("wandb", "tensorboard")
    assert tiny_config(tracker="tensorboard").train.tracker == ("tensorboard",)
    assert tiny_config(tracker=None).train.tracker is None
    annotation = typing.get_type_hints(configs.TrainConfig)["tracker"]
    assert typing.get_args(typing.get_args(typing.get_args(annotation)[0])[0]) == tuple(trackers.PACKAGES)
    with pytest.raises(OptionError, match="'mlflow'; accepted: a comma-separated list drawn from 'wandb', "):
        tiny_config(tracker="mlflow")
    with pytest.raises(OptionError, match="names 'wandb' twice"):
        tiny_config(tracker=["wandb", "wandb"])


@pytest.mark.parametrize("name", ["wandb", "tensorboard"])
def test_a_missing_tracker_package_is_refused_before_anything_trains_naming_its_extra(tmp_path, monkeypatch, capsys,
                                                                                      name):
    monkeypatch.setitem(sys.modules, name, None)  # as if not installed: find_spec gives None, import raises
    with pytest.raises(OptionError, match=rf"'{name}', whose package {name} is not installed; accepted: pip install "
                                          rf"-e '\.\[{name}\]', or train.tracker=none\."):
        tiny_config(tracker=name)
    code = main(["run", "--variant", "dense", "--task", "passkey", "--set", f"train.tracker={name}",
                 "--runs-dir", str(tmp_path), "--quiet"])
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 2 and f"pip install -e '.[{name}]'" in line
    assert not any(tmp_path.iterdir())  # no run folder: nothing started


def refused_run(tmp_path, capsys, tracker):
    """`attnlab run` with `tracker`: its exit status and its one line on stderr, once sure it made no run folder."""
    runs = tmp_path / "runs"
    code = main(["run", "--variant", "dense", "--task", "passkey", "--set", f"train.tracker={tracker}",
                 "--runs-dir", str(runs), "--quiet"])
    (line,) = capsys.readouterr().err.splitlines()
    assert not runs.exists() or not any(runs.iterdir())  # no run folder, not even one holding config.json
    return code, line


@pytest.mark.parametrize("tracker", ["wandb", "wandb,tensorboard"])
def test_wandb_online_without_an_api_key_is_refused_before_a_run_folder_is_made(tmp_path, capsys, tracker):
    pytest.importorskip("wandb")
    code, line = refused_run(tmp_path, capsys, tracker)
    assert code == 2 and line == (
        "attnlab run: Config section 'train' option 'tracker' names 'wandb' in W&B mode 'online', which logs to "
        "https://api.wandb.ai and needs an API key, and none is set; accepted: WANDB_API_KEY or a netrc entry "
        "(`wandb login` writes one), WANDB_MODE=offline or WANDB_MODE=disabled.")


@pytest.mark.parametrize("mode", ["bogus", ""])
def test_a_wandb_mode_wandb_does_not_accept_is_refused_naming_the_modes_it_does(tmp_path, capsys, monkeypatch, mode):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", mode)
    code, line = refused_run(tmp_path, capsys, "wandb")
    assert code == 2 and line == (
        f"attnlab run: Config section 'train' option 'tracker' names 'wandb', whose setting 'mode' got {mode!r} "
        "(WANDB_MODE, or a W&B settings file); accepted: 'online', 'offline', 'shared', 'disabled', 'dryrun' or 'run'.")
    monkeypatch.setenv("WANDB_MODE", "offline")  # W&B, refused once, reads its settings afresh
    assert tiny_config(tracker="wandb").train.tracker == ("wandb",)


def test_a_wandb_key_of_the_wrong_form_is_refused_with_what_wandb_says_of_it(tmp_path, capsys, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_API_KEY", "short")
    code, line = refused_run(tmp_path, capsys, "wandb")
    assert code == 2
    assert "names 'wandb', whose credentials W&B refuses (WANDB_API_KEY invalid: API key must have 40+ " in line


@pytest.mark.parametrize("found_by", ["WANDB_API_KEY", "netrc", "offline", "dryrun", "disabled"])
def test_wandb_with_a_key_or_a_mode_that_needs_none_resolves(tmp_path, monkeypatch, found_by):
    """The key as wandb.init finds it (never checked against the server: no test touches the network)."""
    pytest.importorskip("wandb")
    key = "k" * 40
    if found_by == "WANDB_API_KEY":
        monkeypatch.setenv("WANDB_API_KEY", key)
    elif found_by == "netrc":
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {key}\n")
    else:
        monkeypatch.setenv("WANDB_MODE", found_by)
    assert tiny_config(tracker="wandb").train.tracker == ("wandb",)


@pytest.mark.parametrize("logdir, where", [("board", "is a file"),
                                           ("board/inner", "lies under {file}, which is a file")])
def test_a_tensorboard_folder_that_is_a_file_is_refused_before_a_run_folder_is_made(tmp_path, capsys, monkeypatch,
                                                                                    logdir, where):
    pytest.importorskip("tensorboard")
    (tmp_path / "board").write_text("")
    monkeypatch.setenv("TENSORBOARD_LOGDIR", str(tmp_path / logdir))
    code, line = refused_run(tmp_path, capsys, "tensorboard")
    assert code == 2 and line == (
        f"attnlab run: Config section 'train' option 'tracker' names 'tensorboard', whose TENSORBOARD_LOGDIR "
        f"{tmp_path / logdir} {where.format(file=tmp_path / 'board')}; accepted: a folder, existing or new, with no "
        "file along its path.")


def test_a_tensorboard_folder_this_user_cannot_write_is_refused_before_a_run_folder_is_made(tmp_path, capsys,
                                                                                             monkeypatch):
    pytest.importorskip("tensorboard")
    from test_filesystem_errors import deny_writing  # as root, chmod stops no one: the refusal is simulated

    (tmp_path / "board").mkdir()
    deny_writing(monkeypatch, tmp_path / "board")
    monkeypatch.setenv("TENSORBOARD_LOGDIR", str(tmp_path / "board"))
    code, line = refused_run(tmp_path, capsys, "tensorboard")
    assert code == 1 and line == (f"attnlab run: The filesystem refused {tmp_path / 'board'}: Permission denied; "
                                  "choose a folder this user can write, or let it write there.")


def test_a_tensorboard_folder_not_yet_made_resolves(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    monkeypatch.setenv("TENSORBOARD_LOGDIR", str(tmp_path / "not" / "yet"))
    assert tiny_config(tracker="tensorboard").train.tracker == ("tensorboard",)


@pytest.mark.parametrize("written", ['"wandb,tensorboard"', '["wandb", "tensorboard"]'])
def test_an_experiment_file_takes_the_trackers_as_the_command_line_does(tmp_path, monkeypatch, written):
    monkeypatch.setenv("WANDB_MODE", "offline")
    path = tmp_path / "exp.toml"
    path.write_text(f"[train]\ntracker = {written}\n")
    argv = ["run", "--config", str(path)]
    parser = build_parser()
    args = experiment_file.apply(parser, argv, parser.parse_args(argv))
    assert configs.parse_sets(args.set)["train"]["tracker"] == ["wandb", "tensorboard"]


def test_neither_package_is_imported_but_inside_the_trackers_that_need_it():
    """`import experiments.run.train` (or the command line, or analysis) never imports wandb or tensorboard."""
    found = []
    for path in sorted(path for package in ("common", "variants", "experiments", "analysis", "attnlab")
                       for path in (ROOT / package).rglob("*.py")):
        text = path.read_text()
        if "wandb" not in text and "tensorboard" not in text:
            continue
        tree = ast.parse(text)
        inside = {id(node) for function in ast.walk(tree) if isinstance(function, ast.FunctionDef)
                  for node in ast.walk(function)}
        for node in ast.walk(tree):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[0] in ("wandb", "tensorboard") or "tensorboard" in name for name in names):
                found.append((path.relative_to(ROOT).as_posix(), id(node) in inside))
    assert found and set(found) == {("experiments/run/trackers.py", True)}


# -- what a tracker is sent ---------------------------------------------------------------------------------

def test_a_metric_line_is_flattened_under_the_names_metrics_jsonl_gives():
    line = {"kind": "eval", "step": 20, "test_accuracy": 0.75, "val_accuracy": 0.5, "wall_seconds": 1.5,
            "accuracy_by_distance": [{"lo": 1, "hi": 3, "accuracy": 1.0, "count": 16},
                                     {"lo": 4, "hi": 9, "accuracy": None, "count": 0}],
            "splits": {"dense": {"test_accuracy": 0.25, "test_loss": 2.0}},
            "attention": [{"layer": 0, "head": 1, "entropy": 0.5, "saturated": False}]}
    assert trackers.scalars(line) == {
        "test_accuracy": 0.75, "val_accuracy": 0.5, "wall_seconds": 1.5,
        "accuracy_by_distance/d1-3/accuracy": 1.0, "accuracy_by_distance/d1-3/count": 16.0,
        "accuracy_by_distance/d4-9/count": 0.0, "splits/dense/test_accuracy": 0.25, "splits/dense/test_loss": 2.0,
        "attention/layer0/head1/entropy": 0.5, "attention/layer0/head1/saturated": 0.0}


@pytest.mark.parametrize("tags, group, job_type, folder", [
    (SWEEP_TAGS, "local-passkey-quick-s0", "trial", "local-passkey-quick-s0/trial"),
    ({"study": "s", "confirm": True, "confirms_trial": 3}, "s", "confirm", "s/confirm"),
    (BENCHMARK_TAGS, "benchmark-quick", "tune", "benchmark-quick/tune"),
    ({}, None, None, ""),
])
def test_sweep_trials_and_benchmark_jobs_are_grouped_by_study_or_benchmark_and_stage(tmp_path, monkeypatch, tags,
                                                                                       group, job_type, folder):
    assert trackers.grouping(tags) == (group, job_type)
    tracker = trackers.TensorBoardTracker(tmp_path / "run-1")
    monkeypatch.delenv("TENSORBOARD_LOGDIR", raising=False)
    assert tracker.log_dir("run-1", tags) == tmp_path / "run-1" / "tensorboard" / folder
    monkeypatch.setenv("TENSORBOARD_LOGDIR", str(tmp_path / "board"))
    assert tracker.log_dir("run-1", tags) == tmp_path / "board" / folder / "run-1"


# -- TensorBoard ----------------------------------------------------------------------------------------------

def tensorboard_events(folder: Path):
    """TensorBoard's own reader over a log folder: the accumulator and each scalar as [(step, value)]."""
    accumulator_module = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    accumulator = accumulator_module.EventAccumulator(str(folder))
    accumulator.Reload()
    return accumulator, {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
                         for tag in accumulator.Tags()["scalars"]}


def text(accumulator, name: str) -> str:
    return accumulator.Tensors(f"{name}/text_summary")[-1].tensor_proto.string_val[0].decode()


def test_tensorboard_holds_every_metric_line_at_its_step_the_config_the_id_and_the_summary(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    monkeypatch.delenv("TENSORBOARD_LOGDIR", raising=False)
    config = tiny_config(tracker="tensorboard")
    record = new_record(tmp_path, config)
    train(config, record, quiet=True, tags=SWEEP_TAGS)
    accumulator, scalars = tensorboard_events(record.path / "tensorboard" / "local-passkey-quick-s0" / "trial")
    for name, kind, steps in (("loss", "train", TRAIN_STEPS), ("accuracy", "train", TRAIN_STEPS),
                              ("test_accuracy", "eval", EVAL_STEPS), ("val_accuracy", "eval", EVAL_STEPS)):
        expected = metric(record, name, kind)
        assert [step for step, _ in expected] == steps
        assert scalars[name] == [(step, pytest.approx(value, rel=1e-6)) for step, value in expected], name
    assert "accuracy_by_distance/d1-3/accuracy" in scalars
    assert text(accumulator, "run_id") == record.run_id
    assert json.loads(text(accumulator, "config"))["train"]["tracker"] == ["tensorboard"]
    assert json.loads(text(accumulator, "tags")) == SWEEP_TAGS
    summary = json.loads(text(accumulator, "summary"))
    assert summary["status"] == "completed" and summary["run_id"] == record.run_id and summary["steps"] == 40


def test_a_resumed_run_appends_to_its_tensorboard_folder_without_repeating_a_step(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    monkeypatch.delenv("TENSORBOARD_LOGDIR", raising=False)
    config = tiny_config(tracker="tensorboard")
    record = new_record(tmp_path, config)
    with pytest.raises(Stop):  # after logging step 25; the last checkpoint is step 20's
        train(config, record, quiet=True, should_stop=stop_at(27))
    assert RunRecord(record.path).load_checkpoint()["step"] == 20
    assert train(config, record, quiet=True).status == "completed"  # resumed at 20: logs 25 again
    folder = record.path / "tensorboard"
    assert len(list(folder.glob("events.out.tfevents.*"))) == 2
    _, scalars = tensorboard_events(folder)
    expected = metric(record, "loss", "train")
    assert scalars["loss"] == [(step, pytest.approx(value, rel=1e-6)) for step, value in expected]
    assert [step for step, _ in scalars["loss"]] == TRAIN_STEPS
    assert [step for step, _ in scalars["test_accuracy"]] == EVAL_STEPS


# -- Weights & Biases -----------------------------------------------------------------------------------------

@pytest.fixture
def wandb_offline(monkeypatch):
    """W&B offline and quiet, its files under the run folder; its service process ended after the test."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")  # leave pytest's captured streams unwrapped
    for name in ("WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_GROUP", "WANDB_JOB_TYPE", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    yield wandb
    wandb.teardown()


def wandb_records(path: Path) -> list:
    """The records of a .wandb file (W&B's transaction log: LevelDB's log format, 32 KiB blocks of chunks with
    a 7-byte header, after a 7-byte file header), each one of W&B's own protobuf `Record`s."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, offset, pending, block = [], 7, b"", 32768
    while offset + 7 <= len(data):
        if block - offset % block < 7:  # a block's tail too short for a header is padding
            offset += block - offset % block
            continue
        length, kind = int.from_bytes(data[offset + 4:offset + 6], "little"), data[offset + 6]
        pending += data[offset + 7:offset + 7 + length]
        offset += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            records.append(wandb_internal_pb2.Record.FromString(pending))
            pending = b""
    return records


def wandb_run(wandb, record: RunRecord) -> list[list]:
    """The records of each offline W&B run under the run folder, oldest first, once W&B's service has written them
    (`finish` returns before it has: it ends with the process, or here)."""
    wandb.teardown()
    return [wandb_records(path) for path in sorted(record.path.glob("wandb/offline-run-*/run-*.wandb"))]


def values(entries) -> dict:
    """A config's, history row's or summary's items by name (W&B names them by `key` or by `nested_key`)."""
    return {entry.key or "/".join(entry.nested_key): json.loads(entry.value_json) for entry in entries}


def history(records) -> dict[int, dict]:
    """Each step's logged values, the lines logged at one step (a train and an eval line) together."""
    rows: dict[int, dict] = {}
    for item in records:
        if item.WhichOneof("record_type") == "history":
            rows.setdefault(item.history.step.num, {}).update(values(item.history.item))
    return rows


def test_wandb_holds_every_metric_line_at_its_step_the_config_the_summary_and_the_grouping(tmp_path, wandb_offline):
    config = tiny_config(tracker="wandb")
    record = new_record(tmp_path, config)
    train(config, record, quiet=True, tags=BENCHMARK_TAGS)
    (records,) = wandb_run(wandb_offline, record)
    (run,) = [item.run for item in records if item.WhichOneof("record_type") == "run"]
    assert (run.run_id, run.display_name, run.project) == (record.run_id, record.run_id, "attnlab")
    assert (run.run_group, run.job_type) == ("benchmark-quick", "tune")
    assert "stage=tune" in run.tags
    logged = values(run.config.update)
    assert logged["train"] == json.loads(json.dumps(config.to_dict()["train"])) and logged["seed"] == 3
    rows = history(records)
    assert sorted(rows) == sorted(set(TRAIN_STEPS + EVAL_STEPS))
    for name, kind in (("loss", "train"), ("accuracy", "train"), ("test_accuracy", "eval"), ("val_accuracy", "eval")):
        assert [(step, rows[step][name]) for step in sorted(rows) if name in rows[step]] == metric(record, name, kind)
    summary = values(entry for item in records if item.WhichOneof("record_type") == "summary"
                     for entry in item.summary.update)
    assert summary["status"] == "completed" and summary["run_id"] == record.run_id
    assert summary["test_accuracy"] == record.read_summary().test_accuracy


def test_a_resumed_run_continues_the_wandb_run_of_its_id(tmp_path, wandb_offline):
    config = tiny_config(tracker="wandb")
    record = new_record(tmp_path, config)
    with pytest.raises(Stop):
        train(config, record, quiet=True, should_stop=stop_at(27))
    train(config, record, quiet=True)
    first, second = wandb_run(wandb_offline, record)  # offline, each session writes its own file of the same run
    ids = [[item.run.run_id for item in records if item.WhichOneof("record_type") == "run"] for records in (first,
                                                                                                            second)]
    assert ids == [[record.run_id], [record.run_id]]
    assert sorted(history(first)) == [5, 10, 15, 20, 25] and sorted(history(second)) == [25, 30, 35, 40]
    assert history(second)[40]["test_accuracy"] == record.read_summary().test_accuracy


def test_a_saved_run_tracked_online_is_read_by_the_analysis_where_wandb_has_no_key(tmp_path, monkeypatch):
    from analysis.runs import run_config

    saved = tiny_config(tracker="tensorboard").to_dict()
    saved["train"]["tracker"] = ["wandb"]  # trained where W&B had a key
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert run_config({"path": str(tmp_path)}).train.tracker == ("wandb",)
    with pytest.raises(OptionError, match="needs an API key"):
        configs.from_dict(saved)  # to train it again here is refused, as a new run is
