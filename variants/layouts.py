"""Layouts: which keys each query attends, as data that every kernel reads.

A layout is a block map plus an element rule. Positions are cut into blocks of `block_size`; the block
map says which key blocks each query block may touch, and the rule refines that pair by pair
(for example |i - j| <= window // 2). The pairs attended are those in an allowed block that the rule
allows (and, when causal, j <= i). The blocked kernel gathers only the allowed key blocks; the reference
and sdpa kernels expand the same layout into a dense mask with `dense`; drawing a layout uses `dense` too.
The flex kernel reads it through `tiles`: the block map says which tiles of a fused kernel may hold
attended pairs, the rule says which of those hold only attended pairs (no mask needed there).

A block map may differ per head (BigBird draws its random blocks per head): it is then (heads, query
blocks, key blocks), and `dense`, `tiles` and the kernels carry a head dimension of that size; a layout
the same in every head has `heads == 1`, and that dimension broadcasts over the heads of a call.

Windows, one convention for every windowed option (Beltagy et al. 2020): a window of w keys is w // 2
keys on each side of the query, and the query itself, |i - j| <= w // 2; causal keeps the half before
it, 0 <= i - j <= w // 2 (every layout is intersected with j <= i, never redrawn when causal).

Block maps are built at block level, O((n / block_size)^2) booleans per head, never O(n^2).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

DENSE_SLAB = 1 << 22  # elements per slab of `dense`


def derived_seed(*parts: int) -> int:
    """A seed from integers (a base seed, a layer, a head): the same on every machine and Python version,
    unrelated for neighbouring inputs, below 2^63."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _covers(lo: torch.Tensor, hi: torch.Tensor, period: int) -> torch.Tensor:
    """Whether the integer interval [lo, hi] contains a multiple of `period` (elementwise)."""
    return torch.div(hi, period, rounding_mode="floor") * period >= lo


class Layout:
    """Base: subclasses set `block_size` and define `block_map` and `rule`."""

    block_size: int
    heads: int = 1  # the heads the block map tells apart; 1 when every head attends alike
    # True when the block map is exactly the blocks holding a pair the rule allows, so that the rule alone
    # decides each pair (the flex kernel's mask then skips the block map lookup).
    rule_decides: ClassVar[bool] = False

    def block_map(self, query_blocks: int, key_blocks: int, causal: bool) -> torch.Tensor:
        """Bool (query_blocks, key_blocks), or (heads, query_blocks, key_blocks) when it differs per head:
        which key blocks each query block may touch. Causality is applied by `attended_blocks`; `causal`
        is for maps that draw among the blocks a query may see (BigBird's random blocks)."""
        raise NotImplementedError

    def rule(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor | None:
        """Bool, broadcast from query positions i and key positions j; None when every pair is allowed."""
        return None

    def _block_offsets(self, query_blocks: int, key_blocks: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Smallest and largest i - j over the pairs of each (query block, key block): two (Q, K) tensors."""
        b = self.block_size
        first_query = torch.arange(query_blocks)[:, None] * b
        first_key = torch.arange(key_blocks)[None, :] * b
        return first_query - first_key - (b - 1), first_query - first_key + (b - 1)

    def _band(self, query_blocks: int, key_blocks: int, reach: int) -> torch.Tensor:
        """Blocks holding a pair with |i - j| <= reach."""
        lo, hi = self._block_offsets(query_blocks, key_blocks)
        return (lo <= reach) & (hi >= -reach)


def causal_blocks(query_blocks: int, key_blocks: int) -> torch.Tensor:
    """Block pairs holding at least one pair j <= i (equal block sizes: key block <= query block)."""
    return torch.arange(key_blocks)[None, :] <= torch.arange(query_blocks)[:, None]


def blocks_for(seq: int, block_size: int) -> int:
    return max(1, math.ceil(seq / block_size))


def attended_blocks(layout: Layout, seq_q: int, seq_k: int, causal: bool) -> torch.Tensor:
    """Bool (layout.heads, query_blocks, key_blocks): the block map, with causality when causal."""
    query_blocks, key_blocks = blocks_for(seq_q, layout.block_size), blocks_for(seq_k, layout.block_size)
    blocks = layout.block_map(query_blocks, key_blocks, causal).view(layout.heads, query_blocks, key_blocks)
    return blocks & causal_blocks(query_blocks, key_blocks) if causal else blocks


def pairs(layout: Layout | None, blocks: torch.Tensor | None, i: torch.Tensor, j: torch.Tensor,
          causal: bool, head: torch.Tensor | int = 0) -> torch.Tensor:
    """Bool, broadcast from query positions i, key positions j and heads: whether the layout attends (i, j).

    `blocks` is `attended_blocks` for the lengths at hand, or None to skip the block map (no layout, or a
    layout whose rule decides); a block map the same in every head is read at head 0 whatever `head`.
    `dense`, `tiles`, the blocked kernel's plan and the flex kernel's mask all call this one function."""
    if blocks is not None and blocks.shape[0] == 1:
        head = 0
    terms = [
        blocks[head, i // layout.block_size, j // layout.block_size] if blocks is not None else None,
        layout.rule(i, j) if layout is not None else None,
        j <= i if causal else None,
    ]
    allowed = torch.ones_like(i == j)
    for term in terms:
        if term is not None:
            allowed = allowed & term
    return allowed


def dense(layout: Layout, seq_q: int, seq_k: int, causal: bool, device: torch.device | str = "cpu") -> torch.Tensor:
    """Bool (layout.heads, seq_q, seq_k): the pairs the layout attends, expanded to elements (O(seq_q * seq_k)
    booleans per head, built a slab of rows at a time so that the rule's integer intermediates stay small)."""
    blocks = attended_blocks(layout, seq_q, seq_k, causal).to(device)
    allowed = torch.empty(layout.heads, seq_q, seq_k, dtype=torch.bool, device=device)
    heads = torch.arange(layout.heads, device=device)[:, None, None]
    j = torch.arange(seq_k, device=device)[None, :]
    rows = max(1, DENSE_SLAB // max(1, seq_k * layout.heads))
    for start in range(0, seq_q, rows):
        i = torch.arange(start, min(start + rows, seq_q), device=device)[:, None]
        allowed[:, start : start + rows] = pairs(layout, blocks, i, j, causal, heads)
    return allowed


@dataclass(frozen=True)
class Tiles:
    """A layout cut into square tiles of `size` positions, the blocks of a fused kernel (FlexAttention's
    BlockMask): a tile is skipped, computed with the element mask (partial) or without it (full)."""

    size: int
    partial: torch.Tensor  # (heads, query_tiles, key_tiles) bool: attended pairs, and unattended or padding ones
    full: torch.Tensor  # (heads, query_tiles, key_tiles) bool: every pair of the tile is attended
    attended: int  # pairs attended in all, summed over the layout's heads (a benchmark's FLOP count)


def _overlaps(tiles: int, blocks: int, size: int, block_size: int, device: torch.device) -> torch.Tensor:
    """Float (tiles, blocks): 1 where tile T and layout block I share a position."""
    first = torch.arange(blocks, device=device) * block_size
    lo, hi = first // size, (first + block_size - 1) // size  # the tiles block I spans
    t = torch.arange(tiles, device=device)[:, None]
    return ((t >= lo) & (t <= hi)).float()


def tiles(layout: Layout | None, seq_q: int, seq_k: int, causal: bool, size: int,
          device: torch.device | str = "cpu") -> Tiles:
    """Classify the size x size tiles of the (seq_q, seq_k) pairs of each of the layout's heads (one head
    for `layout` None, which attends every pair).

    The block map (with causality) names the tiles that may hold attended pairs; `pairs` is then counted
    on those tiles only, a slab of tiles at a time: O(candidate tiles * size^2) work and O(DENSE_SLAB)
    memory, never O(seq_q * seq_k) unless the layout is dense. Positions beyond the lengths count as not
    attended, as in `torch.nn.attention.flex_attention.create_block_mask`, so the last tiles of lengths
    that are not multiples of `size` are partial.
    """
    device = torch.device(device)
    query_tiles, key_tiles = blocks_for(seq_q, size), blocks_for(seq_k, size)
    blocks = None
    if layout is None:
        candidates = torch.ones(1, query_tiles, key_tiles, dtype=torch.bool, device=device)
        if causal:
            candidates &= causal_blocks(query_tiles, key_tiles).to(device)
    else:
        b = layout.block_size
        blocks = attended_blocks(layout, seq_q, seq_k, causal).to(device)  # (heads, query blocks, key blocks)
        rows = _overlaps(query_tiles, blocks.shape[1], size, b, device)
        columns = _overlaps(key_tiles, blocks.shape[2], size, b, device)
        candidates = (rows @ blocks.float() @ columns.T) > 0  # a tile meets an allowed block
    tile_heads, tile_rows, tile_columns = candidates.nonzero(as_tuple=True)
    counts = torch.zeros(len(tile_rows), dtype=torch.long, device=device)
    offsets = torch.arange(size, device=device)
    per_slab = max(1, DENSE_SLAB // (size * size))
    for start in range(0, len(tile_rows), per_slab):
        slab = slice(start, start + per_slab)
        i = (tile_rows[slab, None] * size + offsets)[:, :, None]  # (tiles, size, 1)
        j = (tile_columns[slab, None] * size + offsets)[:, None, :]  # (tiles, 1, size)
        inside = (i < seq_q) & (j < seq_k)
        attended = pairs(layout, blocks, i.clamp(max=seq_q - 1), j.clamp(max=seq_k - 1), causal,
                         tile_heads[slab, None, None]) & inside
        counts[slab] = attended.sum(dim=(1, 2))
    partial = torch.zeros_like(candidates)
    full = torch.zeros_like(candidates)
    full[tile_heads, tile_rows, tile_columns] = counts == size * size
    partial[tile_heads, tile_rows, tile_columns] = (counts > 0) & (counts < size * size)
    return Tiles(size, partial, full, int(counts.sum()))


def pairs_in_view(seq_len: int, causal: bool) -> int:
    """How many (query, key) pairs a sequence of `seq_len` positions has: those with j <= i when causal, else all."""
    return seq_len * (seq_len + 1) // 2 if causal else seq_len * seq_len


def coverage(layout: Layout | None, seq_len: int, causal: bool) -> float | None:
    """The fraction of a sequence's pairs (`pairs_in_view`) that the layout attends, averaged over its heads (BigBird
    draws its random blocks per head): 1.0 is dense attention. Counted by `tiles`, which reads the block map and the
    rule through `pairs` as every kernel does, so it is what runs, in O(candidate tiles * block_size^2) work. None
    for no layout (a module's `block_layout` is None): a variant that attends every pair by construction (dense and
    its rescorings), mixes them through features or factors (the kernelised and low-rank families) or picks them per
    input (Reformer, Sinkhorn) has none to count."""
    if layout is None:
        return None
    attended = tiles(layout, seq_len, seq_len, causal, layout.block_size).attended
    return attended / (layout.heads * pairs_in_view(seq_len, causal))


def _power_of_two_at_most(value: float, low: int, high: int) -> int:
    """The largest power of two <= value, clamped to [low, high]."""
    value = max(value, 1)
    return min(high, max(low, 2 ** math.floor(math.log2(value))))


class _Band(Layout):
    """The band of a window of `window` keys: window // 2 on each side of the query, and the query itself."""

    rule_decides = True

    window: int

    @property
    def reach(self) -> int:
        """How far a query sees on each side: |i - j| <= reach."""
        return self.window // 2

    @property
    def block_size(self) -> int:
        # Half the reach: a causal query block then gathers about 1.5 reaches of keys, not 2. At a reach of
        # 255 and n = 16384 on CPU, 128 measured faster than 64 or 32 (fewer, larger fused calls).
        return _power_of_two_at_most(self.reach / 2, 16, 128)


@dataclass(frozen=True)
class Local(_Band):
    """|i - j| <= window // 2."""

    window: int

    def block_map(self, query_blocks: int, key_blocks: int, causal: bool) -> torch.Tensor:
        return self._band(query_blocks, key_blocks, self.reach)

    def rule(self, i, j):
        return (i - j).abs() <= self.reach


@dataclass(frozen=True)
class Strided(Layout):
    """Child et al. 2019: |i - j| < stride, or i - j a multiple of stride."""

    rule_decides = True

    stride: int

    @property
    def block_size(self) -> int:
        return _power_of_two_at_most(self.stride / 4, 8, 64)

    def block_map(self, query_blocks: int, key_blocks: int, causal: bool) -> torch.Tensor:
        lo, hi = self._block_offsets(query_blocks, key_blocks)
        return self._band(query_blocks, key_blocks, self.stride - 1) | _covers(lo, hi, self.stride)

    def rule(self, i, j):
        return ((i - j).abs() < self.stride) | ((i - j) % self.stride == 0)


@dataclass(frozen=True)
class Fixed(Layout):
    """Child et al. 2019: j in i's stride group, or j among the last `summary` positions of a group."""

    rule_decides = True

    stride: int
    summary: int

    @property
    def block_size(self) -> int:
        return _power_of_two_at_most(math.gcd(self.stride, self.summary), 8, 64)

    def block_map(self, query_blocks: int, key_blocks: int, causal: bool) -> torch.Tensor:
        b, s = self.block_size, self.stride
        query_first = torch.arange(query_blocks)[:, None] * b
        key_first = torch.arange(key_blocks)[None, :] * b
        # stride groups overlap: the groups a query block spans meet those a key block spans
        same_group = ((key_first + b - 1) // s >= query_first // s) & (key_first // s <= (query_first + b - 1) // s)
        positions = torch.arange(key_blocks * b)
        summary = (positions % s >= s - self.summary).view(key_blocks, b).any(dim=1)  # O(n), per key block
        return same_group | summary[None, :]

    def rule(self, i, j):
        return (j // self.stride == i // self.stride) | (j % self.stride >= self.stride - self.summary)


@dataclass(frozen=True)
class Longformer(_Band):
    """Beltagy et al. 2020: |i - j| <= window // 2 ("each token attends to 1/2 w tokens on each side"), plus
    the first `num_global` positions attend to and are attended by every position."""

    window: int
    num_global: int

    def block_map(self, query_blocks: int, key_blocks: int, causal: bool) -> torch.Tensor:
        b = self.block_size
        global_rows = (torch.arange(query_blocks) * b < self.num_global)[:, None]
        global_columns = (torch.arange(key_blocks) * b < self.num_global)[None, :]
        return self._band(query_blocks, key_blocks, self.reach) | global_rows | global_columns

    def rule(self, i, j):
        return ((i - j).abs() <= self.reach) | (i < self.num_global) | (j < self.num_global)


@dataclass(frozen=True)
class BigBird(Layout):
    """Zaheer et al. 2020, at block level: neighbouring blocks |I - J| <= 1, global blocks (the first
    `num_global_blocks` rows and columns), and per head `num_random_blocks` random key blocks per query
    block, drawn among the blocks neither neighbouring nor global (and, when causal, in the past): exactly
    that many where as many exist, all of them where fewer do. Query block I of head h draws from
    `derived_seed(seed, h, I)`, so its blocks depend on the seed, the head and I, and on the number of key blocks
    only where a later block is eligible: causal, a sequence's prefix has the layout of the whole there (a
    sequence's length does not reach its earlier outputs)."""

    block_size: int
    num_global_blocks: int
    num_random_blocks: int
    seed: int
    heads: int = 1

    def block_map(self, query_blocks: int, key_blocks: int, causal: bool) -> torch.Tensor:
        rows = torch.arange(query_blocks)[:, None]
        columns = torch.arange(key_blocks)[None, :]
        fixed = ((rows - columns).abs() <= 1) | (rows < self.num_global_blocks) | (columns < self.num_global_blocks)
        eligible = ~fixed & (columns < rows) if causal else ~fixed
        return fixed | torch.stack([self._random_blocks(eligible, head) for head in range(self.heads)])

    def _random_blocks(self, eligible: torch.Tensor, head: int) -> torch.Tensor:
        """Bool like `eligible` (query blocks, key blocks): num_random_blocks of each row's eligible blocks, ranked
        by scores drawn per row (a longer draw from the same seed starts with the same numbers)."""
        scores = torch.stack([torch.rand(eligible.shape[1], generator=torch.Generator().manual_seed(
            derived_seed(self.seed, head, row))) for row in range(eligible.shape[0])])
        scores = scores.masked_fill(~eligible, 2.0)  # ineligible last
        chosen = scores.argsort(dim=1)[:, : min(self.num_random_blocks, eligible.shape[1])]
        return torch.zeros_like(eligible).scatter(1, chosen, eligible.gather(1, chosen))
