"""The reference kernel: the seeds' formula, softmax(logits) v with the full seq_q x seq_k matrix.

Slow and memory hungry on purpose: it is the truth every other kernel is tested against (in float64),
and the only kernel that returns the dense attention weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from variants.base import Attention


def masked_softmax(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last dim where `allowed`; rows that may see no key get zeros, never NaN."""
    if allowed is None:
        return torch.softmax(logits, dim=-1)
    logits = logits.masked_fill(~allowed, float("-inf"))
    # A row of -inf would give NaN (and NaN gradients): give it finite logits, then zero its weights.
    has_key = allowed.any(dim=-1, keepdim=True)
    logits = logits.masked_fill(~has_key, 0.0)
    return torch.softmax(logits, dim=-1).masked_fill(~has_key, 0.0)


def attend(
    variant: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and weights for prepared q (at q_pos) against prepared k and v (at k_pos)."""
    logits = variant.logits(q, k, q_pos, k_pos, causal)  # (B, H, len(q_pos), len(k_pos))
    weights = masked_softmax(logits, variant.allowed(q_pos, k_pos, causal, key_padding_mask))
    return torch.matmul(weights, v), weights  # (B, H, len(q_pos), dim_v)


def positions(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key positions, 0..seq-1 each."""
    return torch.arange(q.shape[2], device=q.device), torch.arange(k.shape[2], device=k.device)


def run_with_weights(
    variant: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    q_pos, k_pos = positions(q, k)
    q, k = variant.prepare(q, k)
    return attend(variant, q, k, v, q_pos, k_pos, causal, key_padding_mask)


def run(
    variant: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> torch.Tensor:
    return run_with_weights(variant, q, k, v, causal, key_padding_mask)[0]
