"""docs/results.md and README.md's headline table are generated from the committed records, never typed: the
page shows each record's values with where they come from, a row added to a record shows up, the committed
page and README block are what the generator gives today, and the README types no accuracy of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from analysis import results_doc
from analysis.calibration.table import RECORD, read_record, stale
from experiments import revisions

ROOT = Path(__file__).resolve().parents[2]
ACCURACY = re.compile(r"\b[01]\.\d{3}\b")  # how an accuracy is written: 0.917, 1.000


def calibration_row(task: str, variant: str, name: str, accuracy: str, commit: str, extra: str = "",
                    variant_revision: str | None = None) -> dict:
    command = f"make experiment VARIANT={name} TASK={task} PROFILE=quick SEED=0 DEVICE=cpu{extra}"
    values = {"task": task, "variant": variant, "seed": "0", "positions": "learned", "test accuracy": accuracy,
              "validation accuracy": "0.500", "chance": "0.062", "splits and lengths": "–", "steps": "800",
              "wall time (s)": "27", "tokens/s": "130,370", "commit": commit, "device": "cpu, torch 9.9.9+cpu",
              "command": command, "task revision": str(revisions.revision(revisions.TASK, task)),
              "variant revision": variant_revision or str(revisions.revision(revisions.VARIANT, name))}
    return {column: values[column] for column in RECORD}


def write_calibration(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(RECORD)).to_csv(folder / "calibration.csv", index=False)
    return folder


def section(page: str, title: str) -> str:
    """The text of the `### title...` section of a generated page, up to the next heading."""
    start = page.index(f"### {title}")
    end = page.find("\n#", start + 1)
    return page[start : end if end != -1 else len(page)]


@pytest.fixture
def records(tmp_path) -> Path:
    return write_calibration(tmp_path / "docs", [
        calibration_row("passkey", "dense", "dense", "0.917", "aaaa11112222"),
        calibration_row("passkey", "local_w32", "local", "0.283", "bbbb33334444"),
        calibration_row("mqar", "dense", "dense", "0.871", "aaaa11112222"),
    ])


def test_a_calibration_table_shows_each_rows_accuracy_and_where_it_came_from(records):
    table = section(results_doc.page(records), "The calibration's default variants (quick profile)")
    assert "| passkey | 0.062 | 0.917 | 0.283 |" in table
    assert "| mqar | 0.062 | 0.871 | – |" in table  # local has no mqar row: an empty cell, not a number
    assert "aaaa11112222" in table and "bbbb33334444" in table and "cpu, torch 9.9.9+cpu" in table
    assert "make experiment VARIANT=local TASK=&lt;task&gt; PROFILE=quick SEED=0 DEVICE=cpu" in table


def test_a_row_added_to_the_record_appears_on_the_page_in_its_familys_table(records):
    before = results_doc.page(records)
    assert not {"0.733", "0.642", "0.455", "0.321"} & set(re.findall(r"\d\.\d{3}", before))
    rows = pd.read_csv(records / "calibration.csv", dtype=str, keep_default_na=False).to_dict("records")
    write_calibration(records, [*rows, calibration_row("passkey", "linear_phielu", "linear", "0.733", "cccc5555"),
                                calibration_row("passkey", "lstm", "lstm", "0.642", "dddd6666"),
                                calibration_row("passkey", "dense_nentmax15", "dense", "0.455", "eeee7777",
                                                ' ARGS="--set variant.normaliser=entmax15"'),
                                calibration_row("passkey", "retired_v2", "retired", "0.321", "ffff8888")])
    page = results_doc.page(records)
    kernelised = section(page, "The kernelised and low-rank families (quick profile)")
    assert "| passkey | 0.062 | 0.917 | 0.733 |" in kernelised and "cccc5555" in kernelised  # dense beside it
    baselines = section(page, "The baselines: is attention needed at all? (quick profile)")
    assert "| passkey | 0.062 | 0.917 | 0.642 |" in baselines and "dddd6666" in baselines
    normalisers = section(page, "Other normalisers beside the softmax (quick profile)")
    assert "| passkey | 0.062 | 0.917 | 0.455 |" in normalisers and "variant.normaliser=entmax15" in normalisers
    retired = section(page, "The other attention variants (quick profile)")  # a name no longer registered
    assert "| passkey | 0.062 | 0.917 | 0.321 |" in retired and "ffff8888" in retired


def test_softmax_rows_go_beside_another_normalisers_rows_only_on_the_tasks_those_have(tmp_path):
    entmax = ' ARGS="--set variant.normaliser=entmax15"'
    page = results_doc.page(write_calibration(tmp_path, [
        calibration_row("passkey", "sparse_w64", "sparse", "0.523", "1111aaaa"),
        calibration_row("passkey", "sparse_w64_nentmax15", "sparse", "0.520", "2222bbbb", entmax),
        calibration_row("listops", "sparse_w64", "sparse", "0.391", "3333cccc")]))
    normalisers = section(page, "Other normalisers beside the softmax (quick profile)")
    assert "| passkey | 0.062 | 0.523 | 0.520 |" in normalisers and "0.391" not in normalisers
    assert "| listops | 0.062 | 0.391 |" in section(page, "The other attention variants (quick profile)")


def test_a_row_trained_before_its_variant_was_revised_is_marked_stale_with_why_and_how_to_rerun(tmp_path,
                                                                                                monkeypatch):
    monkeypatch.setitem(revisions.REVISED[revisions.VARIANT], "local", ((2, "its window now ends at the query"),))
    page = results_doc.page(write_calibration(tmp_path, [
        calibration_row("passkey", "dense", "dense", "0.917", "aaaa1111"),
        calibration_row("passkey", "local_w32", "local", "0.283", "bbbb2222", variant_revision="1"),
        calibration_row("mqar", "local_w32", "local", "0.871", "cccc3333")]))
    assert revisions.revision(revisions.TASK, "passkey") == revisions.revision(revisions.TASK, "mqar")
    table = section(page, "The calibration's default variants (quick profile)")
    assert "| passkey | 0.062 | 0.917 | 0.283 (stale) |" in table
    assert "| mqar | 0.062 | – | 0.871 |" in table  # trained at the current revision: not stale
    assert ("- passkey / local\\_w32: variant local is at revision 2 (its window now ends at the query), the row at 1; "
            "`make experiment VARIANT=local TASK=passkey") in table.replace("local_w32", "local\\_w32")


def test_a_cell_with_several_seeds_shows_each_seeds_accuracy_in_seed_order(tmp_path):
    rows = [calibration_row("passkey", "dense", "dense", accuracy, "aaaa1111") for accuracy in ("0.900", "0.917")]
    rows[0]["seed"] = "1"  # the record lists seed 1 first: the cell still reads in seed order
    page = results_doc.page(write_calibration(tmp_path, rows + [
        calibration_row("passkey", "local_w32", "local", "0.283", "bbbb2222")]))
    table = section(page, "The calibration's default variants (quick profile)")
    assert "| passkey | 0.062 | 0.917 / 0.900 (seeds 0, 1) | 0.283 |" in table


def test_a_record_written_before_rows_kept_revisions_reads_as_revision_1(tmp_path, monkeypatch):
    monkeypatch.setitem(revisions.REVISED[revisions.TASK], "passkey", ((2, "a longer haystack"),))
    rows = [calibration_row("passkey", "dense", "dense", "0.917", "aaaa1111")]
    pd.DataFrame(rows).drop(columns=["task revision", "variant revision"]).to_csv(tmp_path / "calibration.csv",
                                                                                   index=False)
    record = read_record(tmp_path / "calibration.csv")
    assert record[["task revision", "variant revision"]].values.tolist() == [["1", "1"]]
    assert stale(record).tolist() == ["task passkey is at revision 2 (a longer haystack), the row at 1"]


def test_a_revision_of_one_profile_leaves_the_rows_of_the_others_current_and_the_reason_cites_the_one_that_did(
        monkeypatch):
    monkeypatch.setitem(revisions.REVISED[revisions.TASK], "passkey", (
        (2, "a longer haystack"), (3, "a longer standard haystack", ("standard",))))
    rows = [calibration_row("passkey", "dense", "dense", "0.917", "aaaa1111") for _ in range(4)]
    for row, profile, revision in zip(rows, ("quick", "standard", "quick", "quick"), ("2", "2", "1", "3"),
                                      strict=True):
        row.update({"command": row["command"].replace("PROFILE=quick", f"PROFILE={profile}"), "seed": revision,
                    "task revision": revision})
    assert stale(pd.DataFrame(rows)).tolist() == [
        "", "task passkey is at revision 3 (a longer standard haystack), the row at 2",
        "task passkey is at revision 3 (revision 2: a longer haystack), the row at 1", ""]
    assert revisions.stale_because("passkey", "dense", {}) == (  # a record that keeps no profile: any revision
        "task passkey is at revision 3 (a longer standard haystack), the row at 1")


def test_every_row_of_the_committed_calibration_record_is_in_a_table():
    page = results_doc.page(ROOT / "docs")
    record = pd.read_csv(ROOT / "docs" / "calibration.csv", dtype=str, keep_default_na=False)
    tables = [line for line in page.splitlines() if line.startswith("| task | chance |")]
    shown = {cell.strip().replace("\\_", "_") for line in tables for cell in line.strip("|").split("|")}
    assert set(record["variant"]) <= shown


def test_a_record_under_records_is_drawn_with_its_provenance(records):
    (records / "records").mkdir()
    pd.DataFrame([{"variant": "dense", "tokens per second": "1234", "commit": "f00dfeed", "device": "cuda, H100",
                   "command": "attnlab speed --variants dense", "source": "the run's printout"}]).to_csv(
        records / "records" / "speed-something.csv", index=False)
    drawn = section(results_doc.page(records), "speed-something")
    assert "| variant | tokens per second |" in drawn and "| dense | 1234 |" in drawn
    assert "f00dfeed" in drawn and "cuda, H100" in drawn and "`attnlab speed --variants dense`" in drawn
    assert "the run's printout" in drawn


def test_a_record_without_its_provenance_is_refused_naming_the_missing_columns(records):
    (records / "records").mkdir()
    pd.DataFrame([{"variant": "dense", "ms": "1.5", "commit": "f00d"}]).to_csv(records / "records" / "bare.csv",
                                                                            index=False)
    with pytest.raises(ValueError, match=r"lacks the columns \['device', 'command', 'source'\]"):
        results_doc.page(records)


def test_the_leaderboard_ranks_by_the_average_of_the_recorded_means_within_causal_and_bidirectional_rows():
    board = pd.DataFrame([
        {"variant": variant, "task": task, "chance": "0.5", "test mean": mean, "interval half-width": "0.010",
         "seeds completed": "3", "parameters (over both tasks)": "1,000"}
        for variant, task, mean in [("a", "t1", "0.600"), ("a", "t2", "0.700"), ("linformer", "t1", "0.950"),
                                    ("linformer", "t2", "0.950"), ("dense", "t1", "0.900"), ("dense", "t2", "0.800")]])
    shown, notes = results_doc._board(board)
    # linformer has no causal form: it is ranked among the bidirectional rows, after the causal ones
    assert shown["variant"].tolist() == ["dense", "a", "linformer"] and shown["rank"].tolist() == ["1", "2", "1"]
    assert shown["attention"].tolist() == ["causal", "causal", "bidirectional"]
    assert shown["average"].tolist() == ["0.850", "0.650", "0.950"]
    assert shown["t1 (chance 0.500)"].tolist() == ["0.900 ± 0.010 (n=3)", "0.600 ± 0.010 (n=3)",
                                                   "0.950 ± 0.010 (n=3)"]
    # a record keeps no accuracy per seed, so it states no paired verdict (and no reading of intervals)
    assert any("which this record does not keep" in note for note in notes)
    assert not any("wholly below" in note or "overlap" in note for note in notes)


def test_a_recorded_row_not_within_10_percent_of_denses_parameters_is_listed_unranked_and_a_revised_task_stale(
        monkeypatch):
    monkeypatch.setitem(revisions.REVISED[revisions.TASK], "t1", ((2, "a longer sequence"),))
    board = pd.DataFrame([
        {"variant": variant, "task": task, "chance": "0.5", "test mean": "0.700", "interval half-width": "0.010",
         "seeds completed": "3", "parameters (over both tasks)": parameters}
        for variant, parameters in [("dense", "1,000..1,100"), ("small", "770..850"), ("near", "920..1,050")]
        for task in ("t1", "t2")])
    shown, notes = results_doc._board(board)
    ranks = dict(zip(shown["variant"], shown["rank"], strict=True))
    assert ranks["dense"] == "1" and ranks["near"] == "1" and ranks["small"] == "–"
    reasons = dict(zip(shown["variant"], shown["not ranked because"], strict=True))
    assert reasons["small"] == ("not within 10% of dense's parameters on t1 (0.77x dense's parameters in this "
                                "record), t2 (0.77x dense's parameters in this record)")
    assert notes[-1] == ("Stale: task t1 is at revision 2 (a longer sequence), the row at 1. These rows stand as "
                         "measured then; the command measures them again.")
    assert results_doc._board(board[board["variant"] != "dense"])[0]["not ranked because"].str.startswith(
        "not within 10% of dense's parameters on t1 (no dense row").all()


def test_the_committed_results_page_is_what_the_committed_records_give():
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert committed == results_doc.page(ROOT / "docs"), "docs/results.md is stale or edited by hand: make results"


def test_the_readme_headline_block_is_what_the_committed_records_give():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    generated = results_doc.headline(ROOT / "docs")
    assert generated in readme, "README.md's results block is stale or edited by hand: make results"
    assert results_doc.with_headline(readme, generated) == readme


def test_the_readme_has_at_most_300_lines():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readme_types_no_accuracy_outside_its_generated_block():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = readme.index(results_doc.START), readme.index(results_doc.END)
    assert ACCURACY.search(readme[start:end])  # the pattern finds the accuracies the generated table does show
    outside = readme[:start] + readme[end:]
    assert ACCURACY.findall(outside) == []


def test_write_rewrites_the_page_and_only_the_readmes_block(records, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nkept\n\n{results_doc.START}\nold 0.123\n{results_doc.END}\n\nkept too\n")
    out = results_doc.write(tmp_path / "results.md", records, readme)
    assert out.read_text(encoding="utf-8") == results_doc.page(records)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# title\n\nkept\n\n<!-- results:start -->") and text.endswith("-->\n\nkept too\n")
    assert "old 0.123" not in text and "[docs/results.md](docs/results.md)" in text
    readme.write_text("# a README without the markers\n")
    with pytest.raises(ValueError, match="README has no <!-- results:start --> ... <!-- results:end --> block"):
        results_doc.write(tmp_path / "results.md", records, readme)


def test_the_cost_line_reads_the_estimate_made_before_the_run_and_the_all_estimate_from_their_records(tmp_path,
                                                                                                      monkeypatch):
    monkeypatch.setattr(results_doc, "ADDED_ESTIMATES", ("benchmark-estimate-suite-seeds",
                                                         "benchmark-estimate-capacity-seeds"))  # two continuations
    provenance = {"profile": "quick", "commit": "abc", "device": "cpu", "command": "attnlab benchmark",
                  "source": "written by the command"}
    folder = tmp_path / "records"
    folder.mkdir()
    assert results_doc.cost_lines(folder, 7920.0) == []  # no records: no line
    pd.DataFrame([{"what": "every job", "jobs": "416", "hours": "3.58", **provenance},
                  {"what": "wall time with 2 workers", "jobs": "", "hours": "2.00", **provenance}]).to_csv(
        folder / f"{results_doc.HEADLINE_ESTIMATE}.csv", index=False)
    assert results_doc.cost_lines(folder, 7920.0) == []  # no estimate of every variant: no line
    pd.DataFrame([{"what": "every job", "jobs": "800", "hours": "24.00", **provenance}]).to_csv(
        folder / "benchmark-estimate-all.csv", index=False)
    line, = results_doc.cost_lines(folder, 7920.0)
    assert "`make benchmark-estimate WORKERS=2`, [records/benchmark-estimate-suite.csv]" in line
    assert ") 2.00 hours of wall time, measured 2.20 (1.10 of the estimate)" in line
    assert "`VARIANT=all`, 800 jobs, 24.0 hours of runs: 12.0 hours with 2 workers here, 3.0 on 4 such" in line
    pd.DataFrame([{"what": "wall time with 2 workers", "jobs": "", "hours": "0.75", **provenance}]).to_csv(
        folder / f"{results_doc.ADDED_ESTIMATES[0]}.csv", index=False)  # the added seeds, estimated before they ran
    line, = results_doc.cost_lines(folder, 7920.0 + 3240.0)
    assert ("[records/benchmark-estimate-suite.csv](docs/records/benchmark-estimate-suite.csv), then before its "
            "added seeds ran [records/benchmark-estimate-suite-seeds.csv](docs/records/benchmark-estimate-suite-seeds"
            ".csv)) 2.00 + 0.75 = 2.75 hours of wall time, measured 3.10 (1.13 of the estimate)") in line
    pd.DataFrame([{"what": "wall time with 2 workers", "jobs": "", "hours": "3.25", **provenance}]).to_csv(
        folder / f"{results_doc.ADDED_ESTIMATES[1]}.csv", index=False)  # a second continuation, in the order it ran
    line, = results_doc.cost_lines(folder, 7920.0 + 3240.0 + 11700.0)
    assert ("(docs/records/benchmark-estimate-suite-seeds.csv), then before more added seeds ran "
            "[records/benchmark-estimate-capacity-seeds.csv](docs/records/benchmark-estimate-capacity-seeds.csv)) "
            "2.00 + 0.75 + 3.25 = 6.00 hours of wall time, measured 6.35 (1.06 of the estimate)") in line
