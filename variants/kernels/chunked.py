"""The chunked kernel: the reference formula over blocks of queries, recomputed in the backward pass.

Runs any score, including those with a wide per-pair intermediate (additive attention materialises
hidden_dim floats per pair). Each chunk holds at most `CHUNK_ELEMENTS` score elements at once, and
activation checkpointing keeps only q, k and v between forward and backward, so memory is
O(batch * heads * (seq_q + seq_k) * dim) plus O(CHUNK_ELEMENTS) for the chunk in flight, at the cost
of computing each chunk's scores twice when training.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.utils.checkpoint import checkpoint

from variants.kernels.reference import attend, positions

if TYPE_CHECKING:
    from variants.base import Attention

CHUNK_ELEMENTS = 1 << 22  # 16 MiB of float32 per chunk


def _attend_chunk(*args) -> torch.Tensor:
    return attend(*args)[0]


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
    batch, heads, seq_q = q.shape[:3]
    per_query = batch * heads * k.shape[2] * variant.pair_width
    chunk = max(1, CHUNK_ELEMENTS // max(1, per_query))
    outputs = []
    for start in range(0, seq_q, chunk):
        args = (variant, q[:, :, start : start + chunk], k, v, q_pos[start : start + chunk], k_pos,
                causal, key_padding_mask)
        if torch.is_grad_enabled():
            outputs.append(checkpoint(_attend_chunk, *args, use_reentrant=False))
        else:
            outputs.append(_attend_chunk(*args))
    return torch.cat(outputs, dim=2)  # (B, H, seq_q, dim_v)
