"""The xformers kernel: `xformers.ops.memory_efficient_attention` with its attention bias classes.

Runs what those classes express without a materialised mask: dense attention (no bias), causal
attention (`LowerTriangularMask`, query i sees keys j <= i, the alignment used here for any lengths),
and the local window |i - j| <= window // 2, causal or not (`LocalAttentionFromBottomRightMask` with
window_left = window // 2 and window_right = window // 2, or 0 when causal; bottom-right alignment equals
ours only for equal lengths, so unequal lengths are refused). No position terms (those need a
materialised bias) and no key padding mask. The package is optional (the `gpu` extra, built against a
given torch) and imported only when the kernel runs or its availability is asked; it needs CUDA.
"""

from __future__ import annotations

import functools

import torch

from variants import layouts
from variants.kernels.call import Call

REQUIREMENT = "the xformers package (pip install 'attnlab[gpu]') and a CUDA device"


@functools.cache
def available() -> bool:
    """Whether xformers imports and a CUDA device is present; never raises."""
    if not torch.cuda.is_available():
        return False
    try:
        import xformers.ops  # noqa: F401
    except (ImportError, OSError, RuntimeError):  # absent, or built against another torch or CUDA
        return False
    return True


def _refuse(what: str, accepted: str) -> ValueError:
    return ValueError(f"Kernel 'xformers' cannot run {what}; accepted: {accepted}, or kernel 'auto'.")


def run(call: Call) -> torch.Tensor:
    from xformers.ops import fmha

    q, k, v, layout, scale = call.q, call.k, call.v, call.layout, call.scale
    seq_q, seq_k = q.shape[2], k.shape[2]
    if call.key_padding_mask is not None:
        raise _refuse("a key_padding_mask", "calls without one")
    if call.score_mod(q, k, call.q_pos, call.causal) is not None:
        raise _refuse(f"variant {call.name!r}, whose logits carry a position term",
                      "variants scored by the scaled dot product alone")
    if layout is None:
        bias = fmha.attn_bias.LowerTriangularMask() if call.causal else None
    elif isinstance(layout, layouts.Local) and seq_q == seq_k:
        bias = fmha.attn_bias.LocalAttentionFromBottomRightMask(window_left=layout.reach,
                                                                window_right=0 if call.causal else layout.reach)
    else:
        raise _refuse(f"layout {layout} with {seq_q} queries and {seq_k} keys",
                      "no layout, or a local window with as many queries as keys")
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale.to(q.dtype), 1.0  # (B, H, seq_q, head_dim) * (H, 1, 1)
    # xformers takes (batch, seq, heads, head_dim)
    out = fmha.memory_efficient_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          attn_bias=bias, scale=scale)
    return out.transpose(1, 2)  # (B, H, seq_q, dim_v)
