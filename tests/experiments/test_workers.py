"""Workers read what they join from the storage: a worker process is started with only where the storage is, the
study's name and what is local to it, and runs the trials or jobs of the definition the study holds; no module
builds a command line from a definition; studies that older versions stored are joined and read."""

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from test_benchmark import TINY, plan
from test_sweep import in_process_sweep

from common import schema
from common.options import OptionError
from experiments import benchmark
from experiments.benchmark import Benchmark, Ledger
from experiments.benchmark.command import worker_settings
from experiments.benchmark.definition import rebuild as rebuild_benchmark
from experiments.benchmark.definition import upgraded
from experiments.claims import training
from experiments.claims.lanes import Lanes
from experiments.sweep import Sweep
from experiments.sweep.definition import rebuild as rebuild_sweep
from experiments.sweep.pool import WorkerSettings, worker_count
from experiments.sweep.storage import open_storage

ROOT = Path(__file__).resolve().parents[2]
LOCAL = {"kind", "study", "storage_url", "journal", "runs_dir", "device", "heartbeat_seconds", "quiet", "trials",
         "index"}


def start_worker(settings: WorkerSettings, definition: dict) -> subprocess.CompletedProcess:
    """Worker 0 of `settings`, started as its command starts it; its command holds none of `definition`."""
    command = settings.command(0)
    assert command[:3] == [sys.executable, "-m", "experiments.sweep.worker"] and len(command) == 4
    local = json.loads(command[3])
    assert set(local) == LOCAL and not set(definition) & LOCAL
    shown = json.dumps({key: value for key, value in local.items() if key not in ("study", "journal")})  # by name
    for value in ("passkey", "local", "dense", "seq_len", "window", "--set", "--variant"):  # the definition's
        assert value not in shown, value
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)


def test_a_benchmark_worker_given_only_the_storage_and_study_runs_the_jobs_of_the_stored_definition(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", seeds=1, capacity_widths="none", capacity_scales="none")
    study = benchmark.open_study(bench)  # the study holds the definition, as `attnlab benchmark` leaves it
    settings = WorkerSettings("benchmark", bench.study_name, None, str(bench.journal), str(tmp_path), "cpu", 1, True)
    done = start_worker(settings, schema.stored(bench))
    assert done.returncode == 0, done.stderr
    ledger = Ledger(bench, study.get_trials())
    assert ledger.complete and len(ledger.states) == 3 + 1  # the grid's 3 learning rates, then 1 seed
    configs = [json.loads(path.read_text()) for path in bench.folder.glob("*/config.json")]
    assert len(configs) == 4 and {config["task_options"]["seq_len"] for config in configs} == {12}  # --set's size
    assert done.stdout.count("[worker 0] ") == 4 and "[4 of 4 jobs settled]" in done.stdout


def test_a_sweep_worker_given_only_the_storage_and_study_runs_the_trials_of_the_stored_definition(tmp_path):
    sweep, study = in_process_sweep(tmp_path, "variant.window=8:10", trials=2)
    settings = WorkerSettings("sweep", sweep.study_name, None, str(sweep.journal), str(tmp_path), "cpu", 1, True,
                              trials=2)
    done = start_worker(settings, schema.stored(sweep))
    assert done.returncode == 0, done.stderr
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == 2 and all(8 <= trial.params["variant.window"] <= 10 for trial in complete)  # its space
    for trial in complete:
        config = json.loads((tmp_path / trial.user_attrs["run_id"] / "config.json").read_text())
        assert config["task_options"]["seq_len"] == 12 and config["variant"] == "local"


def test_a_worker_of_a_study_that_holds_no_definition_says_so_in_one_sentence(tmp_path):
    settings = WorkerSettings("benchmark", "benchmark-nothing", None, str(tmp_path / "jobs.journal"), str(tmp_path),
                              "cpu", 1, True)
    done = subprocess.run(settings.command(0), cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "Study 'benchmark-nothing' in " in done.stderr and "holds no benchmark's definition" in done.stderr


def test_no_module_builds_a_command_line_from_a_definition():
    assert not hasattr(Benchmark, "arguments") and not hasattr(Sweep, "arguments")
    assert not any(field in Sweep.__dataclass_fields__ for field in ("sets", "space_args", "space_file"))
    # The only processes the code starts of its own are workers (`python -m experiments.sweep.worker SETTINGS`): none
    # is started with the command line's flags.
    starts = {path.relative_to(ROOT).as_posix() for package in ("experiments", "analysis", "attnlab")
              for path in (ROOT / package).rglob("*.py") if re.search(r'"-m",\s*"attnlab"', path.read_text())}
    assert starts == set()


def test_a_benchmark_run_with_two_workers_writes_its_page(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "attnlab", "benchmark", "--variant", "dense", "--task", "passkey", "--seeds", "1",
         *TINY, "--capacity-widths", "none", "--capacity-scales", "none", "--extend-grid", "0", "--name", "two",
         "--workers", "2",
         "--heartbeat-seconds", "1", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "reports"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "[worker 0] " in done.stdout and "[worker 1] " in done.stdout
    # protocol 2: 3 learning rates x 2 screen seeds, then 1 confirmation seed
    assert len(list((tmp_path / "benchmark" / "two").glob("*/config.json"))) == 3 * 2 + 1
    assert (tmp_path / "reports" / "benchmark-two" / "index.html").is_file()


def older(definition: dict, *, dropped: tuple[str, ...] = (), **changed) -> dict:
    return {**{key: value for key, value in definition.items() if key not in dropped}, **changed}


def store(storage, name: str, definition: dict) -> None:
    optuna.create_study(storage=storage, study_name=name).set_user_attr("definition", definition)


def test_a_benchmark_stored_before_definitions_named_their_stages_is_joined_and_read(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", capacity_widths="none", capacity_scales="none")
    stored = older(schema.stored(bench), dropped=("stages",))
    store(open_storage(None, bench.journal, 1), bench.study_name, stored)
    assert upgraded(stored) == schema.stored(bench)
    rebuilt = rebuild_benchmark(stored, study_name=bench.study_name, device="cpu", storage_url=None,
                                runs_dir=tmp_path, heartbeat_seconds=1)
    assert rebuilt.stages == bench.stages and rebuilt.cells == bench.cells and rebuilt.name == bench.name
    assert benchmark.open_study(bench).user_attrs["definition"] == schema.stored(bench)  # joined, recorded anew
    with pytest.raises(OptionError, match=r"benchmark study 'benchmark-tiny' stores no 'capacity_seed[s]'"):
        rebuild_benchmark(older(stored, dropped=("capacity_seeds",)), study_name=bench.study_name,
                          device="cpu", storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1)


def test_a_sweep_stored_with_its_space_as_text_is_joined_by_the_same_sweep_and_refused_to_another(tmp_path):
    sweep, _ = in_process_sweep(tmp_path / "today", "variant.window=8:10")
    stored = older(schema.stored(sweep), dropped=("kernel", "pruner", "prune_after"),
                   space=[param.describe() for param in sweep.space.params])  # as versions before workers read it
    with pytest.raises(OptionError, match="stores its space as text"):
        rebuild_sweep(stored, study_name=sweep.study_name, device="cpu", storage_url=None,
                      runs_dir=tmp_path, heartbeat_seconds=1, trials=1)
    store(open_storage(None, tmp_path / "sweeps" / f"{sweep.study_name}.journal", 1), sweep.study_name, stored)
    with pytest.raises(ValueError, match=r"created for another sweep \(its space differ\)"):
        in_process_sweep(tmp_path, "variant.window=8:11")
    again, study = in_process_sweep(tmp_path, "variant.window=8:10")
    assert study.user_attrs["definition"] == schema.stored(again)  # recorded in today's form
    rebuilt = rebuild_sweep(study.user_attrs["definition"], study_name=again.study_name, device="cpu",
                            storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1, trials=again.trials)
    assert rebuilt == again


def test_a_benchmark_runs_one_worker_per_core_on_the_cpu_by_default_and_a_sweep_one(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert worker_count(None, "cpu", per_core=True) == 2 and worker_count(None, "cpu") == 1
    assert worker_count(3, "cpu", per_core=True) == 3


def test_a_worker_that_may_leave_returns_once_the_last_job_is_in_flight_with_another_and_not_before(tmp_path):
    """`leave`: the worker takes every job it can, then returns 0 while another worker's job is still running,
    instead of waiting for it; the part is finished by that other worker."""
    bench = plan(tmp_path, task="passkey", variants="dense", seeds=1, capacity_widths="none", capacity_scales="none")
    study = benchmark.open_study(bench)
    for job in Ledger(bench, []).queued(Ledger(bench, []).missing()):  # the grid's 3 tuning runs
        study.enqueue_trial({}, user_attrs={"job": job.to_attr()})
    elsewhere = study.ask()  # another worker holds the first of them
    assert benchmark.work(bench, study, quiet=True, leave=True) == 0
    states = Counter(trial.state for trial in study.get_trials())
    assert states == Counter({TrialState.COMPLETE: 2, TrialState.RUNNING: 1})  # the other two ran here
    assert not Ledger(bench, study.get_trials()).complete
    assert study.get_trials()[elsewhere.number].state == TrialState.RUNNING


def test_the_parts_of_a_reproduction_share_one_pool_and_each_settled_part_is_kept(tmp_path):
    """`training.train` with 2 workers and 2 parts: one pool goes through both (`experiments.claims.lanes`); both
    settle and are kept as records; each worker is given every part, in order."""
    parts = [plan(tmp_path, task="passkey", variants="dense", seeds=2, capacity_widths="none", capacity_scales="none",
                  name=name) for name in ("claim-a-one", "claim-a-two")]
    code, submitted = training.train(parts, workers=2, storage=None, runs_dir=tmp_path, quiet=True,
                                     records=tmp_path / "records")
    assert (code, submitted) == (0, False)
    for part in parts:
        assert Ledger(part, benchmark.open_study(part).get_trials()).complete
        assert (tmp_path / "records" / f"benchmark-{part.name}.journal").is_file()
    command = Lanes(tuple(worker_settings(part, True) for part in parts), "cpu").command(1)
    assert command[:3] == [sys.executable, "-m", "experiments.claims.lanes"]
    given = json.loads(command[3])
    assert [part["study"] for part in given["parts"]] == [part.study_name for part in parts]
    assert {part["index"] for part in given["parts"]} == {1} and set(given["parts"][0]) == LOCAL
