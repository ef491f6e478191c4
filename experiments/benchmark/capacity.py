"""The benchmark's capacity stage: each cell trained again at other model widths and, on a task that declares
a capacity option (`Task.capacity_option`: MQAR's key-value pairs, the tokens selective copying copies,
Pathfinder's distractor paths), at other values of it. Accuracy against width and against that count is
then a curve per variant (as in Zoology's accuracy against d_model for MQAR), where one number per cell is
a ceiling that two variants may both reach.

A point is the cell's model or task with one setting scaled by a multiple of the cell's own value, rounded:
the width (model.dim; model.head_dim with it where the config fixes one, so that the heads widen alike; the
number of heads stays), or the capacity option. Every point is resolved before anything runs, like a cell:
one that cannot be built (a width the heads do not divide, more pairs than the sequence holds, a task size
whose held-out sets cannot be drawn) is kept as skipped with the reason, never dropped. The cell's own point
(multiple 1) is its confirmation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from experiments import tasks
from experiments.run import config as configs

WIDTH = "width"  # the axis of model width; the other axis is named by the task's capacity option


@dataclass(frozen=True)
class Point:
    """One size of a cell on one capacity axis: `value` is the width (model.dim) or the capacity option's
    value, `changes` the settings that make it (none for the cell's own point), `skipped` why it cannot run."""

    axis: str
    multiple: float
    value: int
    changes: tuple[tuple[str, Any], ...] = ()
    skipped: str | None = None

    @property
    def own(self) -> bool:
        """Whether this is the cell's own size, which its confirmation runs train."""
        return not self.changes


def changed(overrides: dict[str, dict[str, Any]], changes: tuple[tuple[str, Any], ...]) -> dict[str, dict[str, Any]]:
    """`overrides` (section -> field -> value) with `changes` (('model.dim', 128), ...) set on top."""
    result = {section: dict(values) for section, values in overrides.items()}
    for key, value in changes:
        section, name = key.split(".")
        result[section][name] = value
    return result


def width_changes(model: configs.ModelConfig, multiple: float) -> tuple[tuple[str, Any], ...]:
    """The settings that make `model` `multiple` times as wide: model.dim, and model.head_dim with it where the
    config fixes one (the number of heads stays)."""
    widths = (("model.dim", round(model.dim * multiple)),)
    return widths + ((("model.head_dim", round(model.head_dim * multiple)),) if model.head_dim is not None else ())


def points(config: configs.RunConfig, widths: tuple[float, ...], scales: tuple[float, ...],
           resolve: Callable[[tuple[tuple[str, Any], ...]], Any]) -> tuple[Point, ...]:
    """The capacity points of the cell whose config is `config`: on each axis asked for (widths; scales, where
    the task declares a capacity option), the cell's own point, then one per multiple, each checked by
    `resolve(changes)` (the cell's config with those changes, or an OptionError)."""
    option = tasks.task_class(config.task).capacity_option
    axes = [(WIDTH, config.model.dim, widths, lambda multiple: width_changes(config.model, multiple))]
    if option is not None:
        axes.append((option, getattr(config.task_options, option), scales,
                     lambda multiple: ((f"task.{option}", round(getattr(config.task_options, option) * multiple)),)))
    found: list[Point] = []
    for axis, own, multiples, changes_at in axes:
        if not multiples:
            continue
        found.append(Point(axis, 1.0, own))
        for multiple in multiples:
            changes = changes_at(multiple)
            value = changes[0][1]
            if value in {point.value for point in found if point.axis == axis}:
                found.append(Point(axis, multiple, value, changes, f"{axis} {own} x{multiple:g} rounds to {value}, "
                                                                   "a size the cell already trains at"))
                continue
            try:
                resolve(changes)
            except ValueError as reason:  # the task, the model or the variant refuses this size
                found.append(Point(axis, multiple, value, changes, str(reason)))
                continue
            found.append(Point(axis, multiple, value, changes))
    return tuple(found)
