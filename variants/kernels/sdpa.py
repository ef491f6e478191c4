"""The sdpa kernel: `torch.nn.functional.scaled_dot_product_attention` with `scale=` and masks.

Runs every variant whose logits are scale * (q' . k') + bias(positions), q' and k' being the variant's
prepared q and k: PyTorch then dispatches to its fused kernels (flash attention on CPU and GPU where
the mask allows it). A learned per-head scale is folded into q, since `scale=` takes a float.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from variants.kernels.reference import positions

if TYPE_CHECKING:
    from variants.base import Attention


def run(
    variant: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> torch.Tensor:
    q_pos, k_pos = positions(q, k)
    q, k = variant.prepare(q, k)
    scale = variant.logit_scale()
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale, 1.0  # (B, H, seq_q, head_dim) * (H, 1, 1)
    bias = variant.logit_bias(q_pos, k_pos, causal)  # (H, seq_q, seq_k) or None
    plain = bias is None and key_padding_mask is None and variant.pattern is None
    if plain and (not causal or q.shape[2] == k.shape[2]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    allowed = variant.allowed(q_pos, k_pos, causal, key_padding_mask)  # (B or 1, 1, seq_q, seq_k)
    if bias is None:
        mask = allowed
    elif allowed is None:
        mask = bias.to(q.dtype)
    else:
        mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
