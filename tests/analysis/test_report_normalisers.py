"""The normaliser as a column of the runs, a filter of the report, a column of its results tables, and the exact
zeros of sparse normalisers marked on its attention heat maps."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY, tiny_config

from analysis import build_report, load_runs, parse_filters, select
from analysis.report import figures
from analysis.report.context import Context
from analysis.report.render import Table
from analysis.report.sections import attention as attention_section
from analysis.report.sections import results as results_section
from experiments.run import config as configs
from experiments.run.launch import start_record
from experiments.run.train import train

# variant name -> (variant, options): the softmax by default, two sparse normalisers, the kernelised family's sum
RUNS = {"dense": ("dense", {}), "dense_nsparsemax": ("dense", {"normaliser": "sparsemax"}),
        "dense_nentmax15": ("dense", {"normaliser": "entmax15"}), "performer_r1000_orf": ("performer", {})}


@pytest.fixture(scope="module")
def normaliser_runs(tmp_path_factory) -> Path:
    """Tiny trained runs of every entry of RUNS and of an LSTM baseline (sized by the profile's heads)."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("normaliser-runs")
    for variant, options in RUNS.values():
        config = tiny_config(variant, 0, options)
        train(config, start_record(folder, config), quiet=True)
    model = {name: value for name, value in TINY["model"].items() if name != "heads"}
    config = configs.resolve(variant="lstm", task="passkey", profile="quick", seed=0, device="cpu",
                             overrides={"variant": {}, "task": dict(TINY["task"]), "model": model,
                                        "train": dict(TINY["train"])})
    train(config, start_record(folder, config), quiet=True)
    return folder


def _context(runs: pd.DataFrame, runs_dir: Path) -> Context:
    return Context(runs_dir=runs_dir, runs=runs, skipped=[], studies=[], speed=None, speed_files=[], filters={})


def test_each_run_has_the_normaliser_its_attention_ran_with(normaliser_runs):
    runs = load_runs(normaliser_runs)
    assert dict(zip(runs["variant_name"], runs["normaliser"], strict=True)) == {
        "dense": "softmax", "dense_nsparsemax": "sparsemax", "dense_nentmax15": "entmax15",
        "performer_r1000_orf": "sum",  # no option: what the kernelised module sets
        "lstm": "baseline"}


def test_a_run_of_a_variant_no_longer_registered_keeps_its_saved_normaliser_or_reads_unknown(normaliser_runs,
                                                                                             tmp_path):
    run = next(path for path in normaliser_runs.iterdir() if "-dense_nsparsemax-" in path.name)
    for name, options in (("retired-saved", {"normaliser": "sparsemax"}), ("retired-unsaved", {"window": 4})):
        shutil.copytree(run, tmp_path / name, ignore=shutil.ignore_patterns("checkpoint.pt"))
        config = json.loads((tmp_path / name / "config.json").read_text())
        (tmp_path / name / "config.json").write_text(json.dumps({**config, "variant": "retired",
                                                                 "variant_options": options}))
    runs = load_runs(tmp_path)
    assert runs.attrs["skipped"] == []
    assert dict(zip(runs["run_id"], runs["normaliser"], strict=True)) == {"retired-saved": "sparsemax",
                                                                          "retired-unsaved": "unknown"}


def test_an_empty_runs_folder_has_the_normaliser_column(tmp_path):
    assert "normaliser" in load_runs(tmp_path).columns


def test_a_normaliser_filter_selects_its_runs_and_an_unknown_one_selects_none_as_any_filter_does(normaliser_runs):
    runs = load_runs(normaliser_runs)
    columns = list(runs.columns)
    assert list(select(runs, parse_filters("normaliser=entmax15", columns))["variant_name"]) == ["dense_nentmax15"]
    either = select(runs, parse_filters("normaliser=sparsemax,normaliser=baseline", columns))
    assert sorted(either["variant_name"]) == ["dense_nsparsemax", "lstm"]
    assert select(runs, parse_filters("normaliser=entmax2", columns)).empty
    assert select(runs, parse_filters("variant=dense2", columns)).empty  # the same for any column's unknown value
    with pytest.raises(ValueError, match=r"^Filter column 'normalizer' is not a run column \(did you mean "
                                         r"'normaliser'"):
        parse_filters("normalizer=entmax15", columns)


def test_a_report_filtered_on_a_normaliser_shows_only_its_runs(normaliser_runs, tmp_path):
    index = build_report(normaliser_runs, tmp_path, filters="normaliser=entmax15")
    assert index.parent.name == "normaliser-entmax15"
    results = pd.read_csv(index.parent / "tables" / "results.csv")
    assert list(results["variant"]) == ["dense_nentmax15"] and list(results["normaliser"]) == ["entmax15"]
    assert "filters: normaliser=entmax15" in index.read_text()


def _tables(context: Context) -> dict[str, Table]:
    return {block.name: block for block in results_section.results(context) if isinstance(block, Table)}


def test_the_results_tables_show_each_rows_normaliser_beside_the_variant_where_rows_differ(normaliser_runs):
    runs = load_runs(normaliser_runs)
    tables = _tables(_context(runs, normaliser_runs))
    expected = {"dense": "softmax", "dense_nsparsemax": "sparsemax", "dense_nentmax15": "entmax15",
                "performer_r1000_orf": "sum", "lstm": "baseline"}
    for name in ("results", "results-by-task"):
        frame = tables[name].frame
        assert list(frame.columns[frame.columns.get_loc("variant") + 1:][:1]) == ["normaliser"]
        # the by-task table's rows are labels: the variant name and a setting (the baseline has the profile's heads)
        shown = dict(zip(frame["variant"].str.split(" [", regex=False).str[0], frame["normaliser"], strict=True))
        assert shown == (expected if name == "results" else {**expected, "chance": "–"})
    assert "normaliser of every row" not in tables["results"].caption

    softmax = runs[runs["normaliser"] == "softmax"]
    tables = _tables(_context(softmax, normaliser_runs))
    for name in ("results", "results-by-task"):
        assert "normaliser" not in tables[name].frame.columns
        assert "normaliser of every row: softmax" in tables[name].caption


def _picture(runs_dir: Path, variant_name: str):
    run = _context(load_runs(runs_dir), runs_dir).runs.set_index("variant_name", drop=False).loc[variant_name]
    with figures.style():
        return run, attention_section._attention_picture(run, 0)


def _exact_weights(run, caption: str) -> list[torch.Tensor]:
    """The trained model's weights, unrounded, on the example the caption names: rebuilt from the run's record."""
    task, model = attention_section._trained_model(run)
    example = int(caption.split("eval example ")[1].split(" ")[0])
    with torch.no_grad():
        return model(task.test_set("cpu").inputs[example : example + 1], return_weights=True)[1]


def test_heat_maps_of_sparsemax_mark_its_exact_zeros_apart_from_small_weights(normaliser_runs):
    run, figure = _picture(normaliser_runs, "dense_nsparsemax")
    weights = _exact_weights(run, figure.caption)
    data = figure.data
    exact = np.array([float(weights[row.layer][0, row.head, row.query, row.key]) for row in data.itertuples()])
    causal_seen = (data["key"] <= data["query"]).to_numpy()
    assert np.array_equal(data["seen"].to_numpy(), causal_seen)
    assert np.array_equal(data["exact_zero"].to_numpy(), causal_seen & (exact == 0.0))
    assert data["exact_zero"].any() and (data.loc[~data["exact_zero"] & data["seen"], "weight"] >= 0).all()
    zero_share = data[data["seen"]]["exact_zero"].mean()
    assert re.search(r"exact zeros \(weight 0\.0 exactly where the query may see the key\) in orange: "
                     rf"{100 * zero_share:.3g}% of the seen", figure.caption)
    for ax in figure.figure.axes:
        if not ax.get_title().startswith("layer"):
            continue  # a colour bar
        layer, head = map(int, re.findall(r"\d+", ax.get_title())[:2])
        panel = data[(data["layer"] == layer) & (data["head"] == head)]
        share = float(re.search(r"\(([\d.]+)% exact zeros\)", ax.get_title()).group(1))
        assert share == pytest.approx(100 * panel[panel["seen"]]["exact_zero"].mean(), rel=1e-2)
        drawn = np.ma.getmaskarray(ax.collections[0].get_array()).reshape(-1)  # cells left to the zero colour
        assert np.array_equal(drawn, panel.sort_values(["query", "key"])["exact_zero"].to_numpy())
        assert ax.get_facecolor()[:3] == pytest.approx(tuple(int(attention_section.ZERO_COLOUR[i:i + 2], 16) / 255
                                                             for i in (1, 3, 5)))


def test_heat_maps_of_softmax_stay_unmarked(normaliser_runs):
    _, figure = _picture(normaliser_runs, "dense")
    assert not figure.data["exact_zero"].any()
    assert (figure.data.loc[~figure.data["seen"], "weight"] == 0).all()  # zeros the causal mask makes, not marked
    assert "exact zeros" not in figure.caption
    for ax in figure.figure.axes:
        assert "exact zeros" not in ax.get_title()
        if ax.get_title().startswith("layer"):
            assert not np.ma.getmaskarray(ax.collections[0].get_array()).any()
