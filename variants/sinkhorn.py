"""Sparse Sinkhorn attention (Tay et al. 2020, "Sparse Sinkhorn Attention", ICML, section 3).

The sequence is cut into N blocks of `block_size` (the last may be shorter). A meta sorting network scores,
for each block I, every block J it could be sorted to: with x_I the sum of block I's keys,

    R_I = relu(W_2 relu(W_1 x_I + b_1) + b_2)                  (two layers, W_2 with ceil(max_len / block_size)
                                                                 outputs, the first N of them read)

and Sinkhorn balancing turns R into a soft permutation S: S^0 = exp(R / temperature), `sinkhorn_iters` rounds
of row then column normalisation (F_c(F_r(.)), in log space), then one more row normalisation so that each row
of S sums to 1. Block I's sorted block is the mixture sum_J S_IJ K_J of the key blocks (values likewise), and
every query of block I attends, in one softmax, the keys of its own block and those of its sorted block:

    (w, w') = softmax(q_i . [K_I ; sum_J S_IJ K_J] / sqrt(d)),    out_i = sum_t (w_t v_It + w'_t sum_J S_IJ v_Jt)

Position t of a sorted block mixes the blocks that have a key at position t (a shorter last block lacks
the end), renormalised over them. A padded key is absent as a position past the end is: left out of the
block sums, the sorted blocks and the own block (the module hands its kernels logits that know the padding,
which the `logits` hook is not given). Since S is soft, every key gets some weight: the weights are dense,
written per key as W_ij = w_t [j in block I] + w'_t S_IJ / (the renormalisation) for key j at position t of
block J, and handed to the kernels as log W, whose softmax is W again (each row sums to 1).

Causal (the paper's causal Sinkhorn balancing): block I may be sorted only to earlier blocks J < I (S_IJ = 0
otherwise, so block 0 has no sorted block), rows are normalised over those, and columns over the rows up to I
(the present and the past), so that no block's S depends on a later block; the sorting network reads each
block's first key instead of its sum (the block's later keys are in its first query's future); within its
own block a query sees the keys up to itself.

Cost: O(n^2) here, the dense weights on the reference and chunked kernels; the paper's blocked form computes
the same output in O(n block_size + N^2).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange

from common.options import option, require
from variants import kernels
from variants.base import Attention, Range
from variants.normalisers import softmax
from variants.per_head import PerHeadLinear
from variants.registry import register

FILL = -1e30  # a log value whose exp is 0, kept finite so that rows with nothing allowed stay NaN-free


def sinkhorn(scores: torch.Tensor, iterations: int, causal: bool) -> torch.Tensor:
    """S (..., N, N) from sorting scores (..., N, N), already divided by the temperature: `iterations` rounds of
    row then column normalisation of exp(scores), then a row normalisation, in log space. Causal: only J < I is
    allowed, and an entry's column is normalised over the rows up to its own; block 0's row, with nothing
    allowed, is all 0."""
    if not causal:
        for _ in range(iterations):
            scores = scores - scores.logsumexp(dim=-1, keepdim=True)
            scores = scores - scores.logsumexp(dim=-2, keepdim=True)
        return (scores - scores.logsumexp(dim=-1, keepdim=True)).exp()
    blocks = scores.shape[-1]
    refused = torch.ones(blocks, blocks, dtype=torch.bool, device=scores.device).triu()  # J >= I
    log_s = scores.masked_fill(refused, FILL)
    for _ in range(iterations):
        log_s = (log_s - log_s.logsumexp(dim=-1, keepdim=True)).masked_fill(refused, FILL)
        log_s = (log_s - log_s.logcumsumexp(dim=-2)).masked_fill(refused, FILL)  # rows up to the entry's own
    return (log_s - log_s.logsumexp(dim=-1, keepdim=True)).exp().masked_fill(refused, 0.0)


def key_blocks(k: torch.Tensor, block_size: int,
               key_padding_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """k (B, H, n, d) cut into blocks, (B, H, N, block_size, d), with zeros past the end and at padded keys, and
    which of their positions hold a real key, (B or 1, 1, N, block_size)."""
    blocks = math.ceil(k.shape[2] / block_size)
    real = torch.arange(blocks * block_size, device=k.device)[None] < k.shape[2]  # (1, N * block_size)
    if key_padding_mask is not None:
        real = real & F.pad(key_padding_mask, (0, blocks * block_size - k.shape[2]))
    real = rearrange(real, "b (n t) -> b 1 n t", t=block_size)
    padded = rearrange(F.pad(k, (0, 0, 0, blocks * block_size - k.shape[2])), "b h (n t) d -> b h n t d", t=block_size)
    return padded * real[..., None], real


@register("sinkhorn")
class Sinkhorn(Attention):
    """Learned block sorting: each query block attends its own block and a soft-sorted mixture of blocks."""

    layout_depends_on_input = True
    position_indexed = True  # the sorting network scores each block J by its own output
    order_aware = True  # a query sees its own block
    search_space = {
        "block_size": Range(2, "seq_len", log=True),
        "sinkhorn_iters": Range(0, 10),
        "temperature": Range(0.25, 2.0, log=True),
    }
    approximation = ("The sorting network reads block sums of each head's keys (the paper's of the layer input), "
                     "without Gumbel noise, and a last row normalisation makes every sorted block a convex "
                     "mixture of blocks.")

    @dataclass(frozen=True)
    class Options:
        block_size: int = option(16, "positions per block", tag="b")
        sinkhorn_iters: int = option(7, "rounds of row and column normalisation before the last row one", tag="it")
        temperature: float = option(0.75, "the sorting scores are divided by it before Sinkhorn balancing", tag="t")

        def __post_init__(self) -> None:
            require(self.block_size >= 1, "block_size", self.block_size, "an integer >= 1")
            require(self.sinkhorn_iters >= 0, "sinkhorn_iters", self.sinkhorn_iters, "an integer >= 0")
            require(self.temperature > 0, "temperature", self.temperature, "a number > 0")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if self.max_len is None:
            raise ValueError("Variant 'sinkhorn' scores every block its sorting network may sort to, as many as "
                             "the longest sequence has, so it needs max_len; got max_len=None, accepted: "
                             "variants.create(..., max_len=an integer >= 1).")
        self.sort_hidden = PerHeadLinear(self.num_heads, self.head_dim, self.head_dim)
        self.sort_scores = PerHeadLinear(self.num_heads, self.head_dim, math.ceil(self.max_len / options.block_size))

    @property
    def pair_width(self) -> int:
        return 4  # the weights per key, their log, and the mixture weights beside them

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if q.shape[2] != k.shape[2]:
            raise ValueError(f"Variant 'sinkhorn' sorts the blocks of one sequence (self-attention), so it needs as "
                             f"many keys as queries; got {q.shape[2]} queries and {k.shape[2]} keys, accepted: "
                             "equal lengths.")
        if k.shape[2] > self.max_len:
            raise ValueError(f"Variant 'sinkhorn' was built for sequences of at most max_len={self.max_len}; got "
                             f"{k.shape[2]} positions, accepted: at most {self.max_len}.")
        return q, k

    def kernel_call(self, q, k, v, causal, key_padding_mask) -> kernels.Call:
        """The base call, with logits that know the padding: a padded key is absent from the block sums and the
        sorted blocks, as a position past the end is (the `logits` hook itself is not given the padding)."""
        call = super().kernel_call(q, k, v, causal, key_padding_mask)
        return dataclasses.replace(call, logits=functools.partial(self.logits, key_padding_mask=key_padding_mask))

    def sorting(self, blocks: torch.Tensor, causal: bool) -> torch.Tensor:
        """S (B, H, N, N) from the key blocks (B, H, N, block_size, d): row I, the weights of the blocks mixed into
        block I's sorted block."""
        summaries = blocks[:, :, :, 0] if causal else blocks.sum(dim=3)  # (B, H, N, d)
        scores = F.relu(self.sort_scores(F.relu(self.sort_hidden(summaries))))[..., : blocks.shape[2]]
        return sinkhorn(scores / self.options.temperature, self.options.sinkhorn_iters, causal)

    def mixture(self, k: torch.Tensor, causal: bool, key_padding_mask: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The key blocks (B, H, N, size, d), which of their positions are real keys (B or 1, 1, N, size), the
        mixture (B, H, I, J, t) whose entry is block J's share of position t of block I's sorted block, and the
        cover (B, H, I, 1, t), 0 where that position is empty (no sorted-to block has a key there)."""
        blocks, real = key_blocks(k, self.options.block_size, key_padding_mask)
        mix = self.sorting(blocks, causal)[..., None] * real[:, :, None]
        cover = mix.sum(dim=3, keepdim=True)
        return blocks, real, mix / cover.clamp_min(torch.finfo(mix.dtype).tiny), cover

    def example_layout(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool, head: int = 0) -> torch.Tensor:
        """On the example whose keys (heads, seq, head_dim) are k: 1 for the keys of a query's own block (up to
        itself when causal), and for a key of another block that block's share of its position in the query's
        sorted block (the learned soft sorting, S_IJ renormalised over the blocks that have that position)."""
        size, seq = self.options.block_size, k.shape[1]
        _, _, mix, _ = self.mixture(k[None], causal, None)  # (1, H, I, J, t)
        positions = torch.arange(seq, device=k.device)
        own = self.layout(seq, seq, causal=causal, head=head).to(k.device) & (
            positions[:, None] // size == positions[None, :] // size)
        from_sorted = mix[0, head][positions // size].flatten(-2)[:, :seq]  # (seq_q, N * size) -> the keys
        return torch.where(own, torch.ones_like(from_sorted), from_sorted).clamp(max=1)

    def weights(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, causal: bool,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """W (B, H, len(q_pos), seq_k): each query's weight on each key, through its own block and its sorted one."""
        size = self.options.block_size
        blocks, real, mix, cover = self.mixture(k, causal, key_padding_mask)
        sorted_keys = torch.einsum("bhijt,bhjtd->bhitd", mix, blocks)
        rows, within = torch.div(q_pos, size, rounding_mode="floor"), q_pos % size
        local = real[:, :, rows]  # (B or 1, 1, seq_q, size): the real keys of each query's block
        if causal:
            local = local & (torch.arange(size, device=q.device) <= within[:, None])
        scores = torch.cat([torch.einsum("bhqd,bhqtd->bhqt", q, blocks[:, :, rows]),
                            torch.einsum("bhqd,bhqtd->bhqt", q, sorted_keys[:, :, rows])], dim=-1)
        seen = torch.cat([local.expand(*scores.shape[:2], -1, -1), cover[:, :, rows, 0] > 0], dim=-1)
        own, from_sorted = softmax(scores * self.logit_scale(), seen).split(size, dim=-1)  # (B, H, seq_q, size)
        own_block = F.one_hot(rows, blocks.shape[2]).to(q.dtype)  # (seq_q, N)
        per_key = own[..., None, :] * own_block[:, :, None] + from_sorted[..., None, :] * mix[:, :, rows]
        return per_key.flatten(-2)[..., : k.shape[2]]  # (B, H, seq_q, N * size) -> the keys

    def logits(self, q, k, q_pos, k_pos, causal, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """log W, floored at the smallest normal number so that every key the kernel may see has a finite logit."""
        return self.weights(q, k, q_pos, causal, key_padding_mask).clamp_min(torch.finfo(q.dtype).tiny).log()
