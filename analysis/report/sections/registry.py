"""The registry of report sections: `@section(key, title)` adds a builder `Context -> list[Block]`; the
report shows `SECTIONS` in the order they were registered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analysis.report.context import Context
from analysis.report.render import Block


@dataclass(frozen=True)
class SectionBuilder:
    key: str
    title: str
    build: Callable[[Context], list[Block]]


SECTIONS: list[SectionBuilder] = []


def section(key: str, title: str) -> Callable[[Callable[[Context], list[Block]]], Callable[[Context], list[Block]]]:
    """Register a section builder; sections appear in the order they are registered. A key registered
    twice is an error."""
    def register(build: Callable[[Context], list[Block]]) -> Callable[[Context], list[Block]]:
        if any(existing.key == key for existing in SECTIONS):
            raise ValueError(f"Report section {key!r} is already registered; accepted: a new key.")
        SECTIONS.append(SectionBuilder(key, title, build))
        return build
    return register
