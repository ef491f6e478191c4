import json

import pandas as pd
import pytest
from conftest import CORRUPT_RUN, STUDY

from analysis import load_runs, parse_filters, select
from analysis.runs import check_selects
from analysis.sweeps import load_studies, select_studies


def _records(runs_dir):
    """(config, summary) of every readable record, read without the analysis package."""
    records = {}
    for folder in sorted(runs_dir.iterdir()):
        try:
            records[folder.name] = (json.loads((folder / "config.json").read_text()),
                                    json.loads((folder / "summary.json").read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return records


def test_load_runs_gives_one_row_per_run_with_the_config_flattened_and_the_summary(runs_dir):
    runs = load_runs(runs_dir).set_index("run_id")
    records = _records(runs_dir)
    assert set(runs.index) == set(records)
    for run_id, (config, summary) in records.items():
        row = runs.loc[run_id]
        assert (row["variant"], row["task"], row["seed"]) == (config["variant"], config["task"], config["seed"])
        assert row["train.lr"] == config["train"]["lr"]
        assert row["model.dim"] == config["model"]["dim"]
        assert row["task.seq_len"] == config["task_options"]["seq_len"]
        assert row["status"] == summary["status"]
        assert row["test_accuracy"] == pytest.approx(summary["test_accuracy"])
        assert row["variant_name"] == summary["variant_name"]
        assert (row["study"] if isinstance(row["study"], str) else None) == summary["tags"].get("study")
    local = runs[(runs["variant"] == "local") & runs["study"].isna()]
    assert set(local["variant.window"]) == {4}


def test_sweep_trials_carry_their_study_and_trial_number(runs_dir):
    runs = load_runs(runs_dir)
    trials = runs[runs["study"] == STUDY]
    assert sorted(trials["trial"].astype(int)) == [0, 1, 2]


def test_a_corrupt_record_is_skipped_with_its_reason_not_a_crash(runs_dir):
    skipped = load_runs(runs_dir).attrs["skipped"]
    assert [entry["run"] for entry in skipped] == [CORRUPT_RUN]
    assert "summary.json is not valid UTF-8 JSON" in skipped[0]["reason"]


def test_a_missing_runs_folder_is_a_one_sentence_error(tmp_path):
    with pytest.raises(ValueError, match=r"^Runs folder '.*nowhere' does not exist; accepted: .*\.$"):
        load_runs(tmp_path / "nowhere")


def test_an_empty_runs_folder_gives_no_rows_but_the_columns(tmp_path):
    runs = load_runs(tmp_path)
    assert len(runs) == 0
    assert {"run_id", "task", "variant", "variant_name", "status", "test_accuracy", "study"} <= set(runs.columns)
    assert runs.attrs["skipped"] == []


def test_filters_match_any_column_by_value_as_the_command_line_reads_it(runs_dir):
    runs = load_runs(runs_dir)
    chosen = select(runs, parse_filters("variant=local,seed=1", list(runs.columns)))
    assert list(chosen["variant_name"]) == ["local_w4"] and list(chosen["seed"]) == [1]
    by_lr = select(runs, parse_filters("train.lr=1e-2", list(runs.columns)))
    assert list(by_lr["trial"]) == [1]
    either = select(runs, parse_filters("variant_name=dense,variant_name=local_w4", list(runs.columns)))
    assert sorted(either["variant_name"]) == ["dense"] * 2 + ["local_w4"] * 3  # the pruned trial has window 4


def test_filters_that_select_no_run_are_refused_naming_the_values_the_column_has():
    runs = pd.DataFrame({"task": ["passkey", "mqar", "mqar"], "variant": ["dense", "local", None], "seed": [0, 1, 2]})
    check_selects(runs, {"task": ["passkey"], "variant": ["dense"]})  # a run matches: nothing to say
    check_selects(runs, {})
    with pytest.raises(ValueError, match=r"^Filter task=nomatch or listops matches none of the 3 runs; accepted: one "
                                         r"of the values column task has: mqar, passkey\.$"):
        check_selects(runs, {"task": ["nomatch", "listops"]})
    with pytest.raises(ValueError, match=r"^Filter variant=sparse matches none of the 3 runs; accepted: one of the "
                                         r"values column variant has: dense, local\.$"):
        check_selects(runs, {"task": ["mqar"], "variant": ["sparse"]})
    with pytest.raises(ValueError, match=r"^Filters task=passkey, seed=1 each match some runs but no run matches them "
                                         r"all; accepted: filters that one run meets together\.$"):
        check_selects(runs, {"task": ["passkey"], "seed": ["1"]})
    with pytest.raises(ValueError, match=r"^Filter task=passkey matches none of the 0 runs; accepted: one of the "
                                         r"values column task has, of which there are none\.$"):
        check_selects(runs.iloc[:0], {"task": ["passkey"]})


def test_an_unknown_filter_column_is_named_with_the_accepted_ones(runs_dir):
    columns = list(load_runs(runs_dir).columns)
    with pytest.raises(ValueError, match=r"^Filter column 'tsak' is not a run column \(did you mean 'task'\?\); "
                                         r"accepted: run_id, .*variant\.window.*\.$"):
        parse_filters("tsak=passkey", columns)
    with pytest.raises(ValueError, match=r"^Filter 'passkey' is not column=value; accepted: "):
        parse_filters("passkey", columns)


def test_filters_on_variant_or_task_also_select_the_sweep_studies(runs_dir):
    studies, unreadable = load_studies(runs_dir)
    assert [study.name for study in studies] == [STUDY] and unreadable == []
    assert select_studies(studies, {"variant": ["local"], "seed": ["0"]}) == studies
    assert select_studies(studies, {"variant": ["dense"]}) == []
    assert select_studies(studies, {"model.dim": ["64"]}) == studies  # not a field a study defines


def test_a_corrupt_study_journal_is_skipped_with_its_reason(tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "broken.journal").write_text('not json\n{"op_code": 0}\n')
    studies, unreadable = load_studies(tmp_path)
    assert studies == []
    assert unreadable == [{"run": "sweeps/broken.journal", "reason": (
        f"the study journal cannot be read (Journal {tmp_path / 'sweeps' / 'broken.journal'} line 1 is not one of "
        "Optuna's records (Expecting value: line 1 column 1 (char 0)); accepted: a journal of Optuna's JSON lines: "
        "restore it from a copy, or remove line 1.)")}]
