"""Vaswani et al. 2017, footnote 4: the dot product of unit-variance q and k has variance d_k, so unscaled the
softmax saturates as d_k grows; dividing by sqrt(d_k) keeps it from doing so."""

from __future__ import annotations

import torch

from analysis.claims.base import INCONCLUSIVE, Claim, Results, Verdict, checks_text, decided
from analysis.claims.registry import register_claim
from experiments.saturation.tables import init_table

HEAD_DIMS = (16, 64, 256, 1024)
KEYS = 256
SAMPLES = 512
SIGMAS = 3.0  # how many standard errors the measured variance may lie from d_k


@register_claim("vaswani_scaling")
class VaswaniScaling(Claim):
    """q.k has variance d_k, and unscaled softmax saturates as d_k grows (Vaswani et al. 2017, footnote 4)."""

    source = "Vaswani et al. 2017, \"Attention Is All You Need\", section 3.2.1 and footnote 4"
    claimed = ("q.k of components with mean 0 and variance 1 has mean 0 and variance d_k; for large d_k the dot "
               "products grow large in magnitude, pushing the softmax into regions of extremely small gradients, "
               "which the scaling by 1/sqrt(d_k) counteracts")
    read = "the text (a statement, no table)"
    their_setting = "an argument about the formula: q and k drawn with independent unit-variance components"
    our_setting = (f"the saturation study's draws (experiments/saturation/tables.py): q and k N(0, I), d_k in "
                   f"{', '.join(map(str, HEAD_DIMS))}, {KEYS} keys per query, {SAMPLES} queries, float64; no training")
    rule = (f"reproduced when the measured variance of q.k lies within {SIGMAS:g} standard errors of d_k at every d_k, "
            "and unscaled the mean largest weight grows and the norm of the softmax Jacobian falls with every step "
            "of d_k while scaled both stay within a factor of 2 of their value at the smallest d_k; not reproduced "
            "when any of these fails")

    def verdict(self, results: Results) -> Verdict:
        table = init_table(HEAD_DIMS, [KEYS], [], dtypes=[torch.float64], samples=SAMPLES, seed=0, quiet=True)
        rows = {kind: table[table["normalisation"] == kind].sort_values("head_dim") for kind in ("unscaled", "scaled")}
        unscaled, scaled = rows["unscaled"], rows["scaled"]
        if len(unscaled) != len(HEAD_DIMS) or len(scaled) != len(HEAD_DIMS):
            return Verdict(INCONCLUSIVE, "the draws gave no row for every d_k", self.rule)
        variance_ok = ((unscaled["qk_variance"] - unscaled["head_dim"]).abs()
                       <= SIGMAS * unscaled["qk_variance_se"]).all()
        saturates = unscaled["max_weight"].is_monotonic_increasing and unscaled["jacobian_norm"].is_monotonic_decreasing
        steady = all((scaled[column] / scaled[column].iloc[0]).between(0.5, 2.0).all()
                     for column in ("max_weight", "jacobian_norm"))
        ours = "; ".join(f"d_k {int(row.head_dim)}: var(q.k) {row.qk_variance:.1f} ± {row.qk_variance_se:.1f}, "
                         f"largest weight unscaled {row.max_weight:.3f}, scaled {scaled_row.max_weight:.3f}"
                         for row, scaled_row in zip(unscaled.itertuples(), scaled.itertuples(), strict=True))
        checks = {"variance within the bound at every d_k": bool(variance_ok),
                  "unscaled saturating with d_k": bool(saturates), "scaled steady": steady}
        return Verdict(decided(checks), ours, checks_text(checks))
