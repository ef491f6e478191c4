"""The report draws the layout that really ran for variants whose layout depends on the input: Reformer's hash
buckets and Sinkhorn's learned sorting, on an eval example, through the trained model."""

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import tiny_config

from analysis import load_runs
from analysis.report import figures
from analysis.report.context import Context
from analysis.report.sections import attention as attention_section
from experiments.run.launch import start_record
from experiments.run.train import train

RUNS = {"reformer": {"num_buckets": 4, "chunk_size": 4}, "sinkhorn": {"block_size": 4}, "local": {"window": 4}}


@pytest.fixture(scope="module")
def layout_runs(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("example-layout-runs")
    for variant, options in RUNS.items():
        config = tiny_config(variant, 0, options)
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, depth=2))  # a layer 1 to draw
        train(config, start_record(folder, config), quiet=True)
    return folder


def _drawn(runs_dir: Path) -> tuple[dict[str, object], list[dict[str, str]]]:
    runs = load_runs(runs_dir)
    context = Context(runs_dir=runs_dir, runs=runs, skipped=[], studies=[], speed=None, speed_files=[], filters={})
    problems = []
    with figures.style():
        blocks = attention_section._example_layout_blocks(context, problems)
    by_variant = {block.name.split("-passkey-")[1].split("_")[0]: block for block in blocks}
    return by_variant, problems


def _weights_on_the_example(runs_dir: Path, variant: str, caption: str) -> list[torch.Tensor]:
    """The trained model's attention weights per layer (heads, T, T) on the example the caption names."""
    runs = load_runs(runs_dir)
    run = runs[runs["variant"] == variant].iloc[0]
    task, model = attention_section._trained_model(run)
    example = int(caption.split("eval example ")[1].split(" ")[0])
    with torch.no_grad():
        return [layer[0] for layer in model(task.test_set("cpu").inputs[example : example + 1], return_weights=True)[1]]


def _shares(frame: pd.DataFrame, layer: int, head: int, length: int) -> torch.Tensor:
    drawn = torch.zeros(length, length, dtype=torch.float64)
    part = frame[(frame["layer"] == layer) & (frame["head"] == head)]
    drawn[torch.tensor(part["query"].to_numpy()), torch.tensor(part["key"].to_numpy())] = torch.tensor(
        part["attended"].to_numpy(), dtype=torch.float64)
    return drawn


def test_only_variants_whose_layout_depends_on_the_input_are_drawn_on_an_example(layout_runs):
    drawn, problems = _drawn(layout_runs)
    assert problems == []
    assert set(drawn) == {"reformer", "sinkhorn"}  # local's layout is the same on every input: drawn apart


@pytest.mark.parametrize("variant", ["reformer", "sinkhorn"])
def test_the_pairs_drawn_are_the_pairs_the_trained_model_weighed_on_that_example(layout_runs, variant):
    figure = _drawn(layout_runs)[0][variant]
    weights = _weights_on_the_example(layout_runs, variant, figure.caption)
    length = weights[0].shape[-1]
    for layer, layer_weights in enumerate(weights):
        for head in range(layer_weights.shape[0]):
            shares = _shares(figure.data, layer, head, length)
            # Reformer: a key outside the query's buckets gets exp(-1e9) = 0; Sinkhorn: soft sorting weighs every
            # key its blocks may reach, and none else.
            assert torch.equal(shares > 0, layer_weights[head] > 1e-300), (layer, head)
            assert ((shares > 0) & (shares <= 1)).sum() == (shares > 0).sum()
    if variant == "reformer":  # hashed pairs are attended outright or not at all
        assert set(figure.data["attended"]) == {1.0}
    else:  # own block outright, the sorted blocks by their share
        assert 1.0 in set(figure.data["attended"]) and (figure.data["attended"] < 1).any()
