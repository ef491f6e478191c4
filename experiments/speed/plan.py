"""Where `attnlab speed` times each contender: the cases (length, causality, batch, head_dim) of its three
sweeps (see `experiments.speed.kernels`), each case tagged with the sweeps that measure it there."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from experiments.speed import fits

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]
Build = Callable[[int | None, int], Attend]  # (max_len, head_dim) -> the contender at those sizes


@dataclass(frozen=True)
class Contender:
    variant: str  # self-describing name, or the baseline's name
    kernel: str
    build: Build
    sizes: tuple[int | None, int]  # the (max_len, head_dim) that `attend` is built at
    name: str = ""  # the registered name (the claims of `fits.CLAIMS` are keyed by it)
    family: str = "dense"
    supports_causal: bool = True
    swept: bool = False  # also measured against d and at fixed work: the kernel auto picks, or a mixer

    @functools.cached_property
    def attend(self) -> Attend:
        """The contender at the sizes it was listed with."""
        return self.build(*self.sizes)


@dataclass(frozen=True, order=True)
class TimedCase:
    """One case the contenders are timed at together: q, k, v of (batch, heads, seq_len, head_dim), causal or not.
    (Not `experiments.benchmark.capacity.Point`, a capacity point of a benchmark cell.)"""

    head_dim: int
    seq_len: int
    batch: int
    causal: bool


Plan = dict[TimedCase, dict[int, list[str]]]  # case -> {index in the field: the sweeps measuring it there}


def plan(field: list[Contender], *, lengths: list[int], causal_modes: list[bool], batch: int, heads: int,
         head_dim: int, dims: list[int], dim_length: int, step_lengths: list[int]) -> Plan:
    """Every contender's cases in the three sweeps (`experiments.speed.kernels` describes them), in the order they
    are measured: by head_dim, then length, so that each sweep reaches its larger cases after its smaller ones."""
    entries: Plan = {}

    def add(case: TimedCase, index: int, sweep: str) -> None:
        tags = entries.setdefault(case, {}).setdefault(index, [])
        if sweep not in tags:
            tags.append(sweep)

    for index, contender in enumerate(field):
        modes = causal_modes if contender.supports_causal else sorted({*causal_modes, False})
        for causal in modes:
            for length in lengths:
                add(TimedCase(head_dim, length, batch, causal), index, "length")
            if not contender.swept:
                continue
            for dim in dims:
                add(TimedCase(dim // heads, dim_length, batch, causal), index, "dim")
            power = fits.work_exponent(contender.name, contender.family)
            for length in step_lengths:
                grown = batch * max(1, round((max(step_lengths) / length) ** power))
                add(TimedCase(head_dim, length, grown, causal), index, "steps")
    return {case: {index: sorted(tags, key=fits.SWEEPS.index) for index, tags in measured.items()}
            for case, measured in sorted(entries.items())}


def axis(sweep: str, case: TimedCase) -> int:
    """The variable a sweep grows: head_dim against d, the length otherwise."""
    return case.head_dim if sweep == "dim" else case.seq_len


# How fast a call may grow in its sweep's variable: n^2 d and n d^2 at worst, and at fixed total work no
# faster than the number of sequential steps, n.
GROWTH = {"length": 2, "dim": 2, "steps": 1}
