"""The report's sections, in order: each is one function `Context -> list[Block]`, registered with `@section`
(`analysis.report.sections.registry`), one module per section.

A new section is one decorated function (in any module imported before the report is built):

    @section("saturation", "Softmax saturation")
    def saturation(context: Context) -> list[Block]:
        ...
        return [Text("..."), Table(...), Figure(...)]

Builders read runs only through the context, draw with `analysis.report.figures` (the shared palette and
style) and return plain text and DataFrames: the renderer escapes everything.
"""

from analysis.report.sections.registry import SECTIONS, SectionBuilder, section

# Importing a section module registers it: the report shows the sections in this order.
# isort: off
from analysis.report.sections import results, lra, distance, curves, attention, cost, saturation, sweeps, provenance  # noqa: E402,F401
# isort: on

__all__ = ["SECTIONS", "SectionBuilder", "section"]
