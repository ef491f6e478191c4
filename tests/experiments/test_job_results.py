"""A benchmark job's stored figures are its run's Summary under the Summary's own names, with the revisions of the
task and variant it trained on, and a storage written before they were (its chance level under `chance`) still reads
under today's names."""

import dataclasses

import optuna

from experiments import revisions
from experiments.benchmark.ledger import RESULT, JobState
from experiments.benchmark.stages import TUNE, Job
from experiments.benchmark.worker import RESULT_FIELDS, job_result
from experiments.run import config as configs
from experiments.run.records import Summary


def test_a_protocol_1_job_result_keeps_the_summarys_names_and_adds_only_what_it_derives():
    config = configs.resolve(variant="dense", task="passkey", profile="quick", seed=0, device="cpu")
    summary = Summary(run_id="r", status="completed", val_accuracy=0.5, test_accuracy=0.75, chance_accuracy=0.0625,
                      steps=10, wall_seconds=1.0)
    metrics = [{"kind": "eval", "step": 10, "wall_seconds": 1.0, "test_accuracy": 0.75}]
    result = job_result(summary, config, metrics, 1)
    fields = {field.name for field in dataclasses.fields(Summary)}
    assert set(RESULT_FIELDS) <= fields
    assert set(result) - fields == {"tokens", "curve"}  # the target it stopped at is the benchmark's
    assert {name: result[name] for name in RESULT_FIELDS} == {name: getattr(summary, name) for name in RESULT_FIELDS}
    assert result["tokens"] == 10 * config.train.batch_size * config.task_options.seq_len
    assert result["curve"] == [[10, 1.0, 0.75]]


def test_a_result_stored_before_the_summarys_names_reads_under_them():
    trial = optuna.trial.create_trial(value=0.5, user_attrs={RESULT: {"status": "completed", "chance": 0.25,
                                                                      "test_accuracy": 0.75}})
    state = JobState(Job(TUNE, "dense", "passkey", 1e-3, 0), [trial], "completed")
    assert state.result == {"status": "completed", "chance_accuracy": 0.25, "test_accuracy": 0.75}


def test_a_job_result_carries_the_task_and_variant_revisions_its_run_trained_on():
    config = configs.resolve(variant="sparse:pattern=bigbird", task="mqar", profile="quick", seed=0, device="cpu")
    trained = Summary(run_id="r", status="completed", steps=10, revisions={"task": 2, "variant": 3})
    assert job_result(trained, config, [], revisions.PROTOCOL)["revisions"] == {"task": 2, "variant": 3}
    # A run that failed before writing its summary trained on this code's revisions.
    failed = Summary(run_id="r", status="failed", error="ValueError: no summary")
    assert job_result(failed, config, [], revisions.PROTOCOL)["revisions"] == revisions.of_run("mqar", "sparse") == {
        "task": revisions.revision("task", "mqar"), "variant": revisions.revision("variant", "sparse")}
