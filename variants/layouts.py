"""Layouts: which keys each query attends, as data that every kernel reads.

A layout is a block map plus an element rule. Positions are cut into blocks of `block_size`; the block
map says which key blocks each query block may touch, and the rule refines that pair by pair
(for example |i - j| < window). The pairs attended are those in an allowed block that the rule allows
(and, when causal, j <= i). The blocked kernel gathers only the allowed key blocks; the reference and
sdpa kernels expand the same layout into a dense mask with `dense`; drawing a layout uses `dense` too.
The flex kernel reads it through `tiles`: the block map says which tiles of a fused kernel may hold
attended pairs, the rule says which of those hold only attended pairs (no mask needed there).

Block maps are built at block level, O((n / block_size)^2) booleans, never O(n^2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

DENSE_SLAB = 1 << 22  # elements per slab of `dense`


def _covers(lo: torch.Tensor, hi: torch.Tensor, period: int) -> torch.Tensor:
    """Whether the integer interval [lo, hi] contains a multiple of `period` (elementwise)."""
    return torch.div(hi, period, rounding_mode="floor") * period >= lo


class Layout:
    """Base: subclasses set `block_size` and define `block_map` and `rule`."""

    block_size: int
    # True when the block map is exactly the blocks holding a pair the rule allows, so that the rule alone
    # decides each pair (the flex kernel's mask then skips the block map lookup).
    rule_decides: ClassVar[bool] = False

    def block_map(self, query_blocks: int, key_blocks: int) -> torch.Tensor:
        """Bool (query_blocks, key_blocks): which key blocks each query block may touch (not causal)."""
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

    def _band(self, query_blocks: int, key_blocks: int, window: int) -> torch.Tensor:
        """Blocks holding a pair with |i - j| < window."""
        lo, hi = self._block_offsets(query_blocks, key_blocks)
        return (lo <= window - 1) & (hi >= -(window - 1))


def causal_blocks(query_blocks: int, key_blocks: int) -> torch.Tensor:
    """Block pairs holding at least one pair j <= i (equal block sizes: key block <= query block)."""
    return torch.arange(key_blocks)[None, :] <= torch.arange(query_blocks)[:, None]


def blocks_for(seq: int, block_size: int) -> int:
    return max(1, math.ceil(seq / block_size))


def attended_blocks(layout: Layout, seq_q: int, seq_k: int, causal: bool) -> torch.Tensor:
    """Bool (query_blocks, key_blocks): the block map, with causality when causal."""
    query_blocks, key_blocks = blocks_for(seq_q, layout.block_size), blocks_for(seq_k, layout.block_size)
    blocks = layout.block_map(query_blocks, key_blocks)
    return blocks & causal_blocks(query_blocks, key_blocks) if causal else blocks


def pairs(layout: Layout | None, blocks: torch.Tensor | None, i: torch.Tensor, j: torch.Tensor,
          causal: bool) -> torch.Tensor:
    """Bool, broadcast from query positions i and key positions j: whether the layout attends (i, j).

    `blocks` is `attended_blocks` for the lengths at hand, or None to skip the block map (no layout, or a
    layout whose rule decides). `dense`, `tiles` and the flex kernel's mask all call this one function."""
    terms = [
        blocks[i // layout.block_size, j // layout.block_size] if blocks is not None else None,
        layout.rule(i, j) if layout is not None else None,
        j <= i if causal else None,
    ]
    allowed = torch.ones_like(i == j)
    for term in terms:
        if term is not None:
            allowed = allowed & term
    return allowed


def dense(layout: Layout, seq_q: int, seq_k: int, causal: bool, device: torch.device | str = "cpu") -> torch.Tensor:
    """Bool (seq_q, seq_k): the pairs the layout attends, expanded to elements (O(seq_q * seq_k) booleans,
    built a slab of rows at a time so that the rule's integer intermediates stay small)."""
    blocks = attended_blocks(layout, seq_q, seq_k, causal).to(device)
    allowed = torch.empty(seq_q, seq_k, dtype=torch.bool, device=device)
    j = torch.arange(seq_k, device=device)[None, :]
    rows = max(1, DENSE_SLAB // max(1, seq_k))
    for start in range(0, seq_q, rows):
        i = torch.arange(start, min(start + rows, seq_q), device=device)[:, None]
        allowed[start : start + rows] = pairs(layout, blocks, i, j, causal)
    return allowed


@dataclass(frozen=True)
class Tiles:
    """A layout cut into square tiles of `size` positions, the blocks of a fused kernel (FlexAttention's
    BlockMask): a tile is skipped, computed with the element mask (partial) or without it (full)."""

    size: int
    partial: torch.Tensor  # (query_tiles, key_tiles) bool: holds attended pairs, and unattended or padding ones
    full: torch.Tensor  # (query_tiles, key_tiles) bool: every pair of the tile is attended
    attended: int  # pairs attended in all (what a benchmark's FLOP count is based on)


def _overlaps(tiles: int, blocks: int, size: int, block_size: int, device: torch.device) -> torch.Tensor:
    """Float (tiles, blocks): 1 where tile T and layout block I share a position."""
    first = torch.arange(blocks, device=device) * block_size
    lo, hi = first // size, (first + block_size - 1) // size  # the tiles block I spans
    t = torch.arange(tiles, device=device)[:, None]
    return ((t >= lo) & (t <= hi)).float()


def tiles(layout: Layout | None, seq_q: int, seq_k: int, causal: bool, size: int,
          device: torch.device | str = "cpu") -> Tiles:
    """Classify the size x size tiles of the (seq_q, seq_k) pairs; `layout` None attends every pair.

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
        candidates = torch.ones(query_tiles, key_tiles, dtype=torch.bool, device=device)
        if causal:
            candidates &= causal_blocks(query_tiles, key_tiles).to(device)
    else:
        b = layout.block_size
        blocks = attended_blocks(layout, seq_q, seq_k, causal).to(device)
        rows = _overlaps(query_tiles, blocks.shape[0], size, b, device)
        columns = _overlaps(key_tiles, blocks.shape[1], size, b, device)
        candidates = (rows @ blocks.float() @ columns.T) > 0  # a tile meets an allowed block
    tile_rows, tile_columns = candidates.nonzero(as_tuple=True)
    counts = torch.zeros(len(tile_rows), dtype=torch.long, device=device)
    offsets = torch.arange(size, device=device)
    per_slab = max(1, DENSE_SLAB // (size * size))
    for start in range(0, len(tile_rows), per_slab):
        i = (tile_rows[start : start + per_slab, None] * size + offsets)[:, :, None]  # (tiles, size, 1)
        j = (tile_columns[start : start + per_slab, None] * size + offsets)[:, None, :]  # (tiles, 1, size)
        inside = (i < seq_q) & (j < seq_k)
        attended = pairs(layout, blocks, i.clamp(max=seq_q - 1), j.clamp(max=seq_k - 1), causal) & inside
        counts[start : start + per_slab] = attended.sum(dim=(1, 2))
    partial = torch.zeros(query_tiles, key_tiles, dtype=torch.bool, device=device)
    full = torch.zeros_like(partial)
    full[tile_rows, tile_columns] = counts == size * size
    partial[tile_rows, tile_columns] = (counts > 0) & (counts < size * size)
    return Tiles(size, partial, full, int(counts.sum()))


@dataclass(frozen=True)
class Chunk:
    """Query blocks processed together by the blocked kernel, each with its key blocks."""

    query_blocks: torch.Tensor  # (rows,) long
    key_blocks: torch.Tensor  # (rows, width) long; padding entries point at block 0 and are masked
    allowed: torch.Tensor  # (rows, block_size, width * block_size) bool: rule, causal, real blocks and keys


@dataclass(frozen=True)
class Plan:
    """A layout cut into chunks for given lengths; chunk outputs concatenate in sorted-row order."""

    query_blocks: int
    key_blocks: int
    chunks: tuple[Chunk, ...]
    inverse: torch.Tensor  # position of each query block in the concatenated chunk outputs


def plan(
    layout: Layout, seq_q: int, seq_k: int, causal: bool, device: torch.device, max_pairs: int
) -> Plan:
    """Cut the layout into chunks of query blocks holding at most `max_pairs` gathered pairs each.

    Query blocks are sorted by their number of key blocks, so a chunk pads its rows to a width that
    its rows nearly share: a global row that sees every key block does not widen the others.
    """
    b = layout.block_size
    query_blocks, key_blocks = blocks_for(seq_q, b), blocks_for(seq_k, b)
    blocks = layout.block_map(query_blocks, key_blocks)
    if causal:
        blocks = blocks & causal_blocks(query_blocks, key_blocks)
    counts = blocks.sum(dim=1)
    order = torch.argsort(counts, stable=True)
    offsets = torch.arange(b)
    widths = counts[order].clamp(min=1).tolist()  # ascending: the last row of a chunk is its widest
    chunks, start = [], 0
    while start < query_blocks:
        stop = start + 1
        while stop < query_blocks and (stop + 1 - start) * widths[stop] * b * b <= max_pairs:
            stop += 1
        rows = order[start:stop]
        width = int(counts[rows].max().clamp(min=1))
        # key blocks of each row, allowed ones first (stable sort keeps them in increasing order)
        present, columns = torch.sort(blocks[rows].int(), dim=1, descending=True, stable=True)
        present, columns = present[:, :width].bool(), columns[:, :width]
        i = (rows[:, None] * b + offsets)[:, :, None]  # (rows, b, 1) query positions
        j = (columns[:, :, None] * b + offsets).flatten(1)[:, None, :]  # (rows, 1, width * b) key positions
        allowed = present.repeat_interleave(b, dim=1)[:, None, :] & (j < seq_k)
        rule = layout.rule(i, j)
        if rule is not None:
            allowed = allowed & rule
        if causal:
            allowed = allowed & (j <= i)
        chunks.append(Chunk(rows.to(device), columns.to(device), allowed.to(device)))
        start = stop
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(query_blocks)
    return Plan(query_blocks, key_blocks, tuple(chunks), inverse.to(device))


def _power_of_two_at_most(value: float, low: int, high: int) -> int:
    """The largest power of two <= value, clamped to [low, high]."""
    value = max(value, 1)
    return min(high, max(low, 2 ** math.floor(math.log2(value))))


@dataclass(frozen=True)
class Local(Layout):
    """|i - j| < window."""

    rule_decides = True

    window: int

    @property
    def block_size(self) -> int:
        # Half the window: a causal query block then gathers about 1.5 windows of keys, not 2. At window
        # 256 and n = 16384 on CPU, 128 measured faster than 64 or 32 (fewer, larger fused calls).
        return _power_of_two_at_most(self.window / 2, 16, 128)

    def block_map(self, query_blocks: int, key_blocks: int) -> torch.Tensor:
        return self._band(query_blocks, key_blocks, self.window)

    def rule(self, i, j):
        return (i - j).abs() < self.window


@dataclass(frozen=True)
class Strided(Layout):
    """Child et al. 2019: |i - j| < stride, or i - j a multiple of stride."""

    rule_decides = True

    stride: int

    @property
    def block_size(self) -> int:
        return _power_of_two_at_most(self.stride / 4, 8, 64)

    def block_map(self, query_blocks: int, key_blocks: int) -> torch.Tensor:
        lo, hi = self._block_offsets(query_blocks, key_blocks)
        return self._band(query_blocks, key_blocks, self.stride) | _covers(lo, hi, self.stride)

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

    def block_map(self, query_blocks: int, key_blocks: int) -> torch.Tensor:
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
class Longformer(Layout):
    """Beltagy et al. 2020: |i - j| < window, plus the first `num_global` positions attend to and are
    attended by every position."""

    rule_decides = True

    window: int
    num_global: int

    @property
    def block_size(self) -> int:
        return _power_of_two_at_most(self.window / 2, 16, 128)

    def block_map(self, query_blocks: int, key_blocks: int) -> torch.Tensor:
        b = self.block_size
        global_rows = (torch.arange(query_blocks) * b < self.num_global)[:, None]
        global_columns = (torch.arange(key_blocks) * b < self.num_global)[None, :]
        return self._band(query_blocks, key_blocks, self.window) | global_rows | global_columns

    def rule(self, i, j):
        return ((i - j).abs() < self.window) | (i < self.num_global) | (j < self.num_global)


@dataclass(frozen=True)
class BigBird(Layout):
    """Zaheer et al. 2020, at block level: neighbouring blocks |I - J| <= 1, global blocks (the first
    `num_global_blocks` rows and columns), and `num_random_blocks` random key blocks per query block."""

    block_size: int
    num_global_blocks: int
    num_random_blocks: int
    seed: int

    def block_map(self, query_blocks: int, key_blocks: int) -> torch.Tensor:
        rows = torch.arange(query_blocks)[:, None]
        columns = torch.arange(key_blocks)[None, :]
        blocks = ((rows - columns).abs() <= 1) | (rows < self.num_global_blocks) | (columns < self.num_global_blocks)
        if self.num_random_blocks:
            # Random draws depend on the seed and the block counts only: the same seed, the same layout.
            generator = torch.Generator().manual_seed(self.seed)
            scores = torch.rand(query_blocks, key_blocks, generator=generator)
            chosen = scores.argsort(dim=1)[:, : min(self.num_random_blocks, key_blocks)]
            blocks = blocks.scatter(1, chosen, True)
        return blocks
