"""Real tiny runs, a real sweep study and a real speed table, made once per test session.

The runs folder holds: dense and local (window 4) on passkey, seeds 0 and 1 (completed); three sweep
trials of local in a study stored as the sweep command stores it (two complete, one pruned); a failed
run whose variant name and error are HTML; a record whose summary.json is not JSON; a
`attnlab speed` CSV of dense and local at three lengths; and a tiny softmax saturation study at
saturation/quick, made by the study runner and its read-back (`saturation_dir`, also used on its own).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import optuna
import pytest
import torch
from filelock import FileLock
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from analysis import build_report
from analysis.saturation import readback as saturation_readback
from experiments import saturation
from experiments.run import config as configs
from experiments.run.launch import start_record
from experiments.run.train import train
from experiments.speed import kernels as speed

TINY = {
    "task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 32},
    "model": {"dim": 32, "depth": 1, "heads": 2},
    "train": {"steps": 20, "batch_size": 16, "eval_every": 10, "checkpoint_every": 10, "log_every": 5},
}
STUDY = "local-passkey-tiny"
# Every study of `make saturation` at toy sizes: 23 runs of 20 steps (B's dense with three other normalisers at
# head dim 8 only), 32 softmax rows of init statistics at unit variance and 64 of the other four normalisers.
SATURATION = dataclasses.replace(
    saturation.SETTINGS["quick"], name="quick", head_dims=(8, 64), key_counts=(16, 256), temperatures=(0.5, 2.0),
    samples=64, dynamics_head_dims=(8, 16), normaliser_head_dims=(8,), seeds=(0,), steps=20, batch_size=8,
    eval_every=10, additive_hidden_dim=8,
    learning_rates=(1e-3, 1e-1), lr_seeds=(0,), fading_key_counts=(2, 16, 256), length_seeds=(0,), length_steps=20,
    train_length=12, eval_lengths=(24,), seq_len=12, model={"dim": 16, "depth": 1, "heads": 2},
)
EVIL_NAME = "<script>alert(1)</script>"
EVIL_ERROR = "<img src=x onerror=alert(2)>"
CORRUPT_RUN = "20260101-000000-broken-passkey-s0-0000"
EVIL_RUN = "20260101-000000-evil-passkey-s7-0000"


def tiny_config(variant: str, seed: int, variant_options: dict | None = None, train: dict | None = None):
    overrides = {"variant": variant_options or {}, "task": dict(TINY["task"]), "model": dict(TINY["model"]),
                 "train": {**TINY["train"], **(train or {})}}
    return configs.resolve(variant=variant, task="passkey", profile="quick", seed=seed, device="cpu",
                           overrides=overrides)


def _sweep(runs: Path) -> None:
    """A study as `attnlab sweep` stores it: journal under sweeps/, trials tagged runs, run_id attributes."""
    (runs / "sweeps").mkdir()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(runs / "sweeps" / f"{STUDY}.journal")))
    study = optuna.create_study(storage=storage, study_name=STUDY, direction="maximize")
    study.set_user_attr("definition", {"variant": "local", "task": "passkey", "profile": "quick", "seed": 0})
    space = {"variant.window": IntDistribution(2, 8), "train.lr": FloatDistribution(1e-4, 1e-2, log=True)}
    for params, prune in (({"variant.window": 2, "train.lr": 3e-3}, False),
                          ({"variant.window": 8, "train.lr": 1e-2}, False),
                          ({"variant.window": 4, "train.lr": 1e-4}, True)):
        study.enqueue_trial(params)
        trial = study.ask(space)
        config = tiny_config("local", 0, {"window": params["variant.window"]}, {"lr": params["train.lr"]})
        record = start_record(runs, config)
        trial.set_user_attr("run_id", record.run_id)

        def should_prune(step, accuracy, trial=trial, prune=prune):
            trial.report(accuracy, step)
            return prune

        summary = train(config, record, quiet=True, should_prune=should_prune,
                        tags={"study": STUDY, "trial": trial.number})
        if prune:
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, summary.test_accuracy)


def _hand_made_records(runs: Path, model_run: Path) -> None:
    """A failed run whose strings are HTML, and a record whose summary.json is not JSON."""
    evil = runs / EVIL_RUN
    shutil.copytree(model_run, evil, ignore=shutil.ignore_patterns("checkpoint.pt"))
    config = json.loads((evil / "config.json").read_text())
    config["seed"] = 7
    (evil / "config.json").write_text(json.dumps(config))
    summary = json.loads((evil / "summary.json").read_text())
    summary.update(run_id=EVIL_RUN, seed=7, status="failed", error=EVIL_ERROR, variant_name=EVIL_NAME)
    (evil / "summary.json").write_text(json.dumps(summary))
    broken = runs / CORRUPT_RUN
    broken.mkdir()
    shutil.copy(model_run / "config.json", broken / "config.json")
    (broken / "summary.json").write_text('{"status": "completed", "test_accuracy": ')


def _once(tmp_path_factory, name: str, build) -> Path:
    """`build(folder)` once per test session, also when pytest-xdist runs the tests in several workers:
    the first worker builds under a file lock in the folder the workers share, the others reuse it."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (shared / f"{name}.built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (shared / f"{name}.built").touch()
    return folder


def _make_saturation(folder: Path) -> None:
    torch.set_num_threads(1)
    study = folder / "saturation" / "quick"
    assert saturation.run(SATURATION, study, workers=1, quiet=True) == []
    saturation_readback.write(study)  # as `attnlab saturation` does after the runs


@pytest.fixture(scope="session")
def saturation_dir(tmp_path_factory) -> Path:
    """A study folder as `make saturation` writes it (RUNS_DIR/saturation/quick), tables and figures included."""
    return _once(tmp_path_factory, "saturation-study", _make_saturation) / "saturation" / "quick"


def _make_runs(runs: Path, saturation_dir: Path) -> None:
    torch.set_num_threads(1)
    for variant, options in (("dense", {}), ("local", {"window": 4})):
        for seed in (0, 1):
            config = tiny_config(variant, seed, options)
            train(config, start_record(runs, config), quiet=True)
    _sweep(runs)
    model_run = next(path for path in sorted(runs.iterdir()) if "-dense-" in path.name)
    _hand_made_records(runs, model_run)
    # Tensors of 64 KiB and more, so that every call's peak memory is measurable (not reused heap).
    speed.run(specs=["dense", "local:window=16"], kernels=["auto"], lengths=[256, 512, 1024], causal_modes=[True],
              batch=1, heads=2, head_dim=32, repeats=1, budget=5.0, device=torch.device("cpu"),
              out_dir=runs / "speed", quiet=True)
    shutil.copytree(saturation_dir, runs / "saturation" / "quick")


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory, saturation_dir) -> Path:
    return _once(tmp_path_factory, "analysis-runs", lambda runs: _make_runs(runs, saturation_dir))


@pytest.fixture(scope="session")
def report(runs_dir, tmp_path_factory) -> Path:
    """The report of the whole runs folder: its index.html."""
    folder = _once(tmp_path_factory, "analysis-reports", lambda folder: build_report(runs_dir, folder))
    return folder / "all" / "index.html"
