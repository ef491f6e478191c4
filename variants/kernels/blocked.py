"""The blocked kernel: block-sparse attention in pure PyTorch, paying only for the blocks a layout allows.

Queries and keys are cut into blocks of the layout's `block_size` (sequences are padded inside, never
rejected). For each query block the kernel gathers the key and value blocks of its row of the block
map and runs the fused `scaled_dot_product_attention` on them, with the layout's element rule,
causality and padding as the mask: the reference formula on the gathered blocks. It runs variants
whose logits are scale * q'.k' + bias(positions) (those that also list `sdpa`); `logit_bias` then
receives (rows, block) query and (heads or 1, rows, keys) key positions. A layout whose block map
differs per head (BigBird's random blocks) gathers each head's own key blocks.

With a normaliser other than the softmax (sigmoid, sparsemax, entmax; `variants.normalisers`) no fused
kernel applies: the kernel forms those logits on the gathered blocks, normalises them over the gathered
keys the mask allows (every key a query may see is among them, so a sigmoid's count of keys is the
row's), and multiplies by the gathered values. Its chunks keep the same bound, never n x n.

Query blocks are processed in chunks of at most `CHUNK_ELEMENTS` gathered (query, key) pairs (see
`plan`), which bounds the transient memory of the masks; plans are cached per layout, lengths,
causality and device, so two modules with different layouts never share one. What autograd keeps for the
backward pass is the gathered key and value blocks, width * block keys per query block, so time and
memory are O(n * keys_per_query * head_dim / block_size) and O(n * keys_per_query * head_dim): never
O(n^2) unless the layout itself is dense. (Checkpointing the chunks would trade a third more time for
less memory; measured at n = 16384 with a window of 256, the gathered blocks already take less than a
quarter of what the dense mask alone takes.) This is how sparse variants train on CPU, where
FlexAttention has no backward.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange

from variants import layouts
from variants.kernels.call import Call, untraced

CHUNK_ELEMENTS = 1 << 24  # gathered (query, key) pairs per chunk, over batch and heads


@dataclass(frozen=True)
class Chunk:
    """Query blocks processed together, each with its key blocks (per head where the layout's differ)."""

    query_blocks: torch.Tensor  # (rows,) long
    key_blocks: torch.Tensor  # (heads or 1, rows, width) long; padding entries point at block 0 and are masked
    allowed: torch.Tensor  # (heads or 1, rows, block_size, width * block_size) bool: rule, causal, real keys


@dataclass(frozen=True)
class Plan:
    """A layout cut into chunks for given lengths; chunk outputs concatenate in sorted-row order."""

    query_blocks: int
    key_blocks: int
    chunks: tuple[Chunk, ...]
    inverse: torch.Tensor  # position of each query block in the concatenated chunk outputs


def _chunk(layout: layouts.Layout, blocks: torch.Tensor, rows: torch.Tensor, seq_k: int, causal: bool,
           device: torch.device) -> Chunk:
    """The chunk of query blocks `rows`, whose block map rows (heads, rows, key_blocks) are `blocks`."""
    b = layout.block_size
    width = int(blocks.sum(dim=-1).max().clamp(min=1))
    # key blocks of each row, allowed ones first (stable sort keeps them in increasing order)
    present, columns = torch.sort(blocks.int(), dim=-1, descending=True, stable=True)
    present, columns = present[..., :width].bool(), columns[..., :width]  # (heads, rows, width)
    offsets = torch.arange(b)
    i = (rows[:, None] * b + offsets)[None, :, :, None]  # (1, rows, b, 1) query positions
    j = (columns[..., None] * b + offsets).flatten(-2)[:, :, None, :]  # (heads, rows, 1, width * b) key positions
    real = present.repeat_interleave(b, dim=-1)[:, :, None, :] & (j < seq_k)  # an allowed block, a real key
    allowed = real & layouts.pairs(layout, None, i, j, causal)  # the rule and causality, pair by pair
    return Chunk(rows.to(device), columns.to(device), allowed.to(device))


@untraced  # in a compiled model: looked up in the cache, never traced into the graph
@functools.lru_cache(maxsize=16)  # lengths change rarely; keep the cache small all the same
def plan(layout: layouts.Layout, seq_q: int, seq_k: int, causal: bool, device: torch.device, max_pairs: int) -> Plan:
    """Cut the layout into chunks of query blocks holding at most `max_pairs` gathered pairs each.

    Query blocks are sorted by their number of key blocks (in their widest head), so a chunk pads its
    rows to a width that its rows nearly share: a global row that sees every key block does not widen
    the others.
    """
    blocks = layouts.attended_blocks(layout, seq_q, seq_k, causal)  # (heads, query_blocks, key_blocks)
    _, query_blocks, key_blocks = blocks.shape
    b = layout.block_size
    counts = blocks.sum(dim=2).amax(dim=0)  # (query_blocks,)
    order = torch.argsort(counts, stable=True)
    widths = counts[order].clamp(min=1).tolist()  # ascending: the last row of a chunk is its widest
    chunks, start = [], 0
    while start < query_blocks:
        stop = start + 1
        while stop < query_blocks and (stop + 1 - start) * widths[stop] * b * b <= max_pairs:
            stop += 1
        rows = order[start:stop]
        chunks.append(_chunk(layout, blocks[:, rows], rows, seq_k, causal, device))
        start = stop
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(query_blocks)
    return Plan(query_blocks, key_blocks, tuple(chunks), inverse.to(device))


def _attend_blocks(
    call: Call,
    q_blocks: torch.Tensor,
    k_blocks: torch.Tensor,
    v_blocks: torch.Tensor,
    chunk: Chunk,
    real_keys: torch.Tensor | None,
) -> torch.Tensor:
    """The chunk's query blocks against their gathered key blocks: (B, H, rows, block, dim_v)."""
    block, heads = q_blocks.shape[3], q_blocks.shape[1]
    offsets = torch.arange(block, device=q_blocks.device)
    each_head = torch.arange(heads, device=q_blocks.device)[:, None, None]  # pairs with key_blocks' heads
    q = q_blocks[:, :, chunk.query_blocks]  # (B, H, rows, block, d)
    k = k_blocks[:, each_head, chunk.key_blocks].to(q.dtype).flatten(3, 4)  # (B, H, rows, width * block, d)
    v = v_blocks[:, each_head, chunk.key_blocks].to(q.dtype).flatten(3, 4)  # (B, H, rows, width * block, dim_v)
    q_pos = chunk.query_blocks[:, None] * block + offsets  # (rows, block)
    k_pos = (chunk.key_blocks[..., None] * block + offsets).flatten(-2)  # (heads or 1, rows, width * block)
    scale = call.scale
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale[:, None].to(q.dtype), 1.0  # (heads, 1, 1, 1) per-head scale folded into q
    allowed = chunk.allowed[None]  # (1, heads or 1, rows, block, width * block)
    if real_keys is not None:  # (B, heads or 1, rows, width * block) -> one row of keys per query block
        allowed = allowed & real_keys[:, chunk.key_blocks].flatten(-2)[:, :, :, None, :]
    bias = call.logit_bias(q_pos, k_pos, call.causal)  # (H, rows, block, width * block) or None
    if call.normaliser == "softmax":
        return _fused_softmax(q, k, v, scale, allowed, bias)
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, H, rows, block, width * block)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    return torch.matmul(call.normalise(scores, allowed), v)


def _fused_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, allowed: torch.Tensor,
                   bias: torch.Tensor | None) -> torch.Tensor:
    """Softmax attention of gathered blocks through the fused sdpa kernel: every (batch, head, query block)
    becomes one sdpa batch entry with a single head, so that the block's own mask (rule, causality, padding)
    rides along: (B * H * rows, 1, block, width * block)."""
    batch, heads, rows = q.shape[:3]
    has_key = allowed.any(dim=-1, keepdim=True)  # rows without keys get every key, then a zero output (as sdpa.py)
    mask = (allowed | ~has_key).expand(batch, heads, -1, -1, -1)
    if bias is not None:
        mask = bias.to(q.dtype).masked_fill(~mask, float("-inf"))
    out = F.scaled_dot_product_attention(
        rearrange(q, "b h r s d -> (b h r) 1 s d"),
        rearrange(k, "b h r k d -> (b h r) 1 k d"),
        rearrange(v, "b h r k d -> (b h r) 1 k d"),
        attn_mask=rearrange(mask, "b h r s k -> (b h r) 1 s k"),
        scale=scale,
    )
    return rearrange(out, "(b h r) 1 s d -> b h r s d", b=batch, h=heads, r=rows) * has_key


def _pad(x: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad dim 2 of (B, H, seq, d) to `length`."""
    return F.pad(x, (0, 0, 0, length - x.shape[2]))


def run(call: Call) -> torch.Tensor:
    q, k, v = call.q, call.k, call.v
    seq_q, seq_k = q.shape[2], k.shape[2]
    batch, heads = q.shape[:2]
    block = call.layout.block_size
    max_pairs = max(block * block, CHUNK_ELEMENTS // (batch * heads))
    chunks = plan(call.layout, seq_q, seq_k, call.causal, q.device, max_pairs)
    q_blocks = rearrange(_pad(q, chunks.query_blocks * block), "b h (n s) d -> b h n s d", s=block)
    # Key and value blocks are gathered by several query blocks, which sum their gradients: in bf16 or fp16
    # they are gathered from float32 copies, so that sum is taken in float32, as a fused kernel takes it.
    gather_dtype = torch.float32 if q.dtype in (torch.bfloat16, torch.float16) else q.dtype
    k_blocks = rearrange(_pad(k, chunks.key_blocks * block), "b h (n s) d -> b h n s d", s=block).to(gather_dtype)
    v_blocks = rearrange(_pad(v, chunks.key_blocks * block), "b h (n s) d -> b h n s d", s=block).to(gather_dtype)
    real_keys = None
    if call.key_padding_mask is not None:  # (B, key_blocks, block), padding positions count as not real
        real_keys = F.pad(call.key_padding_mask, (0, chunks.key_blocks * block - seq_k)).view(batch, -1, block)
    outputs = [_attend_blocks(call, q_blocks, k_blocks, v_blocks, chunk, real_keys) for chunk in chunks.chunks]
    out = torch.cat(outputs, dim=2)[:, :, chunks.inverse]  # (B, H, query_blocks, block, dim_v), in block order
    return rearrange(out, "b h n s d -> b h (n s) d")[:, :, :seq_q]
