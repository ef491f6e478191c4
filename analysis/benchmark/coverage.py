"""How much of its task's pairs a layout cell of the benchmark attends, and the rule that follows: a cell whose layout
attends more than half of them is no sparse contender there, so the page says so in place of its accuracy and
neither ranks nor compares it (`analysis.benchmark.page`).
"""

from __future__ import annotations

import math

import pandas as pd

import variants
from analysis.benchmark.stages import cell_config
from experiments import tasks
from experiments.benchmark.ledger import CellState, Ledger

# A cell of a layout variant whose layout attends more than this fraction of its task's pairs is no sparse contender
# there (BigBird's blocks of 16 with a global and two random blocks cover every key up to 80 positions: it compares
# dense with dense), so it is neither ranked nor compared.
DENSE_COVERAGE = 0.5
DENSE_RULE = ("A cell of a layout variant (a local window, a sparse pattern) states the share of its task's pairs its "
              "layout attends at the task's length (causal: of the pairs j <= i), and one that attends more than "
              f"{DENSE_COVERAGE:.0%} of them is no sparse contender there: it says so in place of its accuracy "
              "('computes dense' where it attends every pair, 'near dense' otherwise) and is left out of the average, "
              "the ranks and the verdicts.")


def layout_coverage(ledger: Ledger, state: CellState) -> dict[str, float]:
    """A cell's sequence length as its model's blocks see it (the task's seq_len, a pair's towers apart) and the
    fraction of its pairs the variant's layout attends there (`variants.coverage`, causal where the model is: of the
    pairs j <= i), averaged over the model's blocks and heads as its confirmation run builds them; NaN where the cell
    is skipped or the variant has no layout."""
    config = cell_config(ledger, state)
    if config is None:
        return {"length": math.nan, "coverage": math.nan}
    length = config.task_options.seq_len // tasks.task_class(config.task).towers
    found = variants.coverage(config.variant, length, causal=config.model.causal, num_heads=config.model.heads,
                              head_dim=config.model.attention_head_dim, layers=config.model.depth,
                              run_seed=config.seed, options=config.variant_options)
    return {"length": float(length), "coverage": math.nan if found is None else found}


def computes_dense(cells: pd.DataFrame) -> pd.Series:
    """Per cell, whether its layout attends more than DENSE_COVERAGE of its pairs (False where it has no layout)."""
    return cells["coverage"] > DENSE_COVERAGE


def coverage_text(row: pd.Series) -> str:
    """'attends 46% of the causal pairs at length 64' (of the pairs, where the cell's model is bidirectional)."""
    pairs = "causal pairs" if row["causal"] else "pairs"
    return f"attends {row['coverage']:.0%} of the {pairs} at length {int(row['length'])}"
