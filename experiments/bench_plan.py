"""Where bench-variants measures each contender: the points (length, causality, batch, head_dim) of its three
sweeps (see `experiments.bench`), each point tagged with the sweeps that measure it there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from experiments import bench_fits

if TYPE_CHECKING:
    from experiments.bench import Contender


@dataclass(frozen=True, order=True)
class Point:
    """Where contenders are measured together: one set of q, k, v of (batch, heads, seq_len, head_dim)."""

    head_dim: int
    seq_len: int
    batch: int
    causal: bool


Plan = dict[Point, dict[int, list[str]]]  # point -> {index in the field: the sweeps measuring it there}


def plan(field: list[Contender], *, lengths: list[int], causal_modes: list[bool], batch: int, heads: int,
         head_dim: int, dims: list[int], dim_length: int, step_lengths: list[int]) -> Plan:
    """Every contender's points in the three sweeps (`experiments.bench` describes them), in the order they
    are measured: by head_dim, then length, so that each sweep reaches its larger points after its smaller ones."""
    entries: Plan = {}

    def add(point: Point, index: int, sweep: str) -> None:
        tags = entries.setdefault(point, {}).setdefault(index, [])
        if sweep not in tags:
            tags.append(sweep)

    for index, contender in enumerate(field):
        modes = causal_modes if contender.supports_causal else sorted({*causal_modes, False})
        for causal in modes:
            for length in lengths:
                add(Point(head_dim, length, batch, causal), index, "length")
            if not contender.swept:
                continue
            for dim in dims:
                add(Point(dim // heads, dim_length, batch, causal), index, "dim")
            power = bench_fits.work_exponent(contender.name, contender.family)
            for length in step_lengths:
                grown = batch * max(1, round((max(step_lengths) / length) ** power))
                add(Point(head_dim, length, grown, causal), index, "steps")
    return {point: {index: sorted(tags, key=bench_fits.SWEEPS.index) for index, tags in measured.items()}
            for point, measured in sorted(entries.items())}


def axis(sweep: str, point: Point) -> int:
    """The variable a sweep grows: head_dim against d, the length otherwise."""
    return point.head_dim if sweep == "dim" else point.seq_len


# How fast a call may grow in its sweep's variable: n^2 d and n d^2 at worst, and at fixed total work no
# faster than the number of sequential steps, n.
GROWTH = {"length": 2, "dim": 2, "steps": 1}
