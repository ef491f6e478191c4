"""The reference kernel: the reference formula of the tutorials, softmax(logits) v with the full seq_q x seq_k matrix.

Slow and memory hungry on purpose: it is the truth every other kernel is tested against (in float64),
and the only kernel that returns the dense attention weights.
"""

from __future__ import annotations

import torch

from variants.kernels.call import Call


def masked_softmax(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last dim where `allowed`; rows that may see no key get zeros, never NaN."""
    if allowed is None:
        return torch.softmax(logits, dim=-1)
    logits = logits.masked_fill(~allowed, float("-inf"))
    # A row of -inf would give NaN (and NaN gradients): give it finite logits, then zero its weights.
    has_key = allowed.any(dim=-1, keepdim=True)
    logits = logits.masked_fill(~has_key, 0.0)
    return torch.softmax(logits, dim=-1).masked_fill(~has_key, 0.0)


def attend(call: Call) -> tuple[torch.Tensor, torch.Tensor]:
    """Output (B, H, seq_q, dim_v) and weights (B, H, seq_q, seq_k): softmax of the logits, times v."""
    logits = call.logits(call.q, call.k, call.q_pos, call.k_pos, call.causal)  # (B, H, seq_q, seq_k)
    weights = masked_softmax(logits, call.allowed(call.q_pos, call.k_pos, call.causal, call.key_padding_mask))
    return torch.matmul(weights, call.v), weights


def run(call: Call) -> torch.Tensor:
    return attend(call)[0]
