"""Unscaled dot-product attention: the reference formula without the 1/sqrt(d) factor.

    softmax(q k^T) v

With unit-variance q and k the logits have variance d, so the softmax saturates as d grows and its
gradients vanish: the ablation behind the tutorials' "why divide by sqrt(d_k)" argument.
Cost: as `dense`, O(n^2 d) time.
"""

from __future__ import annotations

from dataclasses import dataclass

from variants.base import Attention, NormaliserOptions
from variants.registry import register


@register("unscaled")
class Unscaled(Attention):
    """Dot-product attention without scaling, softmax(q k^T) v: the saturation ablation."""

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        pass

    def logit_scale(self) -> float:
        return 1.0
