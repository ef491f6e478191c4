"""The sdpa kernel: `torch.nn.functional.scaled_dot_product_attention` with `scale=` and masks.

Runs every variant whose logits are scale * (q' . k') + bias(positions), q' and k' being the variant's
prepared q and k: PyTorch then dispatches to its fused kernels (flash attention on CPU and GPU where
the mask allows it). A learned per-head scale is folded into q, since `scale=` takes a float.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from variants.kernels.call import Call


def run(call: Call) -> torch.Tensor:
    variant, q, k, v = call.variant, call.q, call.k, call.v
    scale = variant.logit_scale()
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale, 1.0  # (B, H, seq_q, head_dim) * (H, 1, 1)
    bias = variant.logit_bias(call.q_pos, call.k_pos, call.causal)  # (H, seq_q, seq_k) or None
    plain = bias is None and call.key_padding_mask is None and variant.pattern is None
    if plain and (not call.causal or q.shape[2] == k.shape[2]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=call.causal, scale=scale)
    allowed = variant.allowed(call.q_pos, call.k_pos, call.causal, call.key_padding_mask)  # (B|1, 1, sq, sk)
    if bias is None:
        mask = allowed
    elif allowed is None:
        mask = bias.to(q.dtype)
    else:
        mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
