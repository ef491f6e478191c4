"""The flex kernel: FlexAttention with the variant's `score_mod` and a `BlockMask` built from its layout.

Score: the variant's `score_mod`, the very function the reference formula calls on whole index ranges, here
called per pair inside the fused kernel (a learned per-head scale is folded into q, as in sdpa). It runs
every variant whose logit is a per-pair function of the scaled dot product and the positions.

Layout: `layouts.tiles` cuts the (query, key) pairs into tiles of TILE = 128 positions, FlexAttention's
default block, and classifies them from the layout's block map and rule, causality included: tiles the
block map never touches are skipped, tiles whose every pair is attended are full (no mask applied), the
rest are partial, where the element mask `layouts.pairs` (the rule, or the block map lookup where the
rule does not decide) is applied. Any layout block size works: tiles are classified pair by pair. The
block mask is cached per (layout, lengths, causality, device); a key padding mask changes per batch, so
it is applied per call, every tile partial, as padding[batch, key] in the element mask.

Device: on CUDA the function is `torch.compile(flex_attention)`, compiled once per score, mask, dtype
and (after the first change) dynamic length, and reused across calls. On CPU FlexAttention runs eagerly
and forward only (it materialises the scores): it checks the translation in tests, `auto` never picks it
there, and asking it for a gradient there is an error.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

import torch

from variants import layouts
from variants.kernels.call import Call, untraced

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

# FlexAttention is imported where it is called: importing it loads dynamo (seconds), which a CPU run never needs.
TILE = 128  # FlexAttention's default block (_DEFAULT_SPARSE_BLOCK_SIZE); the fused kernel's tiles divide it
MIN_CUDA_HEAD_DIM = 16  # the fused kernel's tl.dot needs head_dim >= 16
# Each score, layout and dtype compiles its own graph; past dynamo's default limit of 8 graphs per
# function it would silently run the unfused eager path, O(n^2) memory, so the limit is raised.
RECOMPILE_LIMIT = 64


def unfit(head_dim: int, device: torch.device) -> str | None:
    """Why a module of `head_dim` cannot run here, or None."""
    if device.type == "cuda" and head_dim < MIN_CUDA_HEAD_DIM:
        return (f"Kernel 'flex' needs head_dim >= {MIN_CUDA_HEAD_DIM} on cuda (its fused kernel's tiles), "
                f"got head_dim={head_dim}; accepted: a larger head_dim, or kernel 'auto'.")
    return None


@functools.cache
def _compiled():
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(flex_attention)


def _ordered(tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(heads, query_tiles, key_tiles) bool -> BlockMask's (1, heads, query_tiles) counts and (1, heads,
    query_tiles, key_tiles) column indices, each row's tiles first, in increasing order (heads is 1 for a
    layout the same in every head: the BlockMask broadcasts it)."""
    counts = tiles.sum(dim=-1, dtype=torch.int32)
    columns = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts[None], columns[None]


def _mask_mod(layout: layouts.Layout | None, blocks: torch.Tensor | None, causal: bool,
              real_keys: torch.Tensor | None):
    """The element mask of partial tiles: `layouts.pairs`, and real_keys[batch, key] with padding."""

    def mask_mod(batch, head, q_idx, kv_idx):
        allowed = layouts.pairs(layout, blocks, q_idx, kv_idx, causal, head)
        return allowed if real_keys is None else allowed & real_keys[batch, kv_idx]

    return mask_mod


@functools.lru_cache(maxsize=32)
def _layout_tiles(layout: layouts.Layout | None, seq_q: int, seq_k: int, causal: bool, device: torch.device,
                  tile: int) -> tuple[layouts.Tiles, torch.Tensor | None]:
    """The layout's tiles and, where its rule does not decide each pair alone, its block map."""
    tiles = layouts.tiles(layout, seq_q, seq_k, causal, tile, device)
    blocks = None
    if layout is not None and not layout.rule_decides:
        blocks = layouts.attended_blocks(layout, seq_q, seq_k, causal).to(device)
    return tiles, blocks


@functools.lru_cache(maxsize=32)
def _cached_block_mask(layout: layouts.Layout | None, seq_q: int, seq_k: int, causal: bool, device: torch.device,
                       tile: int) -> BlockMask:
    from torch.nn.attention.flex_attention import BlockMask

    tiles, blocks = _layout_tiles(layout, seq_q, seq_k, causal, device, tile)
    return BlockMask.from_kv_blocks(*_ordered(tiles.partial), *_ordered(tiles.full), BLOCK_SIZE=tile,
                                    mask_mod=_mask_mod(layout, blocks, causal, None), seq_lengths=(seq_q, seq_k))


@untraced  # in a compiled model: looked up in the cache, never traced into the graph
def block_mask(layout: layouts.Layout | None, seq_q: int, seq_k: int, causal: bool,
               key_padding_mask: torch.Tensor | None, device: torch.device | str, tile: int = TILE) -> BlockMask:
    """The BlockMask of a call: cached without padding; with padding, the cached tiles all made partial."""
    from torch.nn.attention.flex_attention import BlockMask

    device = torch.device(device)
    if key_padding_mask is None:
        return _cached_block_mask(layout, seq_q, seq_k, causal, device, tile)
    tiles, blocks = _layout_tiles(layout, seq_q, seq_k, causal, device, tile)
    return BlockMask.from_kv_blocks(*_ordered(tiles.partial | tiles.full), BLOCK_SIZE=tile,
                                    mask_mod=_mask_mod(layout, blocks, causal, key_padding_mask),
                                    seq_lengths=(seq_q, seq_k))


def _needs_backward(call: Call) -> bool:
    return torch.is_grad_enabled() and any(
        tensor.requires_grad for tensor in (call.q, call.k, call.v, *call.parameters()))


def run(call: Call) -> torch.Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v, scale = call.q, call.k, call.v, call.scale
    device = q.device
    if isinstance(scale, torch.Tensor):
        q, scale = q * scale.to(q.dtype), 1.0  # (B, H, seq_q, head_dim) * (H, 1, 1)
    score_mod = call.score_mod(call.q, call.k, call.q_pos, call.causal)
    mask = block_mask(call.layout, q.shape[2], k.shape[2], call.causal, call.key_padding_mask, device)
    if device.type == "cuda":
        # Inside a compiled model dynamo traces flex_attention into the model's graph; elsewhere the compiled
        # function, made once, runs.
        attend = flex_attention if torch.compiler.is_compiling() else _compiled()
        return attend(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale)
    if _needs_backward(call):
        raise ValueError(f"Kernel 'flex' has no backward pass on {device.type} (FlexAttention runs forward only "
                         "there); accepted: call it under torch.no_grad(), or train with kernel 'auto'.")
    with warnings.catch_warnings():  # the unfused eager path is the point here: a check of the translation
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return flex_attention(q.detach(), k.detach(), v.detach(), score_mod=score_mod, block_mask=mask, scale=scale)
