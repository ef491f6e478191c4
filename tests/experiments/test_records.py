"""summary.json has one definition, records.Summary: written by the training loop, read back by analysis,
also when it was written before a field existed or under an earlier name."""

import dataclasses
import json

import pytest

from experiments.run.records import RecordError, RunRecord, Summary


def test_a_summary_round_trips_through_its_file(tmp_path):
    record = RunRecord.create(tmp_path, "run")
    summary = Summary(run_id="run", status="completed", test_accuracy=0.5, val_accuracy=0.75,
                      accuracy_by_split={"dense": 1.0}, decayed_parameters=["embed.weight"])
    record.write_summary(summary)
    assert record.read_summary() == summary
    assert set(json.loads((record.path / "summary.json").read_text())) == {
        field.name for field in dataclasses.fields(Summary)}


def test_a_summary_written_before_validation_and_the_kernel_rename_still_loads():
    old = {"run_id": "r", "status": "completed", "backend": "sdpa", "test_accuracy": 0.9, "test_loss": 0.3,
           "accuracy_by_distance": [], "tags": {}}
    summary = Summary.from_dict(old)
    assert summary.kernel == "sdpa" and summary.test_accuracy == 0.9
    assert summary.val_accuracy is None and summary.val_loss is None and summary.decayed_parameters == []


def test_an_unknown_summary_field_is_a_record_error_naming_it():
    with pytest.raises(RecordError, match=r"^summary.json has unknown fields \['eval_acuracy'\]; accepted: run_id, "):
        Summary.from_dict({"status": "completed", "eval_acuracy": 0.5})
