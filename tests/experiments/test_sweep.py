"""Sweeps: search spaces, trials as ordinary runs, pruning, divergence, resume after a kill, several
workers on the embedded store and on a real PostgreSQL server, and one-sentence errors."""

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
import torch
from command_line import refusal
from optuna.storages.journal import JournalFileSymlinkLock
from optuna.trial import TrialState
from poison import poison_forward
from postgres import free_port, postgres_server

import variants
from attnlab.cli import main
from common.journals import set_aside_torn_line
from experiments import sweep as sweeps
from experiments.schemas.sweep import SweepOptions

TINY_SETS = ["task.seq_len=12", "task.num_keys=4", "task.test_size=64", "task.num_buckets=4", "model.dim=32",
             "model.depth=1", "model.heads=2", "train.batch_size=16", "train.log_every=5", "train.eval_every=10",
             "train.checkpoint_every=10", "train.steps=40"]
TINY = [item for assignment in TINY_SETS for item in ("--set", assignment)]
ROOT = Path(__file__).resolve().parents[2]


def attnlab(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "attnlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT, **kwargs)


def finish(process, timeout=300):
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr
    return stdout


def sweep_command(runs_dir, *extra):
    return ["sweep", "--variant", "local", *TINY, "--runs-dir", str(runs_dir), "--heartbeat-seconds", "1",
            "--quiet", *extra]


def journal_study(runs_dir, name):
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(runs_dir / "sweeps" / f"{name}.journal")))
    return optuna.load_study(study_name=name, storage=storage)


def summary_of(runs_dir, trial):
    return json.loads((runs_dir / trial.user_attrs["run_id"] / "summary.json").read_text())


def wait_for_a_trial_mid_run(study, runs_dir, processes, *, first_number=0, timeout=180):
    """The first running trial (number >= first_number) of one of `processes` whose run has checkpointed
    but not finished."""
    pids = {process.pid for process in processes}
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert all(process.poll() is None for process in processes), [process.communicate() for process in processes]
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if trial.number < first_number or "run_id" not in trial.user_attrs:
                continue
            if trial.user_attrs.get("worker", {}).get("pid") not in pids:
                continue
            run = runs_dir / trial.user_attrs["run_id"]
            if (run / "checkpoint.pt").exists() and summary_of(runs_dir, trial)["status"] == "running":
                return trial
        time.sleep(0.05)
    raise AssertionError("no trial reached the middle of its run")


def check_trials_are_runs(study, runs_dir):
    """Every complete or pruned trial has its own run record, saying the same as the trial: the values it
    reported and its objective are the run's validation accuracies, never the test (eval) set's."""
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    for trial in finished:
        summary = summary_of(runs_dir, trial)
        assert summary["tags"] == {"study": study.study_name, "trial": trial.number}
        metrics = [json.loads(line) for line in (runs_dir / trial.user_attrs["run_id"] / "metrics.jsonl").open()]
        validation = {line["step"]: line["val_accuracy"] for line in metrics if line["kind"] == "eval"}
        assert trial.intermediate_values == {step: validation[step] for step in trial.intermediate_values}
        if trial.state == TrialState.COMPLETE:
            assert summary["status"] == "completed" and summary["val_accuracy"] == trial.value
        else:
            assert summary["status"] == "pruned" and summary["steps"] < 40
    assert len({trial.user_attrs["run_id"] for trial in finished}) == len(finished)
    complete = [trial for trial in finished if trial.state == TrialState.COMPLETE]
    assert len({tuple(sorted(trial.params.items())) for trial in complete}) == len(complete)  # none drawn twice


def check_the_killed_trial_was_retried_on_its_run(study, killed):
    (retry,) = [trial for trial in study.get_trials(deepcopy=False)
                if trial.system_attrs.get("failed_trial") == killed.number]
    assert study.trials[killed.number].state == TrialState.FAIL
    assert retry.state in (TrialState.COMPLETE, TrialState.PRUNED)
    assert retry.params == killed.params
    assert retry.user_attrs["run_id"] == killed.user_attrs["run_id"]  # resumed from its checkpoint, not restarted
    return retry


def test_a_killed_sweep_resumes_to_exactly_the_requested_complete_trials(tmp_path):
    # Trial n draws from a seed of its own (sweep seed, n): with seed 1 the draws include learning rates
    # too small to keep up, which the median pruner stops, deterministically on CPU.
    command = sweep_command(tmp_path, "--trials", "4", "--prune-after", "2", "--seed", "1")
    process = attnlab(*command)
    study = None
    while study is None:
        try:
            study = journal_study(tmp_path, "local-passkey-quick-s1")
        except (KeyError, FileNotFoundError):
            assert process.poll() is None, process.communicate()
            time.sleep(0.1)
    killed = wait_for_a_trial_mid_run(study, tmp_path, [process], first_number=2)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert study.trials[killed.number].state == TrialState.RUNNING  # nothing could say otherwise

    output = finish(attnlab(*command))

    counts = Counter(trial.state for trial in study.get_trials(deepcopy=False))
    assert counts[TrialState.COMPLETE] == 4 and counts[TrialState.PRUNED] >= 1 and counts[TrialState.RUNNING] == 0
    check_trials_are_runs(study, tmp_path)
    check_the_killed_trial_was_retried_on_its_run(study, killed)
    runs = [path for path in tmp_path.iterdir() if path.name != "sweeps"]
    assert len(runs) == len(study.trials) - 1  # the retry continued the killed trial's run folder

    # The summary names the best trial with its validation and test accuracy, and its command trains the same
    # config to the same accuracies.
    best = study.best_trial
    test_accuracy = summary_of(tmp_path, best)["test_accuracy"]
    assert f"best: trial {best.number}, validation accuracy {best.value:.4f}, test accuracy {test_accuracy:.4f}" \
        in output
    (rerun,) = [line.removeprefix("rerun it: ") for line in output.splitlines() if line.startswith("rerun it: ")]
    make_args = dict(word.split("=", 1) for word in shlex.split(rerun)[2:])
    assert make_args["VARIANT"] == "local" and make_args["TASK"] == "passkey" and make_args["SEED"] == "1"
    again = tmp_path / "again"
    finish(attnlab("run", "--variant", "local", "--task", "passkey", "--profile", make_args["PROFILE"],
                   "--seed", make_args["SEED"], "--device", make_args["DEVICE"], *shlex.split(make_args["ARGS"]),
                   "--runs-dir", str(again), "--quiet"))
    (run,) = again.iterdir()
    rerun_summary = json.loads((run / "summary.json").read_text())
    assert (rerun_summary["val_accuracy"], rerun_summary["test_accuracy"]) == (best.value, test_accuracy)


def test_two_workers_share_the_embedded_store(tmp_path):
    output = finish(attnlab(*sweep_command(tmp_path, "--trials", "4", "--workers", "2", "--pruner", "none")))
    study = journal_study(tmp_path, "local-passkey-quick-s0")
    counts = Counter(trial.state for trial in study.get_trials(deepcopy=False))
    assert counts == {TrialState.COMPLETE: 4}
    assert len({trial.user_attrs["worker"]["pid"] for trial in study.trials}) == 2
    assert "[worker 0] trial" in output and "[worker 1] trial" in output
    assert "4 of 4 complete" in output
    check_trials_are_runs(study, tmp_path)


def test_workers_on_a_postgres_study_finish_it_though_one_is_killed(tmp_path):
    with postgres_server() as url:
        command = sweep_command(tmp_path, "--trials", "4", "--storage", url, "--study", "shared", "--pruner", "none")
        first, second = attnlab(*command), attnlab(*command)
        while not list(tmp_path.glob("*/config.json")):  # a trial's run has started: the study exists
            assert first.poll() is None and second.poll() is None, (first.communicate(), second.communicate())
            time.sleep(0.1)
        study = optuna.load_study(study_name="shared", storage=url)
        killed = wait_for_a_trial_mid_run(study, tmp_path, [first, second])
        victim, survivor = (first, second) if killed.user_attrs["worker"]["pid"] == first.pid else (second, first)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        output = finish(survivor)

        counts = Counter(trial.state for trial in study.get_trials(deepcopy=False))
        assert counts[TrialState.COMPLETE] == 4 and counts[TrialState.RUNNING] == 0
        check_trials_are_runs(study, tmp_path)
        check_the_killed_trial_was_retried_on_its_run(study, killed)
        assert "4 of 4 complete" in output and "rerun it: make experiment" in output


def in_process_sweep(runs_dir, *space, trials=2, confirm_seeds=0):
    plan = sweeps.build(SweepOptions(variant="local", task="passkey", sets=tuple(TINY_SETS), space=space,
                                     trials=trials, pruner="none", heartbeat_seconds=1, confirm_seeds=confirm_seeds),
                        device="cpu", runs_dir=runs_dir)
    return plan, sweeps.open_study(plan)


def test_a_diverged_trial_is_recorded_and_the_study_goes_on(tmp_path, monkeypatch):
    poison_forward(monkeypatch, at_call=3)  # the first trial's third step turns NaN
    plan, study = in_process_sweep(tmp_path)
    assert sweeps.work(plan, study, quiet=True) == 0
    first, *rest = study.trials
    assert first.state == TrialState.FAIL and first.user_attrs["status"] == "diverged"
    assert summary_of(tmp_path, first)["status"] == "diverged"
    assert [trial.state for trial in rest] == [TrialState.COMPLETE] * 2
    check_trials_are_runs(study, tmp_path)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # the in-flight trials are asked for by hand
def test_a_trial_that_finds_the_target_filled_by_earlier_ones_fails_as_surplus_without_a_run(tmp_path):
    plan, study = in_process_sweep(tmp_path, trials=2)
    in_flight = [study.ask(), study.ask()]  # two workers passed the check at the same instant as this one
    study.optimize(sweeps.Objective(plan, quiet=True, should_stop=lambda step: False), n_trials=1,
                   catch=(sweeps.TrialSurplus,))
    surplus = study.trials[-1]
    assert surplus.number == 2 and surplus.state == TrialState.FAIL and surplus.user_attrs["status"] == "surplus"
    assert [path.name for path in tmp_path.iterdir()] == ["sweeps"]  # no run was started
    assert [study.trials[trial.number].state for trial in in_flight] == [TrialState.RUNNING] * 2


def test_joining_a_study_with_other_settings_is_refused(tmp_path):
    in_process_sweep(tmp_path, "variant.window=8:10")
    with pytest.raises(ValueError, match=r"created for another sweep \(its space differ\)"):
        in_process_sweep(tmp_path, "variant.window=8:11")


# A worker killed while appending its record of trial 0's parameters: the line stops short of its newline.
TORN = b'{"op_code":5,"worker_id":"9f1c","trial_id":0,"param_name":"train.lr","param_value_internal":0.00'


def test_a_torn_last_journal_line_is_set_aside_beside_it_and_the_sweep_continues(tmp_path, capsys):
    assert main(sweep_command(tmp_path, "--trials", "1", "--pruner", "none")) == 0
    journal = tmp_path / "sweeps" / "local-passkey-quick-s0.journal"
    whole = journal.read_bytes()
    journal.write_bytes(whole + TORN)
    capsys.readouterr()
    assert main(sweep_command(tmp_path, "--trials", "2", "--pruner", "none")) == 0
    (aside,) = journal.parent.glob(f"{journal.name}.torn-*")
    assert aside.read_bytes() == TORN  # never deleted: the exact bytes, beside the journal
    assert journal.read_bytes().startswith(whole) and journal.read_bytes().endswith(b"\n")
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Journal ")]
    assert said == [f"Journal {journal} ended in a line that was cut off: its last {len(TORN)} bytes are set aside in "
                    f"{aside}, and it is read up to its last whole line."]
    study = journal_study(tmp_path, "local-passkey-quick-s0")
    assert [trial.state for trial in study.trials] == [TrialState.COMPLETE] * 2


def test_a_journal_line_that_is_not_json_is_named_by_file_and_number_with_exit_code_2(tmp_path, capsys):
    in_process_sweep(tmp_path)
    journal = tmp_path / "sweeps" / "local-passkey-quick-s0.journal"
    lines = journal.read_bytes().split(b"\n")
    lines[1] = b'{"op_code" 1}'
    journal.write_bytes(b"\n".join(lines))
    before = journal.read_bytes()
    line = refusal(capsys, sweep_command(tmp_path, "--trials", "2", "--pruner", "none"))
    assert line == (f"attnlab sweep: Journal {journal} line 2 is not one of Optuna's records (Expecting ':' delimiter: "
                    "line 1 column 12 (char 11)); accepted: a journal of Optuna's JSON lines: restore it from a copy, "
                    "or remove line 2.")
    assert journal.read_bytes() == before and sorted(path.name for path in tmp_path.iterdir()) == ["sweeps"]


def test_a_line_a_live_worker_is_still_appending_is_waited_for_never_set_aside(tmp_path):
    journal = tmp_path / "study.journal"
    journal.write_bytes(b'{"op_code":0,"worker_id":"a"}\n{"op_code":4,')  # the worker's write, half done
    lock = JournalFileSymlinkLock(str(journal))
    lock.acquire()  # as Optuna's JournalFileBackend.append_logs holds it while it writes
    check = threading.Thread(target=set_aside_torn_line, args=(journal,))
    check.start()
    time.sleep(0.5)
    assert check.is_alive()  # waiting for the writer's lock
    with journal.open("ab") as file:
        file.write(b'"worker_id":"a"}\n')
    lock.release()
    check.join(timeout=30)
    assert not check.is_alive()
    assert journal.read_bytes() == b'{"op_code":0,"worker_id":"a"}\n{"op_code":4,"worker_id":"a"}\n'
    assert not list(tmp_path.glob("*.torn-*"))


@pytest.mark.parametrize("name", variants.list_variants())
def test_every_variant_declares_a_space_of_its_own_options_that_yields_runnable_configs(tmp_path, name):
    cls = variants.variant_class(name)
    options = {field for field in cls.Options.__dataclass_fields__}
    assert set(cls.search_space) <= options
    for position, item in enumerate(cls.search_space.values()):
        if item.when is not None:  # a condition's selector is an option declared before it
            assert item.when[0] in list(cls.search_space)[:position]
    plan = sweeps.build(SweepOptions(variant=name, task="passkey", sets=tuple(TINY_SETS), trials=1, pruner="none",
                                     prune_after=0, heartbeat_seconds=1), device="cpu", runs_dir=tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize")
    for _ in range(16):
        trial = study.ask()
        config = plan.config(plan.space.suggest(trial))
        for param in plan.space.params:
            if param.name in trial.params:
                assert param.when is None or trial.params[param.when[0]] in param.when[1]
            else:  # its condition excluded it: the option keeps its default
                assert param.when is not None and trial.params[param.when[0]] not in param.when[1]
        attention = variants.create(name, num_heads=2, head_dim=16, max_len=12, options=config.variant_options)
        q = k = v = torch.randn(1, 2, 12, 16)
        causal = attention.supports_causal  # a variant without a causal form runs bidirectional
        assert torch.isfinite(attention(q, k, v, causal=causal)).all(), config.variant_options
        study.tell(trial, 0.0)
    assert not any(tmp_path.iterdir())  # preparing a sweep writes nothing


def test_bounds_follow_the_task_and_the_user_narrows_from_a_file_and_the_command_line(tmp_path):
    space_file = tmp_path / "space.toml"
    space_file.write_text("[variant]\nwindow = [9, 11]\n[train]\nlr = 1e-3\nweight_decay = [0.0, 0.1]\n")

    def resolved(sets, space_args):
        plan = sweeps.build(SweepOptions(variant="local", task="passkey", sets=tuple(sets), space=tuple(space_args),
                                         space_file=str(space_file), trials=1, heartbeat_seconds=1),
                            device="cpu", runs_dir=tmp_path)
        return {param.name: param for param in plan.space.params}

    declared = resolved(["task.seq_len=40", "train.steps=100"], [])
    assert (declared["variant.window"].low, declared["variant.window"].high) == (9, 11)  # from the file
    declared = resolved(["task.seq_len=40", "train.steps=100"], ["variant.window=8:40"])  # the command line wins
    assert (declared["variant.window"].low, declared["variant.window"].high) == (8, 40)
    assert declared["variant.window"].kind is int and declared["variant.window"].log
    assert (declared["train.warmup_steps"].low, declared["train.warmup_steps"].high) == (0, 20)
    assert declared["train.lr"].choices == (1e-3,) and declared["train.weight_decay"].high == 0.1
    fixed = resolved(["task.seq_len=40"], ["variant.window=16"])["variant.window"]
    assert fixed.choices == (16,)


@pytest.mark.parametrize("args, fragments", [
    (["--variant", "loacl"], ["'loacl'", "did you mean 'local'"]),
    (["--space", "variant.windw=8:12"], ["'variant.windw'", "did you mean 'variant.window'", "train.lr"]),
    (["--space", "train.momentum=0.9"], ["'train.momentum'", "variant.window, train.lr"]),
    (["--space", "variant.window=12:8"], ["variant.window=12:8", "empty range", "8..24"]),
    (["--space", "variant.window=4:12"], ["variant.window=4:12", "leaves the declared range 8..24"]),
    (["--space", "variant.window=9.5"], ["variant.window=9.5", "an integer"]),
    (["--space", "train.lr=1"], ["train.lr=1 leaves", "0.0001..0.01"]),
    (["--space", "windw"], ["'windw'", "malformed", "section.name=LOW:HIGH"]),
    (["--set", "train.lr=0.1"], ["train.lr", "--space train.lr=VALUE"]),
    (["--study", "../elsewhere"], ["'../elsewhere'", "plain name"]),
    (["--trials", "0"], ["trials", "0", ">= 1"]),
    (["--confirm-seeds", "-1"], ["confirm-seeds", "-1", ">= 0"]),
    (["--space-file", "missing.toml"], ["missing.toml", "TOML"]),
])
def test_bad_sweep_input_gets_one_sentence_and_exit_code_2(tmp_path, capsys, args, fragments):
    line = refusal(capsys, sweep_command(tmp_path, *args))
    assert line.startswith("attnlab sweep: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not any(tmp_path.iterdir())  # nothing was created


def test_a_sparse_choice_outside_the_declared_ones_is_named(tmp_path, capsys):
    line = refusal(capsys, [*sweep_command(tmp_path, "--space", "variant.pattern=diagonal"),
                                   "--variant", "sparse"])
    assert "'diagonal'" in line and "'strided'" in line and "'bigbird'" in line


def test_a_space_file_with_an_unknown_name_is_refused(tmp_path, capsys):
    space_file = tmp_path / "space.toml"
    space_file.write_text("[variant]\nwidow = [8, 10]\n")
    line = refusal(capsys, sweep_command(tmp_path / "runs", "--space-file", str(space_file)))
    assert "'variant.widow'" in line and "did you mean 'variant.window'" in line
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_storage_gets_one_sentence(tmp_path, capsys):
    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/sweeps"
    line = refusal(capsys, sweep_command(tmp_path, "--storage", url))
    assert "cannot be used" in line and "Connection refused" in line and "secret" not in line
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("make_args, fragments", [
    (["VARIANT=loacl"], ["'loacl'", "did you mean 'local'"]),
    (["VARIANT=local", "ARGS=--space variant.windw=8:12"], ["'variant.windw'", "did you mean 'variant.window'"]),
    (["VARIANT=local", "ARGS=--space variant.window=64:16"], ["variant.window=64:16", "empty range"]),
    (["VARIANT=local", "STORAGE=postgresql://nobody@127.0.0.1:{port}/x"], ["cannot be used", "Connection refused"]),
    (["VARIANT=local", "CONFIRM=-1"], ["confirm-seeds", "-1", ">= 0"]),
])
def test_make_sweep_answers_bad_input_in_one_sentence(tmp_path, make_args, fragments):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MAKE", "MFLAGS"))}
    make_args = [arg.format(port=free_port()) for arg in make_args]
    result = subprocess.run(["make", "-s", "--no-print-directory", "sweep", *make_args, f"RUNS_DIR={tmp_path}"],
                            cwd=ROOT, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    (line,) = [line for line in result.stderr.splitlines() if not line.startswith("make: ***")]
    assert line.startswith("attnlab sweep: ") and line.endswith("."), result.stderr
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not any(tmp_path.iterdir())


def test_sweep_help_names_its_options():
    result = subprocess.run([sys.executable, "-m", "attnlab", "sweep", "--help"], capture_output=True, text=True,
                            cwd=ROOT)
    for option in ("--trials", "--study", "--storage", "--workers", "--space", "--space-file", "--pruner",
                   "--heartbeat-seconds", "--confirm-seeds"):
        assert option in result.stdout, option
