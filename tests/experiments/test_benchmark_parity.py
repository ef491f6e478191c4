"""Parameter parity: the benchmark counts dense's parameters on each task (whether or not dense is among its
variants) and sizes every other cell's model to within 10% of them, both ways, by the variant's own size
option or the width; the size is recorded in the cell, agreed by a worker that resolves the benchmark again,
and used by every job and the capacity points; a cell that cannot be matched, and every cell of a task where
dense cannot be built, is listed with the reason and not ranked."""

import dataclasses

import optuna
import pandas as pd
from optuna.trial import TrialState
from test_benchmark import add, plan

from analysis.benchmark import page
from common import schema
from experiments import benchmark
from experiments.benchmark import Job, Ledger, parity
from experiments.run.build import build

DEFAULT_SIZES = ["model.depth=1", "task.test_size=32"]  # the profile's width and heads, a small test set


def parameters(config):
    return sum(parameter.numel() for parameter in build(config).model.parameters())


def own_ratio(bench, variant, task):
    """The parameters of the cell's model at its own size (no sizing) over dense's."""
    cell = bench.cell(variant, task)
    own = dataclasses.replace(cell, size=parity.Size())
    config = dataclasses.replace(bench, cells=(own,)).config(Job("tune", variant, task, 0.001, 0))
    return parameters(config) / cell.size.reference


def test_a_model_over_10_percent_larger_or_smaller_than_dense_is_sized_by_its_width_to_within_10_percent(tmp_path):
    bench = plan(tmp_path, variants="dense,lstm,conv", task="passkey", tiny=DEFAULT_SIZES, capacity_scales="none")
    dense = bench.cell("dense", "passkey").size
    assert dense.changes == () and dense.parameters == dense.reference
    assert own_ratio(bench, "lstm", "passkey") > 1.1 and own_ratio(bench, "conv", "passkey") < 0.9
    for variant, narrower in (("lstm", True), ("conv", False)):
        size = bench.cell(variant, "passkey").size
        ((key, width),) = size.changes
        assert key == "model.dim" and (width < 64 if narrower else width > 64) and width % 4 == 0
        assert size.reference == dense.reference and abs(size.parameters / size.reference - 1) <= 0.1
        assert size.unmatched is None
        assert f"sized {variant} on passkey to dense's parameters: model.dim={width}, {size.parameters:,} parameters" \
            in benchmark.command.header(bench, workers=1)
        # every job of the cell trains at the size chosen, with the heads as they were
        for job in Ledger(bench, []).missing():
            if job.variant == variant:
                config = bench.config(job)
                assert (config.model.dim, config.model.heads) == (width, 4)
                assert parameters(config) == size.parameters
        # the capacity points scale from the sized width
        assert sorted(point.value for point in bench.cell(variant, "passkey").capacity) == \
            sorted([width, round(width * 0.5), width * 2])


def test_a_variant_with_its_own_size_option_is_sized_by_it_and_keeps_the_width(tmp_path):
    bench = plan(tmp_path, variants="dense,linformer", task="passkey", tiny=DEFAULT_SIZES)
    size = bench.cell("linformer", "passkey").size
    assert own_ratio(bench, "linformer", "passkey") > 1.1
    ((key, rank),) = size.changes
    assert key == "variant.rank" and rank < 64 and abs(size.ratio - 1) <= 0.1
    config = bench.config(Job("tune", "linformer", "passkey", 0.001, 0))
    assert config.variant_options.rank == rank and config.model.dim == 64


def test_dense_is_counted_though_not_among_the_variants_and_a_worker_resolves_the_same_sizes(tmp_path):
    alone = plan(tmp_path, variants="lstm", task="passkey,mqar", tiny=DEFAULT_SIZES)
    beside = plan(tmp_path, variants="dense,lstm", task="passkey,mqar", tiny=DEFAULT_SIZES)
    for task in ("passkey", "mqar"):
        assert alone.cell("lstm", task).size == beside.cell("lstm", task).size
        assert alone.cell("lstm", task).size.reference == beside.cell("dense", task).size.parameters
    worker = benchmark.rebuild(schema.stored(alone), study_name=alone.study_name, device="cpu",
                               storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1)
    assert [cell.size for cell in worker.cells] == [cell.size for cell in alone.cells]
    assert [cell.capacity for cell in worker.cells] == [cell.capacity for cell in alone.cells]


def settled(bench):
    """The benchmark's tuning (the middle learning rate best) and confirmation, completed."""
    study = optuna.create_study()
    for stage in ("tune", "confirm"):
        for job in Ledger(bench, study.get_trials()).missing():
            assert job.stage == stage
            add(study, job, TrialState.COMPLETE, val=0.9 if job.lr == 0.001 else 0.5, test=0.6 + job.seed / 100)
    return Ledger(bench, study.get_trials())


def test_a_cell_no_size_matches_trains_at_its_own_size_and_is_listed_with_the_reason_but_not_ranked(tmp_path):
    # 64 heads of width 64: the next width in steps of the heads is 0, so the synthesizer cannot be narrowed
    bench = plan(tmp_path, variants="dense,synthesizer", task="passkey", tiny=[*DEFAULT_SIZES, "model.heads=64"],
                 capacity_widths="none", capacity_scales="none")
    size = bench.cell("synthesizer", "passkey").size
    assert size.changes == () and size.ratio > 1.1
    assert size.unmatched == (f"{size.parameters:,} parameters, {size.ratio:.2f}x dense's {size.reference:,}: no "
                              "model.dim brings it within 10%")
    assert bench.config(Job("tune", "synthesizer", "passkey", 0.001, 0)).model.dim == 64
    assert f"not ranked, synthesizer on passkey: {size.unmatched}" in benchmark.command.header(bench, workers=1)
    index, shown = page.write(settled(bench), tmp_path / "reports")
    rows = shown.set_index("variant")
    assert rows.loc["synthesizer", "rank"] == "–" and rows.loc["dense", "rank"] == "1"
    assert rows.loc["synthesizer", "not ranked because"] == (f"not within 10% of dense's parameters on passkey "
                                                             f"({size.unmatched})")
    cells = pd.read_csv(index.parent / "tables" / "cells.csv", keep_default_na=False).set_index("variant")
    assert cells.loc["synthesizer", "parameters not within 10% of dense's"] == size.unmatched
    assert cells.loc["synthesizer", "size"] == "own"
    assert cells.loc["dense", "parameters not within 10% of dense's"] == ""


def test_where_dense_cannot_be_built_every_cell_of_the_task_says_so_and_none_is_ranked(tmp_path, monkeypatch):
    def refusing(config):
        if config.variant == "dense" and config.task == "mqar":
            raise ValueError("Dense refuses mqar here.")
        return build(config)

    monkeypatch.setattr(parity, "build", refusing)
    bench = plan(tmp_path, variants="local,lstm", task="passkey,mqar", tiny=DEFAULT_SIZES, capacity_widths="none",
                 capacity_scales="none")
    reason = "dense's model cannot be built on mqar (Dense refuses mqar here), so no model on it is sized to dense's"
    for variant in ("local", "lstm"):
        assert bench.cell(variant, "mqar").size == parity.Size(unmatched=f"{reason} parameters")
        assert bench.cell(variant, "passkey").size.unmatched is None
    _, shown = page.write(settled(bench), tmp_path / "reports")
    assert list(shown["rank"]) == ["–", "–"]
    assert all(f"on mqar ({reason}" in why for why in shown["not ranked because"])


def test_a_benchmark_stored_before_cells_were_sized_keeps_its_sizes_and_flags_those_outside_10_percent(tmp_path):
    bench = plan(tmp_path, variants="dense,lstm", task="passkey", tiny=DEFAULT_SIZES)
    stored = {key: value for key, value in schema.stored(bench).items() if key != "size_to_dense"}
    older = benchmark.rebuild(stored, study_name=bench.study_name, device="cpu", storage_url=None,
                              runs_dir=tmp_path, heartbeat_seconds=1)
    size = older.cell("lstm", "passkey").size
    assert not older.size_to_dense and size.changes == () and size.ratio > 1.1
    assert "created before cells were sized to dense's, so it trains at its own size" in size.unmatched
    assert "--no-size-to-dense" in schema.command(older) and "--no-size-to-dense" not in schema.command(bench)
