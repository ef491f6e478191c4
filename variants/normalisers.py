"""Normalisers: how a row of similarities over the keys a query may see becomes that query's weights.

    softmax          w_ij = exp(s_ij) / sum_j' exp(s_ij')       the reference formula of the tutorials
    sigmoid          w_ij = sigmoid(s_ij - log n_i)
    sparsemax        w_i = argmin_{p in simplex} |p - s_i|^2
    entmax15         w_ij = [s_ij / 2 - tau_i]_+^2,  tau_i such that the row sums to 1
    entmax_adaptive  w_ij = [(alpha_h - 1) s_ij - tau_i]_+^(1 / (alpha_h - 1)),  alpha_h learned per head
    sum              w_ij = s_ij / max(sum_j' s_ij', EPSILON)    non-negative similarities s_ij = phi(q_i) . phi(k_j)
    none             w_ij = s_ij                                 unnormalised

- sigmoid (Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid Self-Attention"): each
  weight on its own, no normalisation across keys; the bias b = -log n_i, n_i the keys query i may see, keeps
  a row's weights summing to about 1 while the logits are small, as the paper recommends.
- sparsemax (Martins & Astudillo 2016, "From Softmax to Sparsemax"): the Euclidean projection of the logits
  onto the simplex, exactly zero below a threshold.
- entmax15 (Peters et al. 2019, "Sparse Sequence-to-Sequence Models"): 1.5-entmax, sparse like sparsemax,
  smoother near the threshold.
- entmax_adaptive (Correia et al. 2019, "Adaptively Sparse Transformers"): alpha-entmax with alpha learned per
  head, alpha = 1 + sigmoid(a) clamped to [1.01, 2] as in the paper's code, a drawn from N(0, 1) (alpha 1.5
  at the median; the paper's heads start at random). alpha -> 1 is the softmax, alpha = 2 sparsemax.
- sum: the kernelised family (Katharopoulos et al. 2020); none: linear attention with an identity feature map,
  whose sums may vanish or be negative.

sparsemax and entmax15 are computed exactly (sort-based thresholds, closed-form backward) and entmax_adaptive
by bisection on tau (50 halvings: exact to rounding in float64) with its gradient in alpha (Correia et al.),
all by the `entmax` package of those papers' authors. These four normalise bf16 or fp16 similarities in float32.

Each takes (batch, heads, ..., seq_k) similarities and a bool mask that broadcasts to them (True where a key may
be seen; None: every key), and gives weights that are exactly zero where a key may not be seen; a row that may
see no key gets zeros, never NaN. Kernels declare which normalisers they compute (`Kernel.normalisers`).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from typing import Literal

import entmax
import torch

# The floor of a kernelised row's denominator, as in the reference code of linear attention and cosFormer
# (eps = 1e-6): a row whose similarities all vanish (ReLU features) outputs zeros instead of 0/0.
EPSILON = 1e-6
# What a variant that normalises a row of logits may choose (`variants.base.NormaliserOptions`).
DotProductNormaliser = Literal["softmax", "sigmoid", "sparsemax", "entmax15", "entmax_adaptive"]
DOT_PRODUCT_NORMALISERS: tuple[str, ...] = typing.get_args(DotProductNormaliser)
# Adaptive entmax's alpha stays in [ALPHA_MIN, 2]: at alpha = 1 the bisection's exponent 1 / (alpha - 1) is
# infinite (the bound of the paper's code).
ALPHA_MIN = 1.01

# (similarities (B, H, ..., seq_k), allowed or None) -> weights of the same shape
Normalise = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


def _over_allowed(mapping: Callable[[torch.Tensor], torch.Tensor], logits: torch.Tensor,
                  allowed: torch.Tensor | None) -> torch.Tensor:
    """`mapping` of each row over its allowed keys, as if the others were absent: they get logit -inf (weight
    exactly 0), and a row that may see no key gets finite logits, then zeros (a row of -inf would give NaN)."""
    if allowed is None:
        return mapping(logits)
    has_key = allowed.any(dim=-1, keepdim=True)
    logits = logits.masked_fill(~allowed, float("-inf")).masked_fill(~has_key, 0.0)
    return mapping(logits).masked_fill(~allowed, 0.0)


def _in_float32(mapping: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """`mapping` on float32 copies of bf16 or fp16 similarities (a threshold or a bisection in 8 bits of
    mantissa would be rough), its weights cast back."""
    def in_float32(logits: torch.Tensor) -> torch.Tensor:
        if logits.dtype in (torch.bfloat16, torch.float16):
            return mapping(logits.float()).to(logits.dtype)
        return mapping(logits)

    return in_float32


def softmax(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last dim where `allowed`; rows that may see no key get zeros, never NaN."""
    return _over_allowed(lambda x: torch.softmax(x, dim=-1), logits, allowed)


def sigmoid(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """sigmoid(logit - log n) where `allowed`, n the keys the row may see (Ramapuram et al. 2024); zero elsewhere."""
    if allowed is None:
        return _in_float32(lambda x: torch.sigmoid(x - math.log(x.shape[-1])))(logits)
    seen = allowed.sum(dim=-1, keepdim=True).clamp_min(1)  # a row without keys: any finite bias, then zeros
    weights = _in_float32(lambda x: torch.sigmoid(x - torch.log(seen.to(x.dtype))))(logits)
    return weights.masked_fill(~allowed, 0.0)


def sparsemax(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Sparsemax over the last dim where `allowed` (Martins & Astudillo 2016), exact."""
    return _over_allowed(_in_float32(lambda x: entmax.sparsemax(x, dim=-1)), logits, allowed)


def entmax15(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """1.5-entmax over the last dim where `allowed` (Peters et al. 2019), exact."""
    return _over_allowed(_in_float32(lambda x: entmax.entmax15(x, dim=-1)), logits, allowed)


def adaptive_alpha(preactivation: torch.Tensor) -> torch.Tensor:
    """Correia et al.'s alpha = 1 + sigmoid(a), clamped to [ALPHA_MIN, 2], elementwise."""
    return torch.clamp(1 + torch.sigmoid(preactivation), min=ALPHA_MIN, max=2.0)


def entmax_adaptive(logits: torch.Tensor, allowed: torch.Tensor | None, alpha: torch.Tensor) -> torch.Tensor:
    """alpha-entmax over the last dim where `allowed`, alpha (heads,) one per head (logits' dim 1), by bisection
    (Correia et al. 2019); differentiable in the logits and in alpha."""
    def alpha_entmax(x: torch.Tensor) -> torch.Tensor:
        per_head = alpha.to(x.dtype).view(-1, *[1] * (x.dim() - 2))  # (H, 1, ..., 1): broadcasts over rows
        return entmax.entmax_bisect(x, alpha=per_head, dim=-1)

    return _over_allowed(_in_float32(alpha_entmax), logits, allowed)


def normalised_sum(similarities: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Non-negative similarities divided by their row sum over the allowed keys (floored at EPSILON)."""
    if allowed is not None:
        similarities = similarities.masked_fill(~allowed, 0.0)
    return similarities / similarities.sum(dim=-1, keepdim=True).clamp_min(EPSILON)


def unnormalised(similarities: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """The similarities themselves where allowed, zero elsewhere."""
    return similarities if allowed is None else similarities.masked_fill(~allowed, 0.0)


# The normalisers that learn nothing; entmax_adaptive takes its alpha besides (`entmax_adaptive`).
NORMALISERS: dict[str, Normalise] = {
    "softmax": softmax,
    "sigmoid": sigmoid,
    "sparsemax": sparsemax,
    "entmax15": entmax15,
    "sum": normalised_sum,
    "none": unnormalised,
}
