"""Scaled dot-product attention (Vaswani et al. 2017, "Attention Is All You Need").

    softmax(q k^T / sqrt(d)) v

The reference formula of the tutorials. Dividing by sqrt(d) keeps the logits' variance at 1 when q and k have
unit-variance components, so the softmax does not saturate as d grows.
Cost: O(n^2 d) time; O(n d) memory through the fused sdpa kernel (O(n^2) materialised by `reference`).
"""

from __future__ import annotations

from dataclasses import dataclass

from variants.base import Attention, NormaliserOptions
from variants.registry import register


@register("dense")
class Dense(Attention):
    """Scaled dot-product attention, softmax(q k^T / sqrt(d)) v, as in the tutorials."""

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        pass
