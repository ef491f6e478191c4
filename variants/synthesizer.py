"""Synthesizer (Tay et al. 2021, "Synthesizer: Rethinking Self-Attention in Transformer Models", ICML):
attention weights synthesised without query-key dot products, per head.

    Y = softmax(B) V,   B (seq_q x seq_k) from one of four synthesisers (l = max_len, the longest sequence):

- `dense`: each token's row of logits over the positions 0..l-1 from that token alone, by a two-layer
  MLP, B_i = W_2 relu(W_1 x_i + b_1) + b_2 with W_1 (d x d), W_2 (l x d). Here x_i is the head's query vector.
- `random`: B = R, an l x l matrix per head, initialised at random and learned, or kept as drawn
  (`fixed`: the paper's Fixed Random Synthesizer).
- `factorized_dense`: the hidden layer h_i = relu(W_1 x_i + b_1) gives a = W_A h_i + b_A (length
  `factor`) and c = W_C h_i + b_C (length ceil(l / factor)); B_i = H_A(a) * H_C(c), H_A repeating each value of a
  over a run of len(c) positions and H_C tiling c over the len(a) runs, so that values differ within a run:
  B_i[u len(c) + w] = a_u c_w, the outer product a c^T read row by row (its first l entries).
- `factorized_random`: B = R_1 R_2^T, R_1 and R_2 (l x `rank`) per head, learned or `fixed`.

Rows and columns are the positions of the call's queries and keys: B[i, j] for i < seq_q, j < seq_k, both at
most l. Causal: the future is masked (j > i), as for any variant. Cost: O(n l d) for the dense forms (the
logits of each token over every position), O(l^2) parameters for `random`, O(l rank) for `factorized_random`;
the weights are dense n x n, on the reference and chunked kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from common.options import fill_choice_defaults, option, require
from variants.base import Attention, Choice, Range
from variants.per_head import PerHeadLinear
from variants.registry import register

KINDS = ("dense", "random", "factorized_dense", "factorized_random")
# The options each kind reads, with their defaults (`factor` None: ceil(sqrt(max_len))).
KIND_DEFAULTS = {
    "dense": {},
    "random": {"fixed": False},
    "factorized_dense": {"factor": None},
    "factorized_random": {"rank": 32, "fixed": False},
}


@register("synthesizer")
class Synthesizer(Attention):
    """Synthesised weights: softmax(B) V with B from an MLP of each query (dense) or a learned table (random)."""

    search_space = {
        "kind": Choice(KINDS),
        "rank": Range(2, 64, log=True, when=("kind", ("factorized_random",))),
    }
    position_indexed = True  # a logit per key position (and per query position, for the random tables)
    order_aware = True
    approximation = ("The dense forms synthesise each row from the head's query vector, a linear map of the "
                     "token the paper's MLP reads.")

    @dataclass(frozen=True)
    class Options:
        kind: Literal["dense", "random", "factorized_dense", "factorized_random"] = option(
            "dense", "which synthesiser: dense (an MLP of each query), random (a table per head), or their "
                     "factorised forms", tag="")
        fixed: bool | None = option(None, "random, factorized_random: keep the random table as drawn, never "
                                          "trained (default False)", tag="fixed")
        rank: int | None = option(None, "factorized_random: the rank k of R_1 R_2^T (default 32)", tag="k")
        factor: int | None = option(None, "factorized_dense: the length a of the first factor (default "
                                          "ceil(sqrt(max_len)); the second has ceil(max_len / a))", tag="a")

        def __post_init__(self) -> None:
            fill_choice_defaults(self, "kind", KIND_DEFAULTS)
            for name in ("rank", "factor"):
                value = getattr(self, name)
                require(value is None or value >= 1, name, value, "an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if self.max_len is None:
            raise ValueError("Variant 'synthesizer' synthesises logits over the positions up to the longest "
                             "sequence, so it needs max_len; got max_len=None, accepted: "
                             "variants.create(..., max_len=an integer >= 1).")
        length, dim, heads = self.max_len, self.head_dim, self.num_heads
        if options.kind in ("dense", "factorized_dense"):
            self.hidden = PerHeadLinear(heads, dim, dim)
        if options.kind == "dense":
            self.to_positions = PerHeadLinear(heads, dim, length)
        elif options.kind == "factorized_dense":
            first = options.factor or math.ceil(math.sqrt(length))
            self.to_first = PerHeadLinear(heads, dim, first)
            self.to_second = PerHeadLinear(heads, dim, math.ceil(length / first))
        elif options.kind == "random":
            self._table("table", torch.randn(heads, length, length))
        else:  # the product of two (l x rank) tables has entries of variance 1, as `random`'s
            scale = options.rank ** -0.25
            self._table("left", torch.randn(heads, length, options.rank) * scale)
            self._table("right", torch.randn(heads, length, options.rank) * scale)

    def _table(self, name: str, values: torch.Tensor) -> None:
        """A learned table, or with `fixed` a buffer the state dict keeps (so a resumed run has the same one)."""
        if self.options.fixed:
            self.register_buffer(name, values)
        else:
            setattr(self, name, nn.Parameter(values))

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        longest = max(q.shape[2], k.shape[2])
        if longest > self.max_len:
            raise ValueError(f"Variant 'synthesizer' synthesises logits over at most max_len={self.max_len} "
                             f"positions; got {q.shape[2]} queries and {k.shape[2]} keys, accepted: sequences of "
                             f"at most {self.max_len}.")
        return q, k

    def logits(self, q, k, q_pos, k_pos, causal) -> torch.Tensor:
        """B (batch, heads, len(q_pos), len(k_pos)); the dense forms read the queries only, the random ones neither."""
        kind = self.options.kind
        if kind == "dense":
            return self.to_positions(F.relu(self.hidden(q)))[..., k_pos]
        if kind == "factorized_dense":
            hidden = F.relu(self.hidden(q))
            first, second = self.to_first(hidden), self.to_second(hidden)  # (B, H, seq_q, a), (B, H, seq_q, c)
            return (first[..., :, None] * second[..., None, :]).flatten(-2)[..., k_pos]
        if kind == "random":
            table = self.table[:, q_pos][:, :, k_pos]  # (H, seq_q, seq_k)
        else:
            table = torch.matmul(self.left[:, q_pos], self.right[:, k_pos].transpose(-2, -1))
        return table.expand(q.shape[0], -1, -1, -1)
