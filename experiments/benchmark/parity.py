"""Parameter parity: every cell's model is sized, before anything runs, to within 10% of the parameters of
dense's model on the same task, both ways (the Long Range Arena compares models of about one size; it flags a
larger one, this sizes each one, smaller ones too).

Dense's parameters are counted on each task whether or not dense is among the benchmark's variants: its model
is built (`experiments.run.build.build`, the one place a run is built; a model is cheap, no data is drawn) from the
task's profile with the user's --set as it reaches dense. A cell whose own model is within 10% keeps it. Any
other is sized by the least change that brings it within 10%: first the variant's own size option where it
declares one (`size_option`: the option that drives its parameters beyond dense's, Linformer's projection
rank), else the model width (model.dim in steps of the number of heads, which stays; model.head_dim with it
where the config fixes one, as the capacity stage widens a model). Parameters grow with either, so the least
change is found by bisection, a handful of models built per cell.

A cell that no size brings within 10%, and every cell of a task on which dense's model cannot be built, trains
at its own size and says why (`Size.unmatched`): the page lists it and does not rank it. The rule never turns
off unsaid. A benchmark stored before cells were sized (`size_to_dense` false) is counted the same way and its
cells outside 10% are unmatched, but none is resized: its jobs keep the sizes they ran with.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import variants
from experiments.benchmark import capacity
from experiments.run import config as configs
from experiments.run.build import build

REFERENCE = "dense"  # the variant whose parameters every cell on a task is sized to
TOLERANCE = 0.10  # a count within 10% of dense's, both ways, is matched
LARGEST_MULTIPLE = 2  # the widest a model is made: this many times its own size (width or option value)

Changes = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Size:
    """A cell's model size against dense's on its task: the `changes` that make it (none: the config's own), its
    parameter count and dense's (`reference`), and `unmatched`: why its count is not within 10% of dense's (it
    then trains at its own size and is not ranked); None where it is."""

    changes: Changes = ()
    parameters: int | None = None
    reference: int | None = None
    unmatched: str | None = None

    @property
    def ratio(self) -> float:
        """Its parameters / dense's (NaN where either is unknown)."""
        return self.parameters / self.reference if self.parameters and self.reference else math.nan

    @property
    def shown(self) -> str:
        """'model.dim=56' or 'variant.rank=19': the size chosen; 'own' where nothing changes."""
        return ", ".join(f"{key}={value}" for key, value in self.changes) or "own"


def count(config: configs.RunConfig) -> int:
    """The parameters of the model `config` builds (on the CPU, the global random state left as it was)."""
    with torch.random.fork_rng(devices=[]):
        return sum(parameter.numel() for parameter in build(config).model.parameters())


def reference(resolve: Callable[[], configs.RunConfig], task: str) -> tuple[int | None, str | None]:
    """Dense's parameters on `task` (`resolve()`: dense's config there), or None and why it cannot be built."""
    try:
        return count(resolve()), None
    except ValueError as reason:
        return None, (f"{REFERENCE}'s model cannot be built on {task} ({str(reason).rstrip('.')}), so no model on it "
                      f"is sized to {REFERENCE}'s parameters")


def within(parameters: int, reference_count: int) -> bool:
    return abs(parameters / reference_count - 1) <= TOLERANCE + 1e-12


def _least(values: list[int], fits: Callable[[int], bool]) -> int | None:
    """The first of `values` (ordered from the least change outward) at which `fits` holds, by bisection: `fits`
    holds from some value on (parameters grow or shrink steadily along `values`); None where it never does."""
    low, high = 0, len(values)
    while low < high:
        middle = (low + high) // 2
        if fits(values[middle]):
            high = middle
        else:
            low = middle + 1
    return values[low] if low < len(values) else None


def _axis(own: int, step: int, floor: int, over: bool) -> list[int]:
    """The values of a size, from the one next to `own` outward: down to `floor` when the model is too large,
    up to LARGEST_MULTIPLE times `own` when it is too small, in steps of `step`."""
    if over:
        return list(range(own - step, floor - 1, -step))
    return list(range(own + step, LARGEST_MULTIPLE * own + 1, step))


def _axes(config: configs.RunConfig, over: bool) -> list[tuple[str, list[int], Callable[[int], Changes]]]:
    """The sizes to try, in order: the variant's own size option (where it declares one and holds a number),
    then the width."""
    axes = []
    option = variants.variant_class(config.variant).size_option
    value = getattr(config.variant_options, option) if option is not None else None
    if isinstance(value, int) and not isinstance(value, bool):
        axes.append((f"variant.{option}", _axis(value, 1, 1, over), lambda chosen: ((f"variant.{option}", chosen),)))
    model = config.model
    axes.append(("model.dim", _axis(model.dim, model.heads, model.heads, over),
                 lambda chosen: capacity.width_changes(model, chosen / model.dim)))
    return axes


def sized(resolve: Callable[[Changes], configs.RunConfig], reference_count: int | None, unbuilt: str | None, *,
          adjust: bool) -> Size:
    """The size of the cell whose config `resolve(changes)` gives, against dense's count `reference_count` (None:
    `unbuilt` says why): its own where within 10%, else the least change that is (`adjust`: else none is tried)."""
    if reference_count is None:
        return Size(unmatched=unbuilt)
    config = resolve(())
    own = count(config)
    if within(own, reference_count):
        return Size((), own, reference_count)
    counts: dict[Changes, int | None] = {}

    def counted(changes: Changes) -> int | None:
        if changes not in counts:
            try:
                counts[changes] = count(resolve(changes))
            except ValueError:  # the variant or the model refuses this size: it does not fit
                counts[changes] = None
        return counts[changes]

    over = own > reference_count
    tried = []
    for name, values, changes_at in _axes(config, over) if adjust else []:
        def fits(value: int, changes_at=changes_at) -> bool:
            parameters = counted(changes_at(value))
            return parameters is not None and (parameters <= (1 + TOLERANCE) * reference_count if over
                                               else parameters >= (1 - TOLERANCE) * reference_count)

        chosen = _least(values, fits)
        found = counted(changes_at(chosen)) if chosen is not None else None
        if found is not None and within(found, reference_count):
            return Size(changes_at(chosen), found, reference_count)
        tried.append(name)
    why = (f"no {' nor '.join(tried)} brings it within {TOLERANCE:.0%}" if tried else
           "this benchmark was created before cells were sized to dense's, so it trains at its own size")
    return Size((), own, reference_count, f"{own:,} parameters, {own / reference_count:.2f}x {REFERENCE}'s "
                                          f"{reference_count:,}: {why}")
