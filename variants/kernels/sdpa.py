"""The sdpa kernel: `torch.nn.functional.scaled_dot_product_attention` with `scale=` and masks.

Runs every variant whose logits are scale * (q' . k') + bias(positions), q' and k' being the variant's
prepared q and k: PyTorch then dispatches to its fused kernels (flash attention or cuDNN where no mask
or bias is needed, the memory-efficient kernel with one on GPU). A learned per-head scale is folded
into q, since `scale=` takes a float. A row that may see no key is given every key and its output set
to zero, as the reference does: fused kernels differ on a row of -inf (some return NaN).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from variants.kernels.call import Call


def run(call: Call) -> torch.Tensor:
    q, k, v, scale = call.q, call.k, call.v, call.scale
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale.to(q.dtype), 1.0  # (B, H, seq_q, head_dim) * (H, 1, 1); a bf16 q stays bf16
    bias = call.logit_bias(call.q_pos, call.k_pos, call.causal)  # (H, seq_q, seq_k) or None
    plain = bias is None and call.key_padding_mask is None and call.layout is None
    if plain and (not call.causal or q.shape[2] == k.shape[2]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=call.causal, scale=scale)
    allowed = call.allowed(call.q_pos, call.k_pos, call.causal, call.key_padding_mask)  # (B|1, H|1, sq, sk)
    has_key = None
    if allowed is not None:
        has_key = allowed.any(dim=-1, keepdim=True)  # (B|1, H|1, sq, 1)
        allowed = allowed | ~has_key
    if bias is None:
        mask = allowed
    elif allowed is None:
        mask = bias.to(q.dtype)
    else:
        mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return out if has_key is None else out * has_key
