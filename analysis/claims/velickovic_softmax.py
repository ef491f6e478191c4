"""Velickovic et al. 2024 (softmax is not enough): trained to pick the maximum of 16 items, every softmax of a fixed
temperature disperses as the item count grows at test time, in its largest weight and in its accuracy."""

from __future__ import annotations

import math

from analysis.claims.base import Claim, Results, Runs, Verdict, estimate, paired, shown, sign
from analysis.claims.mamba_induction_length import at_length
from analysis.claims.registry import register_claim
from experiments.claims.parts import LONG_TEST, LONG_TEST_WHY

PART, TASK = "max_retrieval", "max_retrieval"
TRAINED = 16  # items at the quick profile's training length, seq_len 17 (the items, then the query)
ITEMS = (32, 64, 128, 256, 512, 1024)
FIXED = ("dense", "unscaled", "temperature:learnable=true", "additive")  # one temperature at every item count
SCALED = "ssmax"  # its logits grow with log n: a temperature that falls as the items grow
LEARNED = 0.10  # a variant must be clearly above chance at 16 items, by more than this, for its fall to be read
WEIGHT = "scored_max_weight"  # the largest weight of the query's row (`experiments.run.attention_stats`)


def figures(results: Results, variant: str, figure: str) -> dict[int, dict[int, float]]:
    """items -> seed -> the figure at that item count (the training count included)."""
    return {items: results.figure(PART, variant, TASK, at_length(items + 1, figure)) for items in (TRAINED, *ITEMS)}


def fall(by_items: dict[int, dict[int, float]]) -> dict[int, float]:
    """seed -> the figure at the most items less the figure at the training count."""
    first, last = by_items[TRAINED], by_items[ITEMS[-1]]
    return {seed: last[seed] - first[seed] for seed in sorted(set(first) & set(last))}


@register_claim("velickovic_softmax")
class VelickovicSoftmax(Claim):
    """Max retrieval: a fixed-temperature softmax, sharp at 16 items, disperses at more (Velickovic et al. 2024)."""

    source = ("Velickovic, Perivolaropoulos, Barbero and Pascanu 2024, \"softmax is not enough (for sharp "
              "out-of-distribution)\", arXiv 2410.01104, section 2 and Figure 2")
    claimed = ("a head trained to pick the maximum of 16 items attends sharply to it at 16 and disperses towards "
               "uniform as the item count grows at test time, and any softmax with a fixed temperature over bounded "
               "logits must disperse so; they propose adaptive temperature, an entropy-driven sharpening at "
               "inference, as an ad-hoc fix")
    read = "Figure 2 (the head's coefficients at growing set sizes, read qualitatively) and the theorem beside it"
    their_setting = ("one attention head between deep MLPs, items given by their features, trained on sets of 16 "
                     "items and read on larger sets")
    our_setting = (f"the quick profile's max_retrieval (one token per item naming its priority, of 8 levels, and its "
                   f"class, of 8; the query `?` last; trained at {TRAINED} items, evaluated at "
                   f"{', '.join(map(str, ITEMS))}); one causal layer of one head, width 64, no positions, at the "
                   "task's learning rate (the paper's budget is not restated here); accuracy and the largest weight "
                   "of the query's row "
                   f"(train.attention_stats) of {', '.join(FIXED)} (a temperature fixed at test time, learned or not) "
                   f"and {SCALED} (logits times s log n)")
    rule = (f"for each of {', '.join(FIXED)}: undecided unless its accuracy at {TRAINED} items lies above chance + "
            f"{LEARNED:g} (the lower end of its interval); then its accuracy and its largest weight each fall from "
            f"{TRAINED} to {ITEMS[-1]:,} items where the paired difference ({ITEMS[-1]:,} less {TRAINED}) has its "
            "interval below 0 (yes), rise where it lies above 0 (no), and are undecided where it holds 0. "
            "Reproduced when every check is yes, not reproduced when one is no, inconclusive otherwise. Per the "
            "paper a learned temperature is still one temperature per head at test time and disperses as dense "
            "does; SSMax, whose logits grow with log n as the paper's adaptive temperature sharpens with the "
            "entropy, is expected to keep more of its largest "
            f"weight: its fall less dense's is shown beside the rule, not part of it")
    effect = 0.2
    effect_why = ("the paper reports no accuracy: its Figure 2 shows the maximum's coefficient, near 1 at 16 items, "
                  "spread over the set by its largest sizes; a fall of 0.2 in accuracy (over 8 classes) is the "
                  "smallest read as that dispersion reaching the answer")
    budget_why = ("the task's quick budget: the rule reads the fall from a model that has learned the trained size, "
                  f"so each variant trains to its plateau there; its evaluations of up to {ITEMS[-1] + 1:,} tokens "
                  f"are most of its cost: {LONG_TEST_WHY}")
    runs = (Runs(PART, (*FIXED, SCALED), (TASK,), sets=(
        f"task.eval_lengths={','.join(str(items + 1) for items in ITEMS)}", "train.attention_stats=true", LONG_TEST)),)

    def verdict(self, results: Results) -> Verdict:
        size = results.test_size(PART, TASK)
        accuracy = {variant: figures(results, variant, "accuracy") for variant in (*FIXED, SCALED)}
        weight = {variant: figures(results, variant, WEIGHT) for variant in (*FIXED, SCALED)}
        checks, lines = {}, []
        for variant in FIXED:
            trained = estimate(accuracy[variant][TRAINED])
            learned = None if not trained.values else trained.low > results.chance(PART, variant, TASK) + LEARNED
            for what, by_items, test_size in (("accuracy", accuracy, size), ("largest weight", weight, math.inf)):
                difference = paired(by_items[variant][ITEMS[-1]], by_items[variant][TRAINED], test_size)
                checks[f"{variant} {what} falls"] = None if not learned or sign(difference) in (None, 0) \
                    else sign(difference) < 0
                lines.append(f"{variant} {what} " + ", ".join(
                    f"{items} {estimate(by_items[variant][items])}" for items in (TRAINED, *ITEMS))
                    + f"; {ITEMS[-1]} - {TRAINED} {shown(difference)}")
        lines.append(f"{SCALED} accuracy " + ", ".join(f"{items} {estimate(accuracy[SCALED][items])}"
                                                       for items in (TRAINED, ITEMS[-1]))
                     + "; largest weight " + ", ".join(f"{items} {estimate(weight[SCALED][items])}"
                                                         for items in (TRAINED, ITEMS[-1])))
        kept = paired(fall(weight[SCALED]), fall(weight["dense"]), math.inf)
        lines.append(f"fall of the largest weight, {SCALED} - dense {shown(kept)}")
        return self.ruled(checks, "; ".join(lines),
                          self.power(accuracy["dense"][ITEMS[-1]], accuracy["dense"][TRAINED]))
