"""Normalisers: how a row of similarities over the keys a query may see becomes that query's weights.

    softmax  w_ij = exp(s_ij) / sum_j' exp(s_ij')             the reference formula of the tutorials
    sum      w_ij = s_ij / max(sum_j' s_ij', EPSILON)          for non-negative similarities s_ij = phi(q_i) . phi(k_j):
                                                               the kernelised family (Katharopoulos et al. 2020)
    none     w_ij = s_ij                                       unnormalised (linear attention with an identity
                                                               feature map, whose sums may vanish or be negative)

Each takes (..., seq_q, seq_k) similarities and a bool mask that broadcasts to them (True where a key may be
seen; None: every key), and gives weights that are exactly zero where a key may not be seen; a row that may see
no key gets zeros, never NaN. Kernels declare which normalisers they compute (`Kernel.normalisers`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# The floor of a kernelised row's denominator, as in the reference code of linear attention and cosFormer
# (eps = 1e-6): a row whose similarities all vanish (ReLU features) outputs zeros instead of 0/0.
EPSILON = 1e-6


def softmax(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last dim where `allowed`; rows that may see no key get zeros, never NaN."""
    if allowed is None:
        return torch.softmax(logits, dim=-1)
    logits = logits.masked_fill(~allowed, float("-inf"))
    # A row of -inf would give NaN (and NaN gradients): give it finite logits, then zero its weights.
    has_key = allowed.any(dim=-1, keepdim=True)
    logits = logits.masked_fill(~has_key, 0.0)
    return torch.softmax(logits, dim=-1).masked_fill(~has_key, 0.0)


def normalised_sum(similarities: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Non-negative similarities divided by their row sum over the allowed keys (floored at EPSILON)."""
    if allowed is not None:
        similarities = similarities.masked_fill(~allowed, 0.0)
    return similarities / similarities.sum(dim=-1, keepdim=True).clamp_min(EPSILON)


def unnormalised(similarities: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """The similarities themselves where allowed, zero elsewhere."""
    return similarities if allowed is None else similarities.masked_fill(~allowed, 0.0)


NORMALISERS: dict[str, Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]] = {
    "softmax": softmax,
    "sum": normalised_sum,
    "none": unnormalised,
}
