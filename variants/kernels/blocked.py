"""The blocked kernel: block-sparse attention in pure PyTorch, paying only for the blocks a layout allows.

Queries and keys are cut into blocks of the layout's `block_size` (sequences are padded inside, never
rejected). For each query block the kernel gathers the key and value blocks of its row of the block
map, scores them, applies the layout's element rule, causality and padding as a mask, and takes the
softmax and the weighted sum there: the reference formula on the gathered blocks.

Query blocks are processed in chunks of at most `CHUNK_ELEMENTS` gathered scores (see
`variants.layouts.plan`) under activation checkpointing, so memory is O(n * head_dim) plus one chunk,
and time is O(n * keys_per_query * head_dim): never O(n^2) unless the layout itself is dense.
This is how sparse variants train on CPU, where FlexAttention has no backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from einops import rearrange
from torch.utils.checkpoint import checkpoint

from variants import layouts
from variants.kernels.reference import masked_softmax, positions

if TYPE_CHECKING:
    from variants.base import Attention

CHUNK_ELEMENTS = 1 << 22  # gathered scores per chunk, over batch and heads (16 MiB of float32)


def _attend_blocks(
    variant: Attention,
    q_blocks: torch.Tensor,
    k_blocks: torch.Tensor,
    v_blocks: torch.Tensor,
    chunk: layouts.Chunk,
    real_keys: torch.Tensor | None,
    causal: bool,
) -> torch.Tensor:
    block = q_blocks.shape[3]
    offsets = torch.arange(block, device=q_blocks.device)
    q = q_blocks[:, :, chunk.query_blocks]  # (B, H, rows, block, d)
    k = k_blocks[:, :, chunk.key_blocks].flatten(3, 4)  # (B, H, rows, width * block, d)
    v = v_blocks[:, :, chunk.key_blocks].flatten(3, 4)  # (B, H, rows, width * block, dim_v)
    q_pos = chunk.query_blocks[:, None] * block + offsets  # (rows, block)
    k_pos = (chunk.key_blocks[:, :, None] * block + offsets).flatten(1)  # (rows, width * block)
    logits = variant.logits(q, k, q_pos, k_pos, causal)  # (B, H, rows, block, width * block)
    allowed = chunk.allowed[None, None]  # (1, 1, rows, block, width * block)
    if real_keys is not None:
        allowed = allowed & real_keys[:, chunk.key_blocks].flatten(2)[:, None, :, None, :]
    return torch.matmul(masked_softmax(logits, allowed), v)  # (B, H, rows, block, dim_v)


def _pad(x: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad dim 2 of (B, H, seq, d) to `length`."""
    return F.pad(x, (0, 0, 0, length - x.shape[2]))


def run(
    variant: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> torch.Tensor:
    seq_q, seq_k = q.shape[2], k.shape[2]
    q_pos, k_pos = positions(q, k)
    q, k = variant.prepare(q, k)
    batch, heads = q.shape[:2]
    block = variant.pattern.block_size
    per_pair = batch * heads * max(1, variant.pair_width)
    plan = variant.plan(seq_q, seq_k, causal, q.device, max(block * block, CHUNK_ELEMENTS // per_pair))
    q_blocks = rearrange(_pad(q, plan.query_blocks * block), "b h (n s) d -> b h n s d", s=block)
    k_blocks = rearrange(_pad(k, plan.key_blocks * block), "b h (n s) d -> b h n s d", s=block)
    v_blocks = rearrange(_pad(v, plan.key_blocks * block), "b h (n s) d -> b h n s d", s=block)
    real_keys = None
    if key_padding_mask is not None:  # (B, key_blocks, block), padding positions count as not real
        real_keys = F.pad(key_padding_mask, (0, plan.key_blocks * block - seq_k)).view(batch, -1, block)
    outputs = []
    for chunk in plan.chunks:
        args = (variant, q_blocks, k_blocks, v_blocks, chunk, real_keys, causal)
        if torch.is_grad_enabled():
            outputs.append(checkpoint(_attend_blocks, *args, use_reentrant=False))
        else:
            outputs.append(_attend_blocks(*args))
    out = torch.cat(outputs, dim=2)[:, :, plan.inverse]  # (B, H, query_blocks, block, dim_v), in block order
    return rearrange(out, "b h n s d -> b h (n s) d")[:, :, :seq_q]
