"""The blocked kernel: block-sparse attention in pure PyTorch, paying only for the blocks a layout allows.

Queries and keys are cut into blocks of the layout's `block_size` (sequences are padded inside, never
rejected). For each query block the kernel gathers the key and value blocks of its row of the block
map and runs the fused `scaled_dot_product_attention` on them, with the layout's element rule,
causality and padding as the mask: the reference formula on the gathered blocks. It runs variants
whose logits are scale * q'.k' + bias(positions) (those that also list `sdpa`); `logit_bias` then
receives (rows, block) query and (rows, keys) key positions.

Query blocks are processed in chunks of at most `CHUNK_ELEMENTS` gathered (query, key) pairs (see
`variants.layouts.plan`), which bounds the transient memory of the masks. What autograd keeps for the
backward pass is the gathered key and value blocks, width * block keys per query block, so time and
memory are O(n * keys_per_query * head_dim / block_size) and O(n * keys_per_query * head_dim): never
O(n^2) unless the layout itself is dense. (Checkpointing the chunks would trade a third more time for
less memory; measured at n = 16384 with a window of 256, the gathered blocks already take less than a
quarter of what the dense mask alone takes.) This is how sparse variants train on CPU, where
FlexAttention has no backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from einops import rearrange

from variants import layouts
from variants.kernels.call import Call

if TYPE_CHECKING:
    from variants.base import Attention

CHUNK_ELEMENTS = 1 << 24  # gathered (query, key) pairs per chunk, over batch and heads


def _attend_blocks(
    variant: Attention,
    q_blocks: torch.Tensor,
    k_blocks: torch.Tensor,
    v_blocks: torch.Tensor,
    chunk: layouts.Chunk,
    real_keys: torch.Tensor | None,
    causal: bool,
) -> torch.Tensor:
    """The chunk's query blocks against their gathered key blocks, through the fused sdpa kernel.

    Every (batch, head, query block) becomes one sdpa batch entry with a single head, so that the
    block's own mask (rule, causality, padding) rides along: (B * H * rows, 1, block, width * block).
    """
    batch, heads, _, block, _ = q_blocks.shape
    rows = chunk.query_blocks.shape[0]
    offsets = torch.arange(block, device=q_blocks.device)
    q = q_blocks[:, :, chunk.query_blocks]  # (B, H, rows, block, d)
    k = k_blocks[:, :, chunk.key_blocks].to(q.dtype)  # (B, H, rows, width, block, d)
    v = v_blocks[:, :, chunk.key_blocks].to(q.dtype)  # (B, H, rows, width, block, dim_v)
    q_pos = chunk.query_blocks[:, None] * block + offsets  # (rows, block)
    k_pos = (chunk.key_blocks[:, :, None] * block + offsets).flatten(1)  # (rows, width * block)
    scale = variant.logit_scale()
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale[:, None].to(q.dtype), 1.0  # (heads, 1, 1, 1) per-head scale folded into q
    allowed = chunk.allowed[None, None]  # (1, 1, rows, block, width * block)
    if real_keys is not None:
        allowed = allowed & real_keys[:, chunk.key_blocks].flatten(2)[:, None, :, None, :]
    has_key = allowed.any(dim=-1, keepdim=True)  # rows without keys get every key, then a zero output (as sdpa.py)
    mask = (allowed | ~has_key).expand(batch, heads, -1, -1, -1)
    bias = variant.logit_bias(q_pos, k_pos, causal)  # (H, rows, block, width * block) or None
    if bias is not None:
        mask = bias.to(q.dtype).masked_fill(~mask, float("-inf"))
    out = F.scaled_dot_product_attention(
        rearrange(q, "b h r s d -> (b h r) 1 s d"),
        rearrange(k, "b h r w s d -> (b h r) 1 (w s) d"),
        rearrange(v, "b h r w s d -> (b h r) 1 (w s) d"),
        attn_mask=rearrange(mask, "b h r s k -> (b h r) 1 s k"),
        scale=scale,
    )
    return rearrange(out, "(b h r) 1 s d -> b h r s d", b=batch, h=heads, r=rows) * has_key


def _pad(x: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad dim 2 of (B, H, seq, d) to `length`."""
    return F.pad(x, (0, 0, 0, length - x.shape[2]))


def run(call: Call) -> torch.Tensor:
    variant, q, k, v = call.variant, call.q, call.k, call.v
    seq_q, seq_k = q.shape[2], k.shape[2]
    batch, heads = q.shape[:2]
    block = variant.pattern.block_size
    plan = variant.plan(seq_q, seq_k, call.causal, q.device, max(block * block, CHUNK_ELEMENTS // (batch * heads)))
    q_blocks = rearrange(_pad(q, plan.query_blocks * block), "b h (n s) d -> b h n s d", s=block)
    # Key and value blocks are gathered by several query blocks, which sum their gradients: in bf16 or fp16
    # they are gathered from float32 copies, so that sum is taken in float32, as a fused kernel takes it.
    gather_dtype = torch.float32 if q.dtype in (torch.bfloat16, torch.float16) else q.dtype
    k_blocks = rearrange(_pad(k, plan.key_blocks * block), "b h (n s) d -> b h n s d", s=block).to(gather_dtype)
    v_blocks = rearrange(_pad(v, plan.key_blocks * block), "b h (n s) d -> b h n s d", s=block).to(gather_dtype)
    real_keys = None
    if call.key_padding_mask is not None:  # (B, key_blocks, block), padding positions count as not real
        real_keys = F.pad(call.key_padding_mask, (0, plan.key_blocks * block - seq_k)).view(batch, -1, block)
    outputs = [_attend_blocks(variant, q_blocks, k_blocks, v_blocks, chunk, real_keys, call.causal)
               for chunk in plan.chunks]
    out = torch.cat(outputs, dim=2)[:, :, plan.inverse]  # (B, H, query_blocks, block, dim_v), in block order
    return rearrange(out, "b h n s d -> b h (n s) d")[:, :, :seq_q]
