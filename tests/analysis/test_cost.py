"""The cost section from small synthetic speed CSVs (`attnlab speed`): every family drawn against length, the sweeps
against width and at fixed work, the complexity table with its disagreements, and an older CSV without them."""

import pandas as pd
import pytest

from analysis.report import figures
from analysis.report.context import Context, read_speed
from analysis.report.render import Figure, Table, Text
from analysis.report.sections.cost import cost
from analysis.runs import load_runs

BASE = {"heads": 4, "dtype": "float32", "device": "cpu", "status": "ok", "peak_mib": 10.0}
LENGTHS = (256, 512, 1024, 2048)


def rows_of(variant, name, family, kernel, *, a, b=None, s=None, causal=True):
    """Time n^a against length (head_dim 64), d^b against width at n = 1024 and, at fixed work, n^s."""
    row = {**BASE, "variant": variant, "name": name, "family": family, "kernel": kernel, "causal": causal}
    rows = [{**row, "sweep": "length", "seq_len": n, "batch": 1, "head_dim": 64, "ms": 1e-3 * n**a,
             "peak_mib": 1e-2 * n} for n in LENGTHS]
    if b is not None:
        rows += [{**row, "sweep": "dim", "seq_len": 1024, "batch": 1, "head_dim": dim // 4, "ms": 1e-3 * dim**b}
                 for dim in (128, 512, 1024)]
    if s is not None:
        power = 2 if name == "dense" else 1
        rows += [{**row, "sweep": "steps", "seq_len": n, "batch": (2048 // n) ** power, "head_dim": 64,
                  "ms": 1e-2 * n**s} for n in (512, 1024, 2048)]
    return rows


def blocks_from(tmp_path, rows):
    speed_dir = tmp_path / "runs" / "speed"
    speed_dir.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(speed_dir / "variants-20260101-000000.csv", index=False)
    speed, files, _ = read_speed(speed_dir)
    context = Context(runs_dir=tmp_path / "runs", runs=load_runs(tmp_path / "runs"), skipped=[], studies=[],
                      speed=speed, speed_files=files, filters={})
    with figures.style():
        blocks = cost(context)
    return ({block.name: block for block in blocks if isinstance(block, Table | Figure)},
            [block.text for block in blocks if isinstance(block, Text)])


def every_family():
    skipped = [{**BASE, "variant": "linformer_k64", "name": "linformer", "family": "low-rank", "kernel": "auto=lowrank",
                "causal": True, "sweep": "length", "seq_len": n, "batch": 1, "head_dim": 64, "ms": None,
                "peak_mib": None, "status": "skipped: bidirectional in its paper (supports_causal = False); measured "
                                            "non-causal only"} for n in LENGTHS]
    return (rows_of("dense", "dense", "dense", "auto=sdpa", a=2.0, b=1.0, s=0.0)
            + rows_of("linear_phielu", "linear", "kernelised", "auto=linear", a=1.0, b=2.0, s=0.0)
            + rows_of("linformer_k64", "linformer", "low-rank", "auto=lowrank", a=1.0, causal=False) + skipped
            + rows_of("local_w256", "local", "local", "auto=blocked", a=1.0)
            + rows_of("sparse_strided", "sparse", "sparse", "auto=blocked", a=1.5)
            + rows_of("lstm", "lstm", "baseline", "torch", a=1.0, b=1.2, s=1.0))


def test_every_family_is_drawn_against_length_with_its_exponent_from_the_length_sweep_only(tmp_path):
    tables, _ = blocks_from(tmp_path, every_family())
    assert {"cost-00-bidirectional-cpu", "cost-01-causal-cpu", "cost-width-00-causal-cpu"} <= set(tables)
    exponents = tables["cost-exponents"].frame.set_index("variant")
    assert exponents["family"].to_dict() == {
        "dense": "dense", "linear_phielu": "kernelised", "linformer_k64": "low-rank", "local_w256": "local",
        "sparse_strided": "sparse", "lstm": "baseline"}
    # The width and fixed-work rows (other head_dims and batches) stay out of the lines against length.
    assert exponents["time_exponent"].to_dict() == pytest.approx(
        {"dense": 2.0, "linear_phielu": 1.0, "linformer_k64": 1.0, "local_w256": 1.0, "sparse_strided": 1.5,
         "lstm": 1.0})
    skipped = tables["cost-skipped"].frame
    assert set(skipped["variant"]) == {"linformer_k64"} and skipped["causal"].all()
    assert skipped["status"].str.startswith("skipped: bidirectional in its paper").all()


def test_the_complexity_table_shows_claimed_beside_measured_and_says_where_they_disagree(tmp_path):
    tables, texts = blocks_from(tmp_path, every_family())
    complexity = tables["cost-complexity"].frame.set_index("variant")
    assert list(complexity.index) == ["dense", "linear_phielu", "lstm"]  # the rows measured against d
    assert complexity["claimed O(...)"].to_dict() == {"dense": "O(n^2 d)", "linear_phielu": "O(n d^2)",
                                                      "lstm": "O(n d^2)"}
    assert complexity["measured n^a d^b"].to_dict() == {"dense": "n^2.00 d^1.00", "linear_phielu": "n^1.00 d^2.00",
                                                        "lstm": "n^1.00 d^1.20"}
    assert complexity["claimed sequential steps"].to_dict() == {"dense": "O(1)", "linear_phielu": "O(1)",
                                                                "lstm": "O(n)"}
    assert complexity["time ∝ n^s at fixed work: s"].to_dict() == pytest.approx(
        {"dense": 0.0, "linear_phielu": 0.0, "lstm": 1.0}, abs=1e-9)
    assert "lstm (torch, causal, cpu): time grows as d^1.20 over d = 128-1024, not d^2 as O(n d^2) claims." in texts


def test_a_csv_written_before_the_sweeps_still_draws_its_lines_without_a_complexity_table(tmp_path):
    old_columns = ["variant", "kernel", "seq_len", "causal", "device", "batch", "heads", "head_dim", "dtype", "status",
                   "ms", "peak_mib"]
    rows = [{column: row[column] for column in old_columns}
            for row in rows_of("dense", "dense", "dense", "auto=sdpa", a=2.0)]
    tables, _ = blocks_from(tmp_path, rows)
    assert "cost-complexity" not in tables and not any(name.startswith("cost-width") for name in tables)
    exponents = tables["cost-exponents"].frame
    assert exponents["family"].tolist() == ["not recorded"]
    assert exponents["time_exponent"].tolist() == pytest.approx([2.0])
