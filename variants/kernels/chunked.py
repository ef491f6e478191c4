"""The chunked kernel: the reference formula over blocks of queries, recomputed in the backward pass.

Runs any score, including those with a wide per-pair intermediate (additive attention materialises
hidden_dim floats per pair). Each chunk holds at most `CHUNK_ELEMENTS` score elements at once, and
activation checkpointing keeps only q, k and v between forward and backward, so memory is
O(batch * heads * (seq_q + seq_k) * dim) plus O(CHUNK_ELEMENTS) for the chunk in flight, at the cost
of computing each chunk's scores twice when training.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils.checkpoint import checkpoint

from variants.kernels.call import Call
from variants.kernels.reference import attend

CHUNK_ELEMENTS = 1 << 22  # 16 MiB of float32 per chunk


def _attend_chunk(call: Call) -> torch.Tensor:
    return attend(call)[0]


def queries_per_chunk(call: Call) -> int:
    """As many queries as keep a chunk's score elements within CHUNK_ELEMENTS (at least one)."""
    batch, heads = call.q.shape[:2]
    per_query = batch * heads * call.k.shape[2] * call.pair_width
    return max(1, CHUNK_ELEMENTS // max(1, per_query))


def run(call: Call) -> torch.Tensor:
    if call.features is not None or call.factors is not None:
        raise ValueError(f"Kernel 'chunked' passes slices of the queries, which the feature maps or factors of "
                         f"{call.name!r} are not computed from; accepted: 'linear', 'lowrank' or 'reference'.")
    seq_q, chunk = call.q.shape[2], queries_per_chunk(call)
    outputs = []
    for start in range(0, seq_q, chunk):
        part = dataclasses.replace(call, q=call.q[:, :, start : start + chunk], q_pos=call.q_pos[start : start + chunk])
        if torch.is_grad_enabled():
            outputs.append(checkpoint(_attend_chunk, part, use_reentrant=False))
        else:
            outputs.append(_attend_chunk(part))
    return torch.cat(outputs, dim=2)  # (B, H, seq_q, dim_v)
