"""Where a hyperparameter sweep looks for each option of a variant (`Attention.search_space`): a `Range` or a
`Choice`, declared next to the code the options control."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Bound = int | float | str  # a number, or "seq_len", "head_dim", "steps", optionally "*k" or "/k" (k an integer)


@dataclass(frozen=True)
class Range:
    """A sweep searches the option from `low` to `high`, uniformly or log-uniformly; integers when the
    option is an integer. A bound may name a size of the run (`"seq_len"`, `"head_dim"`, `"steps"`,
    scaled as in `"steps/5"` or `"head_dim*4"`), resolved when the sweep starts. `when=("pattern",
    ("strided", "fixed"))`: searched only when the option `pattern`, declared before it, takes one of
    those values (otherwise the option keeps its default)."""

    low: Bound
    high: Bound
    log: bool = False
    when: tuple[str, tuple[Any, ...]] | None = None


@dataclass(frozen=True)
class Choice:
    """A sweep picks one of `choices` for the option (`when` as for `Range`)."""

    choices: tuple[Any, ...]
    when: tuple[str, tuple[Any, ...]] | None = None
