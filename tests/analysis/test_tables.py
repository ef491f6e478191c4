"""Tables as Parquet as well as CSV (`analysis.write_table`, `attnlab report --format parquet`): dtypes and values
round-trip through pandas, None and nullable columns included; list, tuple, dict and mixed columns as JSON text."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from analysis import load_runs, read_table, write_table
from analysis.report.build import build_report, write_page
from analysis.report.render import Figure, Section, Table
from analysis.report.tables import JSON_COLUMNS
from attnlab.cli import main


def awkward_frame() -> pd.DataFrame:
    """A column of every kind a report table or load_runs holds, each with a missing value where it can."""
    frame = pd.DataFrame({
        "seed": [0, 1, 2],
        "test_accuracy": [0.5, np.nan, 1.0],
        "trial": pd.array([3, None, 5], dtype="Int64"),
        "confirm": pd.array([True, None, False], dtype="boolean"),
        "variant_name": pd.Series(["local_w16", None, "dense"], dtype="str"),
        "error": pd.Series(["<b>boom</b>", None, "NaN"], dtype=object),
        "compiled": pd.Series([True, None, False], dtype=object),
        "study": pd.Series([None, None, None], dtype=object),
        "setting": pd.Categorical(["causal", "bidirectional", "causal"]),
        "started": pd.to_datetime(["2026-01-01 10:00", None, "2026-01-03 12:30"]),
        "task.eval_lengths": pd.Series([(256, 512), (), None], dtype=object),  # list options are tuples
        "accuracy_by_distance": pd.Series([[{"lo": 1, "hi": 3, "accuracy": 0.5, "count": 4}], [], None],
                                          dtype=object),
        "tags": pd.Series([{"study": "s", "trial": 3, "confirm": False}, {}, None], dtype=object),
        "variant.pairs": pd.Series([(("a", 1), ("b", (2, None))), None, ()], dtype=object),  # a dict option, hashable
        "variant.window": pd.Series([16, "auto", None], dtype=object),  # a number in one run, a word in another
    })
    frame.attrs = {"runs_dir": "runs", "skipped": [{"run": "broken", "reason": "summary.json is not JSON"}]}
    return frame


def test_a_frame_round_trips_through_parquet_with_its_dtypes_values_and_attrs(tmp_path):
    frame = awkward_frame()
    path = write_table(frame, tmp_path / "runs.parquet")
    back = read_table(path)
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert list(back.dtypes) == list(frame.dtypes) and back.attrs == frame.attrs
    for name in ("task.eval_lengths", "accuracy_by_distance", "tags", "variant.pairs", "variant.window"):
        assert list(back[name]) == list(frame[name]), name
        assert [type(cell) for cell in back[name]] == [type(cell) for cell in frame[name]], name
    assert back["variant.pairs"][0] == (("a", 1), ("b", (2, None))) and back["study"].tolist() == [None] * 3


def test_columns_parquet_cannot_keep_are_json_text_named_in_the_files_metadata(tmp_path):
    path = write_table(awkward_frame(), tmp_path / "runs.parquet")
    assert json.loads(pq.read_schema(path).metadata[JSON_COLUMNS]) == {
        "task.eval_lengths": "tuple", "accuracy_by_distance": "list", "tags": "list", "variant.pairs": "tuple",
        "variant.window": "list"}
    plain = pd.read_parquet(path)  # without read_table: the JSON text, readable by any Parquet reader
    assert plain["tags"].tolist()[:2] == ['{"study": "s", "trial": 3, "confirm": false}', "{}"]
    assert plain["variant.window"].tolist()[:2] == ["16", '"auto"'] and plain["variant.window"].isna()[2]
    assert plain["trial"].dtype == "Int64" and plain["confirm"].dtype == "boolean" and plain.attrs["runs_dir"] == "runs"


def test_a_table_file_needs_a_formats_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"'.*runs\.xlsx' has no table format's suffix; accepted: \.csv, \.parquet\."):
        write_table(awkward_frame(), tmp_path / "runs.xlsx")
    with pytest.raises(ValueError, match=r"^Table format 'xlsx' is not one the report writes; accepted: csv, parquet"):
        build_report(tmp_path, tmp_path, table_format="xlsx")


def test_load_runs_round_trips_through_parquet(runs_dir, tmp_path):
    runs = load_runs(runs_dir)
    assert runs["accuracy_by_distance"].map(lambda cell: isinstance(cell, list)).all()
    back = read_table(write_table(runs, tmp_path / "runs.parquet"))
    pd.testing.assert_frame_equal(back, runs, check_exact=True)
    assert back.attrs == runs.attrs and back["tags"].tolist() == runs["tags"].tolist()


def test_a_report_page_writes_and_links_its_tables_and_figures_data_as_parquet(tmp_path):
    data = awkward_frame()
    figure, ax = plt.subplots()
    ax.plot([1, 2], [0.5, 1.0])
    curve = pd.DataFrame({"step": [1, 2], "accuracy": [0.5, 1.0], "variant_name": ["dense", "dense"]})
    sections = [Section("results", "Results", [Table("results", "Runs", data[["seed", "tags"]], data=data),
                                               Figure("curves", "Curves", figure, curve)])]
    index = write_page(tmp_path, "page", "title", [], sections, "parquet")
    plt.close(figure)
    tables = index.parent / "tables"
    assert sorted(path.name for path in tables.iterdir()) == ["curves.parquet", "results.parquet"]
    pd.testing.assert_frame_equal(read_table(tables / "results.parquet"), data, check_exact=True)
    pd.testing.assert_frame_equal(read_table(tables / "curves.parquet"), curve, check_exact=True)
    page, markdown = index.read_text(), (index.parent / "report.md").read_text()
    for name in ("results", "curves"):
        assert f'<a href="tables/{name}.parquet">Parquet</a>' in page
    assert "([Parquet](tables/results.parquet))" in markdown
    assert ".csv" not in page + markdown


def test_the_report_command_writes_every_table_as_parquet_when_asked(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    out = tmp_path / "reports"
    assert main(["report", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--format", "parquet"]) == 0
    tables = sorted((out / "all" / "tables").iterdir())
    assert tables and all(path.suffix == ".parquet" for path in tables)
    for path in tables:
        read_table(path)
    assert f"wrote {out / 'all' / 'index.html'}" in capsys.readouterr().out
