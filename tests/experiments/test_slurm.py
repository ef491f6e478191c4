"""`--launcher slurm`: a benchmark's workers submitted through submitit to a real single-node SLURM cluster that the
tests start (`slurm_cluster`), one task cancelled part way, the record the same as a local run's; and the
sentences for what SLURM refuses or this machine lacks."""

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from command_line import refusal
from optuna.trial import TrialState
from slurm_cluster import slurm_cluster
from test_benchmark import TINY
from test_cli import TINY as TINY_RUN

from attnlab import experiment_file
from attnlab.cli import build_parser, main
from common.options import OptionError
from experiments.benchmark import Job
from experiments.sweep.storage import open_storage

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = ["benchmark", "--variant", "dense", "--task", "passkey", "--seeds", "1", *TINY,
             "--protocol", "1", "--target-accuracy", "none", "--set", "train.steps=60",  # long enough to cancel in
             "--capacity-widths", "none", "--capacity-scales", "none", "--extend-grid", "0", "--name", "tiny",
             "--workers", "2", "--heartbeat-seconds", "1", "--quiet"]
ON_THE_CLUSTER = ["--launcher", "slurm", "--device", "cpu", "--cpus-per-task", "1", "--mem", "500M",
                  "--time-limit", "30"]


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("submitit", reason="submitit is not installed: pip install -e '.[slurm]' (make setup does)")
    with slurm_cluster() as conf:
        yield conf


def attnlab(*args, folder: Path) -> subprocess.CompletedProcess:
    """`attnlab ARGS` with its runs under `folder`, and its page or table there too where the command writes one."""
    out = [] if args[0] == "sweep" else ["--out", str(folder / "reports")]
    return subprocess.run([sys.executable, "-m", "attnlab", *args, "--runs-dir", str(folder), *out], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)


def results(folder: Path) -> dict[str, tuple]:
    """Each job of benchmark 'tiny' under `folder` and its figures; every job completed exactly once."""
    study = optuna.load_study(study_name="benchmark-tiny",
                              storage=open_storage(None, folder / "benchmark" / "tiny" / "jobs.journal", 1))
    complete = [trial for trial in study.get_trials() if trial.state == TrialState.COMPLETE]
    keys = Counter(Job.from_attr(trial.user_attrs["job"]).key for trial in complete)
    assert len(keys) == 3 + 1 and set(keys.values()) == {1}  # 3 learning rates, then 1 seed
    return {Job.from_attr(trial.user_attrs["job"]).key: tuple(trial.user_attrs["result"][field] for field in
                                                               ("val_accuracy", "test_accuracy", "steps"))
            for trial in complete}


def cancel_a_task_mid_run(folder: Path, job_id: str, timeout: float = 300) -> str:
    """Cancel the array task whose worker runs a job that has checkpointed but not finished; the job's run id."""
    journal = folder / "benchmark" / "tiny" / "jobs.journal"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if journal.exists():
            study = optuna.load_study(study_name="benchmark-tiny", storage=open_storage(None, journal, 1))
            for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                run = folder / "benchmark" / "tiny" / str(trial.user_attrs.get("run_id"))
                if (run / "checkpoint.pt").exists() and \
                        json.loads((run / "summary.json").read_text())["status"] == "running":
                    try:
                        text = Path(f"/proc/{trial.user_attrs['worker']['pid']}/environ").read_text()
                    except OSError:  # its run ended meanwhile
                        continue
                    environ = dict(entry.split("=", 1) for entry in text.split("\0") if "=" in entry)
                    assert environ["SLURM_ARRAY_JOB_ID"] == job_id
                    subprocess.run(["scancel", f"{job_id}_{environ['SLURM_ARRAY_TASK_ID']}"], check=True)
                    return trial.user_attrs["run_id"]
        time.sleep(0.1)
    raise AssertionError("no job of the SLURM tasks reached the middle of its run")


def wait_until_done(job_id: str, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while subprocess.run(["squeue", "--noheader", f"--jobs={job_id}"], capture_output=True, text=True).stdout.strip():
        assert time.time() < deadline, f"SLURM job {job_id} still runs"
        time.sleep(1)


@pytest.mark.slurm
def test_a_benchmark_on_slurm_finishes_every_job_once_though_a_task_is_cancelled_and_equals_a_local_run(
        cluster, tmp_path):
    on_slurm = tmp_path / "slurm"
    submitted = attnlab(*BENCHMARK, *ON_THE_CLUSTER, folder=on_slurm)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = re.findall(r"submitted SLURM job (\d+), an array of 2 tasks", submitted.stdout)
    assert f"logs: {on_slurm}/benchmark/tiny/slurm/{job_id}_<task>_0_log.out" in submitted.stdout
    status = f"attnlab benchmark --status --name tiny --runs-dir {on_slurm}"
    assert f"progress: {status}" in submitted.stdout
    cancelled = cancel_a_task_mid_run(on_slurm, job_id)
    wait_until_done(job_id)

    shown = subprocess.run([sys.executable, "-m", "attnlab", *status.split()[1:]], cwd=ROOT, capture_output=True,
                           text=True, stdin=subprocess.DEVNULL)
    assert "benchmark tiny: 4 of 4 jobs settled, 0 running, 0 left" in shown.stdout, shown.stderr
    run = on_slurm / "benchmark" / "tiny" / cancelled
    evaluations = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
                   if json.loads(line)["kind"] == "eval"]
    assert evaluations == [10, 20, 30, 40, 50, 60]  # resumed from its checkpoint: each evaluation once
    again = attnlab(*BENCHMARK, *ON_THE_CLUSTER, folder=on_slurm)  # every job settled: the page, nothing submitted
    assert again.returncode == 0 and "submitted" not in again.stdout and "wrote " in again.stdout, again.stderr
    assert (on_slurm / "reports" / "benchmark-tiny" / "index.html").is_file()

    here = tmp_path / "local"
    assert attnlab(*BENCHMARK, "--launcher", "local", folder=here).returncode == 0
    assert results(on_slurm) == results(here)


@pytest.mark.slurm
@pytest.mark.parametrize("args, fragments", [
    (["--partition", "nope"], ["Partition 'nope' is refused by SLURM", "accepted: debug, short"]),
    (["--partition", "short", "--time-limit", "60"], ["--time-limit 60 (minutes) is refused by SLURM on partition "
                                                      "short", "accepted: at most 10:00"]),
    (["--mem", "100G"], ["SLURM refuses a task with", "--mem=100G", "accepted: options this cluster's nodes"]),
    (["--device", "cuda"], ["SLURM refuses a task with", "--gpus-per-task=1"]),  # the cluster has no GPU
])
def test_options_slurm_refuses_get_one_sentence_and_exit_code_2_before_anything_is_created(
        cluster, tmp_path, capsys, args, fragments):
    line = refusal(capsys, [*BENCHMARK, *ON_THE_CLUSTER, *args, "--runs-dir", str(tmp_path)])
    assert line.startswith("attnlab benchmark: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not any(tmp_path.iterdir())


@pytest.mark.slurm
def test_a_calibration_on_slurm_trains_its_runs_in_one_task_and_the_same_command_then_writes_the_table(
        cluster, tmp_path):
    command = ["calibration", "--variant", "dense", "--task", "passkey", *TINY, *ON_THE_CLUSTER, "--quiet"]
    submitted = attnlab(*command, folder=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = re.findall(r"submitted SLURM job (\d+), an array of 1 task, each every run in turn", submitted.stdout)
    assert not (tmp_path / "reports").exists()
    wait_until_done(job_id)
    (summary,) = [json.loads(path.read_text()) for path in (tmp_path / "calibration" / "quick").glob("*/summary.json")]
    assert summary["status"] == "completed" and summary["steps"] == 20
    written = attnlab(*command, folder=tmp_path)  # every run completed: the table, nothing submitted
    assert written.returncode == 0 and "submitted" not in written.stdout, written.stderr
    assert "passkey" in (tmp_path / "reports").read_text()


@pytest.mark.slurm
def test_a_sweep_on_slurm_reaches_its_trials_and_the_same_command_then_reports_without_submitting(cluster, tmp_path):
    command = ["sweep", "--variant", "local", *TINY_RUN, "--set", "train.steps=20", "--trials", "1", "--workers", "1",
               "--heartbeat-seconds", "1", *ON_THE_CLUSTER, "--quiet"]
    submitted = attnlab(*command, folder=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    (job_id,) = re.findall(r"submitted SLURM job (\d+), an array of 1 task, each a worker", submitted.stdout)
    assert f"progress: attnlab report --study local-passkey-quick-s0 --runs-dir {tmp_path}" in submitted.stdout
    wait_until_done(job_id)
    reported = attnlab(*command, folder=tmp_path)
    assert reported.returncode == 0 and "submitted" not in reported.stdout, reported.stderr
    assert "1 of 1 complete, 0 pruned, 0 failed, 0 running" in reported.stdout


def test_without_submitit_the_slurm_launcher_says_how_to_install_it_and_exits_1(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if it were not installed
    assert main([*BENCHMARK, *ON_THE_CLUSTER, "--runs-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == ("attnlab benchmark: LAUNCHER=slurm needs submitit, which is not installed; install it with pip "
                   "install -e '.[slurm]', or use LAUNCHER=local.\n")
    assert not any(tmp_path.iterdir())


def test_without_sbatch_the_slurm_launcher_says_so_and_exits_1(tmp_path, capsys, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert main([*BENCHMARK, *ON_THE_CLUSTER, "--runs-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "LAUNCHER=slurm needs SLURM's sbatch, which is not on PATH" in err


@pytest.mark.parametrize("args, fragment", [
    (["--time-limit", "0"], "--time-limit got 0; accepted: an integer >= 1."),
    (["--sbatch=--account=lab"], "--sbatch got '--account=lab'; accepted: sbatch options as NAME=VALUE"),
])
def test_bad_slurm_options_get_one_sentence_and_exit_code_2(tmp_path, capsys, args, fragment):
    line = refusal(capsys, [*BENCHMARK, *ON_THE_CLUSTER, *args, "--runs-dir", str(tmp_path)])
    assert fragment in line, line
    assert not any(tmp_path.iterdir())


def test_the_local_launcher_imports_no_submitit():
    done = subprocess.run([sys.executable, "-c", "import sys, attnlab.cli, experiments.benchmark, "
                           "experiments.sweep, attnlab.reproduce; print('submitit' in sys.modules)"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_an_experiment_files_launcher_table_gives_the_launcher_and_its_options_which_the_command_line_overrides(
        tmp_path):
    path = tmp_path / "cluster.toml"
    path.write_text('tasks = "passkey"\n[launcher]\nname = "slurm"\npartition = "gpu"\ntime_limit = 90\n'
                    'sbatch = "account=lab"\n')
    argv = ["benchmark", "--config", str(path), "--partition", "long"]
    parser = build_parser()
    args = experiment_file.apply(parser, argv, parser.parse_args(argv))
    assert (args.launcher, args.partition, args.time_limit, args.sbatch, args.task) == \
        ("slurm", "long", 90, "account=lab", "passkey")
    path.write_text('[launcher]\nname = "slurm"\ntime_limit = "an hour"\n')
    with pytest.raises(OptionError, match=r"time_limit = 'an hour' is not accepted; accepted: an integer"):
        experiment_file.apply(parser, ["benchmark", "--config", str(path)],
                              parser.parse_args(["benchmark", "--config", str(path)]))


@pytest.mark.parametrize("target", ["sweep", "benchmark", "reproduce", "calibration"])
def test_make_hands_launcher_to_the_commands_that_run_workers(target):
    command = f"attnlab {target}"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MAKE", "MFLAGS"))}
    printed = subprocess.run(["make", "-n", "--no-print-directory", target, "LAUNCHER=slurm"], cwd=ROOT,
                             capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL).stdout
    (line,) = [line for line in printed.replace("\\\n", " ").splitlines() if command in line]
    assert "--launcher slurm" in " ".join(line.split())


def test_status_of_a_benchmark_the_runs_folder_does_not_hold_names_it_in_one_sentence(tmp_path, capsys):
    line = refusal(capsys, ["benchmark", "--status", "--runs-dir", str(tmp_path)])
    assert line == (f"attnlab benchmark: No benchmark 'quick-protocol2' under {tmp_path} (no {tmp_path}/benchmark/"
                    "quick-protocol2/jobs.journal); accepted: the --name of a benchmark there, or the --storage URL "
                    "that holds it.")
    assert not any(tmp_path.iterdir())
