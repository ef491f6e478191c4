"""`make calibration`: the planned runs, and the table written from what they measured."""

import dataclasses

import pandas as pd
import pytest

from analysis.calibration import table
from experiments import revisions, tasks
from experiments.calibration import runs as calibration
from experiments.run import config as configs
from experiments.run.planned import open_record, train_all
from experiments.run.train import train


def test_the_plan_is_one_run_per_task_and_variant_at_the_profiles_defaults():
    runs = calibration.plan(["dense", "local"], tasks.DEFAULT_SUITE, profile="quick", seed=0, device="cpu")
    assert len({run.name for run in runs}) == len(runs) == 2 * len(tasks.DEFAULT_SUITE)
    assert {(run.config.variant, run.config.task) for run in runs} == {
        (variant, task) for variant in ("dense", "local") for task in tasks.DEFAULT_SUITE}
    assert all(run.config.profile == "quick" and run.config.seed == 0 for run in runs)
    assert all(run.name.startswith(run.config.task + "-") for run in runs)


def test_a_set_reaches_the_variants_that_have_the_option_and_names_their_runs_apart():
    runs = calibration.plan(["dense", "lstm"], ["passkey"], profile="quick", seed=0, device="cpu",
                            sets=["variant.normaliser=entmax15"])
    by_variant = {run.config.variant: run for run in runs}
    assert by_variant["dense"].config.variant_options.normaliser == "entmax15"
    assert not hasattr(by_variant["lstm"].config.variant_options, "normaliser")
    plain = calibration.plan(["dense"], ["passkey"], profile="quick", seed=0, device="cpu")[0]
    assert by_variant["dense"].name != plain.name  # both can sit in one calibration folder


def _tiny(run):
    train = dataclasses.replace(run.config.train, steps=2, eval_every=2, checkpoint_every=2, warmup_steps=0)
    task_options = dataclasses.replace(run.config.task_options, test_size=64)  # the table, not the set, is tested
    return dataclasses.replace(run, config=dataclasses.replace(run.config, train=train, task_options=task_options))


TINY_ROW = "passkey:test_size=64"  # the row of a tiny passkey run: its test set set away from the profile's


def test_the_table_states_what_each_run_measured_with_chance_and_its_command(tmp_path):
    runs = [_tiny(run) for run in calibration.plan(["dense", "local"], ["passkey"], profile="quick", seed=0,
                                                   device="cpu")]
    folder = calibration.runs_folder(tmp_path, "quick")
    assert train_all(runs, folder, workers=1, quiet=True, threads=None) == []
    page = table.write(folder, tmp_path / "calibration.md").read_text()

    frame = table.rows(table.load_runs(folder))
    assert list(frame["variant"]) == [configs.described_variant(run.config) for run in runs]
    assert set(frame["chance"]) == {f"{tasks.create_task('passkey', profile='quick').chance_accuracy:.3f}"}
    for run in table.load_runs(folder).to_dict("records"):
        assert (f"| {TINY_ROW} | {run['variant_name']} | 0 | {run['model.positions']} | {run['test_accuracy']:.3f} |"
                in page)
    assert page.count("make experiment VARIANT=") == 2 and "train.steps=2" in page
    assert "Not in the table" not in page
    commit = table.load_runs(folder)["git_commit"].iloc[0]
    assert set(frame["commit"]) == {(commit or "unknown")[:12]}
    # Each row keeps the revisions its run trained on, which later tell it stale (`experiments.revisions`).
    assert frame[["task revision", "variant revision"]].values.tolist() == [
        [str(revisions.revision("task", "passkey")), str(revisions.revision("variant", name))]
        for name in ("dense", "local")]


def _record_row(**values) -> dict:
    row = dict.fromkeys(table.RECORD, "–")
    row.update({"task revision": "1", "variant revision": "1", **values})
    return row


def test_writing_keeps_the_rows_of_runs_no_longer_here_and_replaces_those_run_again(tmp_path):
    run = _tiny(calibration.plan(["dense"], ["passkey"], profile="quick", seed=0, device="cpu")[0])
    folder = calibration.runs_folder(tmp_path, "quick")
    assert train_all([run], folder, workers=1, quiet=True, threads=None) == []
    variant = configs.described_variant(run.config)
    earlier = pd.DataFrame([
        _record_row(task=TINY_ROW, variant=variant, seed="0", steps="2",
                    **{"test accuracy": "0.123", "commit": "aaaaaaaaaaaa"}),
        _record_row(task="mqar", variant="gru", seed="0", **{"test accuracy": "0.456", "commit": "bbbbbbbbbbbb",
                                                              "command": "make experiment VARIANT=gru TASK=mqar"}),
        _record_row(task=TINY_ROW, variant=variant, seed="1", steps="2",
                    **{"test accuracy": "0.789", "commit": "cccccccccccc"}),
        # the same task, variant and seed over another budget (--set train.steps=1000): a row of its own
        _record_row(task=TINY_ROW, variant=variant, seed="0", steps="1000",
                    **{"test accuracy": "0.654", "commit": "dddddddddddd"}),
    ])
    (tmp_path / "calibration.csv").write_text(earlier.to_csv(index=False))

    page = table.write(folder, tmp_path / "calibration.md").read_text()
    record = table.read_record(tmp_path / "calibration.csv")
    assert list(zip(record["task"], record["variant"], record["seed"], record["steps"], strict=True)) == [
        ("mqar", "gru", "0", "–"), (TINY_ROW, variant, "0", "1000"), (TINY_ROW, variant, "0", "2"),
        (TINY_ROW, variant, "1", "2")]
    assert "| 0.654 |" in page
    fresh = record[(record["task"] == TINY_ROW) & (record["seed"] == "0") & (record["steps"] == "2")].iloc[0]
    accuracy = table.load_runs(folder)["test_accuracy"].iloc[0]
    assert fresh["test accuracy"] == f"{accuracy:.3f}" and fresh["commit"] != "aaaaaaaaaaaa"
    assert "0.123" not in page and "| 0.456 |" in page and "| 0.789 |" in page and "| bbbbbbbbbbbb |" in page
    assert "- mqar / gru / seed 0: `make experiment VARIANT=gru TASK=mqar`" in page


def test_a_run_replaces_only_the_row_of_its_own_profile_and_each_profile_has_its_table(tmp_path):
    run = _tiny(calibration.plan(["dense"], ["passkey"], profile="quick", seed=0, device="cpu")[0])
    folder = calibration.runs_folder(tmp_path, "quick")
    assert train_all([run], folder, workers=1, quiet=True, threads=None) == []
    variant = configs.described_variant(run.config)
    standard = _record_row(task=TINY_ROW, variant=variant, seed="0", steps="2", **{
        "test accuracy": "0.321", "command": "make experiment VARIANT=dense TASK=passkey PROFILE=standard SEED=0"})
    (tmp_path / "calibration.csv").write_text(pd.DataFrame([standard]).to_csv(index=False))

    page = table.write(folder, tmp_path / "calibration.md").read_text()
    record = table.read_record(tmp_path / "calibration.csv")
    assert sorted(table.profile_of(record)) == ["quick", "standard"]
    quick_table, standard_table = page.split("## The quick profile")[1].split("## The standard profile")
    assert f"| {TINY_ROW} | {variant} | 0 |" in quick_table and "| 0.321 |" not in quick_table
    assert "| 0.321 |" in standard_table


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage", b'"unterminated\n'], ids=["empty", "binary", "quote"])
def test_an_unreadable_record_is_refused_in_one_sentence(tmp_path, content):
    (tmp_path / "calibration.csv").write_bytes(content)
    with pytest.raises(ValueError, match=r"^Calibration record .* is not a readable CSV \(.*\); accepted: a CSV"):
        table.read_record(tmp_path / "calibration.csv")


def test_a_record_whose_revision_is_no_number_is_refused_naming_the_row(tmp_path):
    row = _record_row(task="passkey", variant="dense", seed="0", **{"variant revision": "two"})
    (tmp_path / "calibration.csv").write_text(pd.DataFrame([row]).to_csv(index=False))
    with pytest.raises(ValueError, match=r"row passkey / dense / seed 0 has variant revision 'two'; accepted: an "
                                         r"integer >= 1"):
        table.read_record(tmp_path / "calibration.csv")


def test_a_record_without_the_columns_is_refused_naming_them(tmp_path):
    (tmp_path / "calibration.csv").write_text("task,variant\npasskey,dense\n")
    with pytest.raises(ValueError, match=r"lacks the columns \['seed'"):
        table.read_record(tmp_path / "calibration.csv")


def test_a_run_that_did_not_complete_is_named_under_the_table(tmp_path):
    run = _tiny(calibration.plan(["dense"], ["passkey"], profile="quick", seed=0, device="cpu")[0])
    folder = calibration.runs_folder(tmp_path, "quick")
    folder.mkdir(parents=True)
    train(run.config, open_record(folder, run), quiet=True, should_stop=lambda step: step >= 1)
    page = table.write(folder, tmp_path / "calibration.md").read_text()
    assert "Not in the table" in page and "(interrupted)" in page
    assert table.read_record(tmp_path / "calibration.csv").empty  # an unfinished run is no row of record


def test_a_run_of_a_task_preset_has_a_row_of_its_own_named_after_the_preset(tmp_path):
    (run,) = calibration.plan(["dense"], ["passkey:num_keys=8"], profile="quick", seed=0, device="cpu")
    folder = calibration.runs_folder(tmp_path, "quick")
    assert train_all([_tiny(run)], folder, workers=1, quiet=True, threads=None) == []
    frame = table.rows(table.load_runs(folder))
    assert list(frame["task"]) == ["passkey:num_keys=8:test_size=64"] and frame["chance"].iloc[0] == "0.125"
