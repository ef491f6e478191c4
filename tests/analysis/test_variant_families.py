"""The report on variants beyond softmax attention: approximations stated under the results, causality shown
where rows differ, and heat maps drawn from each variant's own reference formula."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import tiny_config

import variants
from analysis.report.context import Context
from analysis.report.render import Section, Table, Text, to_html, to_markdown
from analysis.report.sections import attention as attention_section
from analysis.report.sections import results as results_section
from analysis.runs import load_runs
from experiments import tasks
from experiments.run import config as configs
from experiments.run.launch import start_record
from experiments.run.model import Transformer
from experiments.run.records import RunRecord
from experiments.run.train import train

EVIL_APPROXIMATION = '<script>alert(7)</script> & "softmax" approximated'


def _context(runs: pd.DataFrame, runs_dir) -> Context:
    return Context(runs_dir=runs_dir, runs=runs, skipped=[], studies=[], speed=None, speed_files=[], filters={})


def _results(context: Context) -> tuple[list[str], pd.DataFrame]:
    blocks = results_section.results(context)
    (table,) = [block for block in blocks if isinstance(block, Table) and block.name == "results"]
    return [block.text for block in blocks if isinstance(block, Text)], table.frame


def test_the_results_state_each_present_variants_approximation_once_escaped(runs_dir, monkeypatch):
    assert variants.variant_class("linear").approximation is None  # exact to its paper: never listed
    monkeypatch.setattr(variants.variant_class("dense"), "approximation", EVIL_APPROXIMATION)
    context = _context(load_runs(runs_dir), runs_dir)
    texts, _ = _results(context)
    stated = [text for text in texts if text.startswith("Approximation of ")]
    assert stated == [f"Approximation of dense: {EVIL_APPROXIMATION}"]  # local has none; dense once for its runs
    blocks = results_section.results(context)
    for page in (to_html("t", [], [Section("results", "Results", blocks)]),
                 to_markdown("t", [], [Section("results", "Results", blocks)])):
        assert "<script>" not in page and "&lt;script&gt;alert(7)&lt;/script&gt;" in page


def test_model_causal_is_shown_only_where_rows_differ_in_causality(runs_dir):
    runs = load_runs(runs_dir)
    texts, table = _results(_context(runs, runs_dir))
    assert "model.causal" not in table.columns
    assert not any("differ in causality" in text for text in texts)

    runs.loc[runs["variant"] == "local", "model.causal"] = False  # as a bidirectional variant would run
    texts, table = _results(_context(runs, runs_dir))
    causal = dict(zip(table["variant"], table["model.causal"], strict=True))
    assert causal["local_w4"] == "false" and causal["dense"] == "true"
    assert [text for text in texts if "differ in causality" in text] == [
        "Rows of passkey differ in causality (model.causal): a row with model.causal false lets each position "
        "attend to later ones (variants bidirectional in their papers have no causal form), which a causal row "
        "cannot."]


@pytest.fixture(scope="module")
def linear_runs(tmp_path_factory):
    """Two tiny trained runs of linear attention: elu + 1 features (rows sum to 1) and the identity (unnormalised)."""
    folder = tmp_path_factory.mktemp("linear-runs")
    for options in ({}, {"feature_map": "identity"}):
        config = tiny_config("linear", 0, options)
        train(config, start_record(folder, config), quiet=True)
    return folder


def _picture(folder, variant_name):
    runs = load_runs(folder)
    run = _context(runs, folder).runs.set_index("variant_name", drop=False).loc[variant_name]
    return run, attention_section._attention_picture(run, 0)


def _reference_model(run) -> tuple[Transformer, tasks.Task]:
    """The run's trained model, rebuilt from its record, and its task."""
    record = RunRecord(Path(run["path"]))
    config = configs.from_dict(record.read_config())
    task = tasks.create_task(config.task, profile=config.profile, options=config.task_options)
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes, max_len=task.max_len,
                        variant=config.variant, variant_options=config.variant_options, seed=config.seed)
    model.load_state_dict(record.load_checkpoint()["model"])
    return model.eval(), task


@pytest.mark.parametrize(("variant_name", "normaliser"), [("linear_phielu", "sum"), ("linear_phiidentity", "none")])
def test_heat_maps_of_linear_attention_are_its_reference_weights(linear_runs, variant_name, normaliser):
    run, figure = _picture(linear_runs, variant_name)
    assert f"weights of linear's reference formula (normaliser {normaliser})" in figure.caption
    model, task = _reference_model(run)
    test_set = task.test_set("cpu")
    example = int(figure.caption.split("eval example ")[1].split(" ")[0])
    with torch.no_grad():
        _, weights = model(test_set.inputs[example : example + 1], return_weights=True)
    data = figure.data
    expected = np.array([round(float(weights[row.layer][0, row.head, row.query, row.key]), 5)
                         for row in data.itertuples()])
    assert np.array_equal(data["weight"].to_numpy(), expected)
    assert (data.loc[data["key"] > data["query"], "weight"] == 0).all()  # causal
    sums = data.groupby(["layer", "head", "query"])["weight"].sum()
    if normaliser == "sum":
        assert np.allclose(sums, 1.0, atol=1e-3) and (data["weight"] >= 0).all()
    else:  # unnormalised q.k / sqrt(d): negative weights, drawn on a scale centred at 0
        assert (data["weight"] < 0).any() and not np.allclose(sums, 1.0, atol=1e-3)
        scale = attention_section._colour_scale(list(weights))
        assert scale["cmap"] == "RdBu_r" and scale["vmin"] == -scale["vmax"] < 0  # centred at 0


def test_the_attention_section_draws_linear_runs_without_problems(linear_runs):
    context = _context(load_runs(linear_runs), linear_runs)
    blocks = attention_section.attention(context)
    assert not [block for block in blocks if isinstance(block, Table) and block.name == "attention-problems"]
    assert len([block for block in blocks if getattr(block, "name", "").startswith("attention-0")]) == 2
