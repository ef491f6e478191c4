"""Reformer's LSH attention (Kitaev et al. 2020, "Reformer: The Efficient Transformer", ICLR, section 2).

Shared query-key attention: the keys are the queries scaled to unit length, k_j = q_j / ||q_j|| (the k the
module is given is not read), and logits_ij = q_i . k_j / sqrt(d). Queries and keys are then the same
positions, so the module takes equal lengths only.

Each of `num_hashes` rounds r hashes every position with a random rotation R_r (d x num_buckets/2, drawn per
head, per layer and per round from the run's seed) into one of `num_buckets` buckets,

    h_r(x) = argmax([x R_r ; -x R_r])      (angular LSH; the same bucket for q_j and k_j)

sorts the positions by (bucket, position) and cuts that order into chunks of `chunk_size`; with s_r(i) the
place of i in the sorted order, query i may attend key j in round r when

    h_r(j) = h_r(i)   and   floor(s_r(i) / chunk_size) - 1 <= floor(s_r(j) / chunk_size) <= floor(s_r(i) / chunk_size),

i.e. its own bucket, in its own chunk or the one before. The rounds are combined as the paper combines them:
their softmaxes weighted by their log-sum-exps, with the log N_ij term that counts a pair attended in several
rounds once, which is the softmax over the union of the rounds' pairs, each pair once. A query attends itself
only when it has nothing else to attend (the paper subtracts 1e5 from the logit of i = j, which gives its own
key a weight of exactly 0 in floating point beside any other key). Causal: keys j > i are masked, as in the
paper; which earlier keys a query sees still depends on the later positions' buckets, through where the
chunks are cut, so the causal form is not prefix-consistent (`prefix_consistent = False`: a later token changes
earlier outputs) and a run's config takes Reformer bidirectional only, on tasks that allow it.

Here the union is a mask on the n x n logits, on the reference and chunked kernels: O(n^2) time and memory,
where the paper's sorted chunks compute the same weights in O(n chunk_size num_hashes). Pairs outside it get
the finite logit -1e9 (finite masks, as in the paper's code), so that a query whose own key and bucket
neighbours are all padded spreads its weight evenly over the keys it may see rather than giving NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from common.options import option, require
from variants import layouts
from variants.base import Attention, Choice, Range
from variants.registry import register

OUTSIDE = 1e9  # minus the logit of the pairs no round attends
SELF = 1e5  # subtracted from the logit of a query's own key (the paper's m_ii)


def lsh_buckets(keys: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """Buckets (B, H, rounds, seq) of keys (B, H, seq, d) under rotations (H, rounds, d, num_buckets / 2):
    argmax over [x R ; -x R]."""
    rotated = torch.einsum("bhnd,hrde->bhrne", keys, rotations.to(keys.dtype))
    return torch.cat([rotated, -rotated], dim=-1).argmax(dim=-1)


def lsh_attended(buckets: torch.Tensor, chunk_size: int, q_pos: torch.Tensor) -> torch.Tensor:
    """Bool (B, H, len(q_pos), seq): the pairs some round attends (same bucket, own chunk or the one before),
    for the queries at q_pos, from the buckets (B, H, rounds, seq) of every position."""
    seq = buckets.shape[-1]
    positions = torch.arange(seq, device=buckets.device)
    attended = torch.zeros(*buckets.shape[:2], len(q_pos), seq, dtype=torch.bool, device=buckets.device)
    for bucket in buckets.unbind(dim=2):  # (B, H, seq), one round at a time: one n x n mask in memory
        order = torch.argsort(bucket * seq + positions, dim=-1)  # sorted by bucket, then position
        chunk = torch.argsort(order, dim=-1) // chunk_size  # (B, H, seq): the chunk of each position
        query_chunk = chunk[..., q_pos, None]
        same_bucket = bucket[..., q_pos, None] == bucket[..., None, :]
        attended |= same_bucket & (chunk[..., None, :] <= query_chunk) & (chunk[..., None, :] >= query_chunk - 1)
    return attended


@register("reformer")
class Reformer(Attention):
    """LSH attention with shared query-key vectors: each query sees its bucket in its chunk and the one before."""

    search_space = {
        "num_hashes": Range(1, 8, log=True),
        "num_buckets": Choice((2, 4, 8, 16, 32, 64)),
        "chunk_size": Range(4, "seq_len", log=True),
    }
    layout_depends_on_input = True
    prefix_consistent = False  # later buckets move where the chunks are cut (the module docstring)
    approximation = ("Approximates softmax attention by the keys that share a query's LSH bucket; the random "
                     "rotations are drawn once per layer and head from the run's seed and kept, where the paper's "
                     "code draws new ones at every forward pass; its causal form, as in the paper, lets a later "
                     "token change which keys an earlier query sees (where the sorted chunks are cut), so runs "
                     "take it bidirectional only.")

    @dataclass(frozen=True)
    class Options:
        num_hashes: int = option(2, "rounds of hashing, each with its own rotation", tag="h")
        num_buckets: int = option(8, "buckets per round (even: argmax over [xR ; -xR])", tag="b")
        chunk_size: int = option(32, "length of the chunks the sorted order is cut into", tag="c")

        def __post_init__(self) -> None:
            require(self.num_hashes >= 1, "num_hashes", self.num_hashes, "an integer >= 1")
            require(self.num_buckets >= 2 and self.num_buckets % 2 == 0, "num_buckets", self.num_buckets,
                    "an even integer >= 2")
            require(self.chunk_size >= 1, "chunk_size", self.chunk_size, "an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        generator = torch.Generator().manual_seed(layouts.derived_seed(self.run_seed, self.layer_index))
        rotations = torch.randn(self.num_heads, options.num_hashes, self.head_dim, options.num_buckets // 2,
                                generator=generator)
        # In the state dict, so that a resumed run hashes as the run did (drawn again, they would be the same).
        self.register_buffer("rotations", rotations)  # (H, rounds, d, num_buckets / 2)

    @property
    def pair_width(self) -> int:
        return 3  # the logits, and a round's mask beside the union

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(q, q / ||q||): the keys are the queries, normalised."""
        if q.shape[2] != k.shape[2]:
            raise ValueError(f"Variant 'reformer' shares queries and keys (self-attention), so it needs as many "
                             f"keys as queries; got {q.shape[2]} queries and {k.shape[2]} keys, accepted: equal "
                             "lengths.")
        return q, F.normalize(q, dim=-1)

    def logits(self, q, k, q_pos, k_pos, causal) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.logit_scale()  # (B, H, seq_q, seq_k)
        attended = lsh_attended(lsh_buckets(k, self.rotations), self.options.chunk_size, q_pos)
        own_key = (q_pos[:, None] == k_pos[None, :]).to(scores.dtype)
        return (scores - SELF * own_key).masked_fill(~attended, -OUTSIDE)

    def example_layout(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool, head: int = 0) -> torch.Tensor:
        """The pairs `head` attended on the example whose keys (heads, seq, head_dim) are k, the queries
        normalised: its buckets, chunks and the rule for its own key (attended only when nothing else is)."""
        positions = torch.arange(k.shape[1], device=k.device)
        attended = lsh_attended(lsh_buckets(k[None], self.rotations), self.options.chunk_size, positions)[0, head]
        attended = attended & self.layout(len(positions), len(positions), causal=causal, head=head).to(k.device)
        own = torch.eye(*attended.shape, dtype=torch.bool, device=k.device)
        others = attended & ~own
        return torch.where(others.any(dim=-1, keepdim=True), others, attended & own).to(q.dtype)
