"""Additive attention (Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align
and Translate"), one scorer per head.

    e_ij = w^T tanh(W_q q_i + W_k k_j),   softmax(e) v

W_q, W_k: (hidden_dim, head_dim) and w: (hidden_dim,) per head. No sqrt(d) factor: the tanh bounds
each term. Cost: O(n^2 hidden_dim) time, against O(n^2 d) for a dot product, and elementwise work
rather than a matrix product: each of the n^2 hidden_dim terms is evaluated once forward and once
more when training.

Kernels: `additive` (`variants.kernels.additive`, what `auto` picks on any device) computes the
logits and their gradients in closed form: tanh(a + b) from exp(-2a) and exp(2b), taken once per
call, so a term costs an add and a division instead of a tanh, and its backward pass recomputes a
chunk's terms and reduces them over the keys, the queries and the pairs, keeping nothing per pair.
`chunked` runs `logits` below through autograd (query chunks under activation checkpointing, each
chunk's tanh kept for its backward): several times slower, it stays as the naive twin and for
comparison, `make speed ARGS="--variants additive --kernels additive chunked"`.

Memory: the (seq_q, seq_k, hidden_dim) intermediate is never materialised for the whole sequence.
The additive kernel holds at most 2^21 of its terms at once (8 MiB in float32; one query's, if
more), the chunked kernel 2^22, so the peak is O(batch * heads * n * (head_dim + hidden_dim)) for
the projections plus a small multiple of a chunk, whatever n.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from common.options import option, require
from variants.base import Attention, NormaliserOptions, Range
from variants.registry import register


@register("additive")
class Additive(Attention):
    """Bahdanau additive scoring per head, w^T tanh(W_q q + W_k k), in closed form on the additive kernel."""

    search_space = {"hidden_dim": Range(8, "head_dim*4", log=True)}

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        hidden_dim: int | None = option(None, "width of the tanh layer; None means head_dim", tag="h")

        def __post_init__(self) -> None:
            require(self.hidden_dim is None or self.hidden_dim >= 1, "hidden_dim", self.hidden_dim,
                    "None or an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.options = self.resolved_options(options, head_dim=self.head_dim)
        hidden = self.options.hidden_dim
        # Same initial scale as nn.Linear: unit-variance inputs give O(1) pre-activations.
        # The matrices of its linear maps, decayed like a linear layer's weight (the training loop reads this).
        self.linear_weights = ("query_proj", "key_proj", "score_vector")
        self.query_proj = nn.Parameter(torch.randn(self.num_heads, hidden, self.head_dim) / math.sqrt(self.head_dim))
        self.key_proj = nn.Parameter(torch.randn(self.num_heads, hidden, self.head_dim) / math.sqrt(self.head_dim))
        self.score_vector = nn.Parameter(torch.randn(self.num_heads, hidden) / math.sqrt(hidden))

    @classmethod
    def resolved_options(cls, options: Options, *, head_dim: int) -> Options:
        return dataclasses.replace(options, hidden_dim=options.hidden_dim or head_dim)

    @property
    def pair_width(self) -> int:
        return self.options.hidden_dim

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = torch.einsum("bhnd,hed->bhne", q, self.query_proj)  # (B, H, seq_q, hidden)
        k = torch.einsum("bhnd,hed->bhne", k, self.key_proj)  # (B, H, seq_k, hidden)
        return q, k

    def additive_scorer(self) -> torch.Tensor:
        return self.score_vector  # (H, hidden): the additive kernel's w

    def logits(self, q, k, q_pos, k_pos, causal) -> torch.Tensor:  # the same logits, pair by pair
        pairs = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))  # (B, H, seq_q, seq_k, hidden)
        return torch.einsum("bhqke,he->bhqk", pairs, self.score_vector)
