"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive Transformers with
Linear Attention", eq. 4-7).

    out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / (phi(q_i)^T sum_j phi(k_j)),   phi(x) = elu(x) + 1

The softmax's exp(q.k) is replaced by the kernel phi(q).phi(k), so the sums over keys are computed once
(causal: as running sums) and attention costs O(n d^2) instead of O(n^2 d). `feature_map` picks phi: the
paper's elu + 1; relu (non-negative, may give a row of zeros, which outputs zeros); or identity, phi(x) =
x / d^(1/4) (the scaled dot product q.k / sqrt(d) itself), which may be negative and so is left
unnormalised (the `none` normaliser: out_i = sum_j (q_i.k_j / sqrt(d)) v_j), as in the unnormalised linear
attention of Schlag et al. 2021. The denominator is floored at 1e-6, as in the paper's code.
Kernels: `linear` (O(n), chunked when causal), and the n x n form on `chunked` and `reference`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from common.options import option, require
from variants.base import Attention, Choice, Complexity
from variants.registry import register

FEATURE_MAPS = ("elu", "relu", "identity")


@register("linear")
class LinearAttention(Attention):
    """Linear attention: phi(q) (sum_j phi(k_j) v_j^T) / (phi(q) . sum_j phi(k_j)), phi = elu + 1; O(n)."""

    complexity = Complexity("O(n d^2)", 1, 2)

    search_space = {"feature_map": Choice(("elu", "relu"))}

    @dataclass(frozen=True)
    class Options:
        feature_map: Literal["elu", "relu", "identity"] = option(
            "elu", "phi: elu + 1 (the paper's), relu, or identity (scaled q.k, unnormalised)", tag="phi")

        def __post_init__(self) -> None:
            require(self.feature_map in FEATURE_MAPS, "feature_map", self.feature_map,
                    ", ".join(repr(name) for name in FEATURE_MAPS))

    @classmethod
    def normaliser_for(cls, options: Options) -> str:
        return "none" if options.feature_map == "identity" else "sum"

    def features(self, q, k, q_pos, k_pos, causal, key_padding_mask) -> tuple[torch.Tensor, torch.Tensor]:
        if self.options.feature_map == "elu":
            return F.elu(q) + 1, F.elu(k) + 1
        if self.options.feature_map == "relu":
            return F.relu(q), F.relu(k)
        scale = self.head_dim ** -0.25
        return q * scale, k * scale
