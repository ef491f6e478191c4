"""Scalable-Softmax (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention", arXiv 2501.19399).

    logits_ij = s_h * log(n_i) * q_i . k_j / sqrt(d),   softmax(logits) v

n_i is the number of keys query i may see: min(i + 1, seq_k) when causal (query i sees the keys
j <= i), seq_k otherwise. With plain softmax the largest weight of a row falls as 1/n while n grows,
so attention fades over long contexts; multiplying the logits by s log n makes exp(logit) = n^(s score)
grow with n too, and a key that stands out keeps its weight (one key scored a above n - 1 keys scored 0
gets n^(s a) / (n^(s a) + n - 1), about 1/2 for every n when s a = 1). s is learned per head, from the
paper's initial 0.43, or kept fixed.

n counts the positions a query may see, not the real keys among them: padding does not lower it, so a
padded batch element attends as the same sequence would unpadded, and a model trained at length L sees
log L at length L. The multiplier depends on the head and the query position only, so it is a per-pair
`score_mod`: FlexAttention runs it fused on CUDA, the chunked kernel elsewhere; sdpa cannot (its
logits are scale * q.k + bias).
Cost: O(n^2 d) time, as `dense`, plus one multiply per pair; `heads` parameters when learned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from common.options import option, require
from variants.base import Attention, Choice, NormaliserOptions, Range, ScoreMod
from variants.registry import register


@register("ssmax")
class ScalableSoftmax(Attention):
    """Scaled dot product times s * log(number of keys seen) before the softmax, s learned per head."""

    search_space = {"length_scale": Range(0.1, 2.0, log=True), "fixed": Choice((False, True))}

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        length_scale: float = option(0.43, "s, the factor on log(n); its initial value when learned", tag="s")
        fixed: bool = option(False, "keep s at length_scale instead of learning one s per head", tag="fixed")

        def __post_init__(self) -> None:
            require(
                math.isfinite(self.length_scale) and self.length_scale > 0,
                "length_scale", self.length_scale, "a finite number > 0",
            )

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if options.fixed:
            self.length_scale = options.length_scale
        else:
            self.length_scale = nn.Parameter(torch.full((self.num_heads,), options.length_scale))  # (heads,)

    def score_mod(self, q, k, q_pos, causal) -> ScoreMod | None:
        num_keys = k.shape[2]
        length_scale = self.length_scale

        def scalable_softmax(score, batch, head, q_idx, kv_idx):
            if causal:
                log_seen = torch.log((q_idx + 1).clamp(max=num_keys).to(score.dtype))
            else:
                log_seen = math.log(num_keys)
            per_head = length_scale if self.options.fixed else length_scale[head].to(score.dtype)
            return score * per_head * log_seen

        return scalable_softmax
