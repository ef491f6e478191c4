"""Poli et al. 2024 (MAD): with attention in the model, in-context recall, noisy recall and selective copying are
solved while fuzzy recall and compression stay far from it, so the suite still tells models apart at small scale."""

from __future__ import annotations

from analysis.claims.base import Claim, Estimate, Results, Verdict, paired, shown, sign
from analysis.claims.grid import best_on_validation
from analysis.claims.registry import register_claim
from experiments.claims.parts import SweptRuns
from experiments.tasks import TASK_SETS
from experiments.tasks.mad import QUICK_PROFILE

LEARNING_RATES = (1e-4, 5e-4, 1e-3)  # make_benchmark_mad_configs' grid (athms/mad-lab, mad/configs.py)
# MAD's grid crosses these learning rates with weight decays 0 and 0.1; the claims' 90 minutes hold one of them: 0.1,
# AdamW's usual, fixed before the runs (`budget_why`).
WEIGHT_DECAYS = (0.1,)
BUDGET = 500  # steps per run (`budget_why`)
SOLVED_TASKS = ("in_context_recall", "noisy_in_context_recall", "selective_copy")
UNSOLVED_TASKS = ("fuzzy_in_context_recall", "compression")
RECALL_TASKS = ("in_context_recall", "noisy_in_context_recall")
SOLVED = 0.9  # a task is solved where the lower end of its score's interval is at least this; unsolved: the upper end
# What each variant trains, at each task's quick profile (one level, its quick baseline), to keep the claim within the
# claims' CPU budget: dense on the five tasks the rule reads (memorization, storage in weights, is left out), local on
# the two recall tasks where the rule compares them.
TASKS = {"dense": tuple(task for task in TASK_SETS["mad"] if task in SOLVED_TASKS + UNSOLVED_TASKS),
         "local": RECALL_TASKS}
PARTS = {variant: tuple(f"{variant}_weight_decay_{decay:g}" for decay in WEIGHT_DECAYS) for variant in TASKS}


@register_claim("mad")
class MADScore(Claim):
    """MAD's score per variant over its six tasks: solved recall and copying, unsolved fuzzy recall and compression."""

    source = "Poli et al. 2024, \"Mechanistic Design and Scaling of Hybrid Architectures\" (MAD), athms/mad-lab"
    claimed = ("models with attention layers (MAD's striped Hyena hybrids) score about 1.00 on in-context recall, "
               "noisy in-context recall and selective copying, but only 0.23-0.28 on fuzzy recall and 0.47-0.52 on "
               "compression (memorization 0.89-0.90); Hyena without attention 0.82, 0.79, 0.93, 0.08 and 0.45")
    read = ("read from the figure of MAD's score against perplexity at scale (athms/mad-lab assets/mad_to_scale.png), "
            "to about ±0.01 on its axes; no table of per-task accuracies for multi-head attention alone was found to "
            "read, and that figure holds no model of attention alone: its five models are Hyena, multi-head Hyena and "
            "three striped hybrids of Hyena and attention")
    their_setting = ("each task at its baseline and its ladder of difficulty (vocabulary 32-128, sequences "
                     "128-1,024 (compression 32-256), 6,400 down to 800 training examples, noise fraction 0.4-0.8, "
                     "32-96 tokens to copy; memorization vocabulary 512-8,192), 2 blocks of width 128 (SwiGLU, rotary "
                     "positions), AdamW for 200 epochs with a cosine to 1e-6; each level swept over learning rates "
                     "1e-4, 5e-4, 1e-3 and weight decays 0, 0.1, the best run of the sweep chosen by its TEST "
                     "accuracy; a task's score is that accuracy averaged over its levels; one seed")
    our_setting = ("each task at its quick profile only, one level: the quick baseline (sequences of 32-64 "
                   "tokens, vocabularies of 16-64, fresh examples every batch, where MAD trains a fixed set), 2 layers "
                   "of width 64 (attnlab's Transformer: GELU MLP, learned positions); MAD's learning rates 1e-4, "
                   "5e-4, 1e-3 (0.1, 0.5 and 1 x the quick profile's 1e-3) at weight decay 0.1 only (MAD also sweeps "
                   "0), screened on two seeds over a quarter of the budget; the learning rate is chosen by VALIDATION "
                   "accuracy, never on the test set as MAD chooses, and its test accuracy is read over the fresh "
                   "seeds; dense on the five tasks the rule reads (memorization "
                   "left out), local attention (a window of 32) on the two recall tasks only, standing in for a layer "
                   "that cannot see every key (MAD's figure has Hyena there), so local's score covers those two; "
                   "MAD's ladder at the mad profile is not trained by default: docs/mad.md gives its cost")
    rule = (f"a variant's score on a task is the test accuracy at the grid point chosen on validation; reproduced "
            f"when dense solves {', '.join(SOLVED_TASKS)} (the lower end of its interval at least {SOLVED:g}), leaves "
            f"{' and '.join(UNSOLVED_TASKS)} unsolved (the upper end below {SOLVED:g}), and lies above local on "
            f"{' and '.join(RECALL_TASKS)} by a paired difference whose 95% interval lies above 0; not reproduced "
            "when one of these fails throughout; inconclusive otherwise")
    effect = 0.18
    effect_why = ("MAD's figure reads 1.00 on in-context recall with attention in the model against 0.82 for Hyena "
                  "alone, the layer that cannot see every key that local attention stands in for here")
    budget_why = (f"{BUDGET:,} steps, fewer than the quick profile's, "
                  "and one weight decay of MAD's two: in the earlier record "
                  "dense was close to solving the recall tasks by then, and a screen of three learning rates on seven "
                  "cells is among the costliest of the claims; what their 90 minutes allow")
    runs = tuple(SweptRuns(part, (variant,), TASKS[variant], sets=(f"train.weight_decay={decay:g}",), steps=BUDGET,
                           lr_multiples=tuple(rate / QUICK_PROFILE.train["lr"] for rate in LEARNING_RATES))
                 for variant in TASKS for part, decay in zip(PARTS[variant], WEIGHT_DECAYS, strict=True))

    def verdict(self, results: Results) -> Verdict:
        chosen = {(variant, task): best_on_validation(results, PARTS[variant], variant, task)
                  for variant, tasks in TASKS.items() for task in tasks}
        dense = {task: chosen["dense", task][1] for task in TASKS["dense"]}
        differences = {task: paired(results.test(chosen["dense", task][0], "dense", task),
                                    results.test(chosen["local", task][0], "local", task),
                                    results.test_size(chosen["dense", task][0], task)) for task in RECALL_TASKS}
        checks = {**{f"dense solves {task}": None if _side(dense[task]) in (None, 0) else _side(dense[task]) > 0
                     for task in SOLVED_TASKS},
                  **{f"dense leaves {task} unsolved": None if _side(dense[task]) in (None, 0) else
                     _side(dense[task]) < 0 for task in UNSOLVED_TASKS},
                  **{f"dense above local on {task}": None if sign(difference) in (None, 0) else sign(difference) > 0
                     for task, difference in differences.items()}}
        ours = "; ".join([*(f"{variant}: MAD score {_score(chosen, variant)} ("
                            + ", ".join(f"{task} {_at(*chosen[variant, task])}" for task in tasks) + ")"
                            for variant, tasks in TASKS.items()),
                          *(f"dense - local on {task} {shown(difference)}"
                            for task, difference in differences.items())])
        decisive = chosen["dense", RECALL_TASKS[0]][0], chosen["local", RECALL_TASKS[0]][0]
        return self.ruled(checks, ours, self.power(results.test(decisive[0], "dense", RECALL_TASKS[0]),
                                                   results.test(decisive[1], "local", RECALL_TASKS[0])))


def _side(score: Estimate) -> int | None:
    """+1 where a score's interval lies at or above SOLVED, -1 where it lies below, 0 where it holds SOLVED; None below
    two seeds (no interval)."""
    if len(score.values) < 2:
        return None
    return 1 if score.low >= SOLVED else -1 if score.high < SOLVED else 0


def _at(part: str, score: Estimate) -> str:
    return f"{score} at {part}" if score.values else str(score)


def _score(chosen: dict, variant: str) -> str:
    """MAD's score of a variant: its chosen test accuracy averaged over the tasks measured (one level each)."""
    means = [chosen[variant, task][1].mean for task in TASKS[variant] if chosen[variant, task][1].values]
    return f"{sum(means) / len(means):.3f} over {len(means)} of {len(TASKS[variant])} tasks" if means else \
        "not measured"
