"""Logit soft-capping (Gemma Team 2024, "Gemma 2: Improving Open Language Models at a Practical Size").

    logits_ij = cap * tanh((q_i . k_j / sqrt(d)) / cap),   softmax(logits) v

Every logit lies in (-cap, cap), however large q and k grow, while scores much smaller than cap pass
almost unchanged (cap * tanh(s / cap) = s - s^3 / (3 cap^2) + ...). Gemma 2 caps attention logits at
50. The cap is a per-pair function of the scaled dot product, written once as a `score_mod`: FlexAttention
runs it fused on CUDA, the chunked kernel elsewhere; sdpa cannot (its logits are scale * q.k + bias).
Cost: O(n^2 d) time, as `dense`, plus one tanh per pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from common.options import option, require
from variants.base import Attention, NormaliserOptions, Range, ScoreMod
from variants.registry import register


@register("softcap")
class SoftCap(Attention):
    """Scaled dot product soft-capped by cap * tanh(score / cap) before the softmax, as in Gemma 2."""

    search_space = {"cap": Range(1.0, 100.0, log=True)}

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        cap: float = option(50.0, "bound on the magnitude of every logit (Gemma 2: 50)", tag="c")

        def __post_init__(self) -> None:
            require(math.isfinite(self.cap) and self.cap > 0, "cap", self.cap, "a finite number > 0")

    def score_mod(self, q, k, q_pos, causal) -> ScoreMod | None:
        cap = self.options.cap

        def soft_cap(score, batch, head, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)

        return soft_cap
