"""A part of a claim that sweeps its own grid of learning rates (`experiments.claims.parts.SweptRuns`), as its paper did
(MAD's 1e-4, 5e-4 and 1e-3), whatever `make reproduce --lr-multiples` says for the other claims: tuning chooses one of
them on the validation set, and only the fresh confirmation seeds are read (`analysis.claims.base`). A grid over
another setting (weight decay) is one part per value, each fixing it with `sets` (`train.weight_decay=0.1`); the claim
chooses among those parts on the validation set too (`best_on_validation`)."""

from __future__ import annotations

from analysis.claims.base import Estimate, Results, estimate


def best_on_validation(results: Results, parts: tuple[str, ...], variant: str, task: str) -> tuple[str, Estimate]:
    """Of the parts that each fix one grid point (`parts`), the one whose runs of the cell have the highest mean
    validation accuracy, and the test accuracy of those runs: the grid point is never chosen on the test set. A part
    not measured yet counts below every measured one; (parts[0], nothing) where none is."""
    validation = {part: estimate(results.figure(part, variant, task, lambda result: result.get("val_accuracy")))
                  for part in parts}
    measured = [part for part in parts if validation[part].values]
    if not measured:
        return parts[0], estimate({})
    chosen = max(measured, key=lambda part: validation[part].mean)
    return chosen, estimate(results.test(chosen, variant, task))
