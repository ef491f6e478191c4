"""Linformer (Wang et al. 2020, "Linformer: Self-Attention with Linear Complexity", eq. 7).

    head = softmax(q (E k)^T / sqrt(d)) (F v),   E, F: (rank, n) learned projections along the sequence

Keys and values are projected along the sequence to `rank` rows, so each query attends to `rank` mixtures of
keys instead of n keys: O(n * rank * d) time and memory against O(n^2 d). As the low-rank family's factors,
the weights are softmax(q (E k)^T / sqrt(d)) (B, H, n, rank) times F (rank, n); the `lowrank` kernel applies
them to the values right to left without forming the n x n product.

Choices, with the paper:
- E and F have one column per position up to `max_len` (the longest sequence of the run, which the module
  must be created with); a sequence of n < max_len positions uses their first n columns, as the paper's code
  does (`weight[:, 0:tgt_len]`), and a longer one is refused.
- Parameter sharing: `share="none"` keeps E and F per layer, shared by the heads of the layer (the paper's
  headwise sharing); `share="kv"` also sets F = E (key-value sharing). The paper's layerwise sharing (one E
  for every layer) cannot be expressed by one module, which owns its parameters: it is not offered.
- Padded keys: their columns of E and F are zeroed, so a padded key and its value contribute nothing (the
  paper's code does not mask the projected keys); a query of a batch element without real keys outputs zeros.
- Initialisation as the paper's code (fairseq's examples/linformer): Xavier uniform with gain 1/sqrt(2) over
  the (rank, max_len) matrix.
Bidirectional, as in the paper (a projection along the sequence mixes future positions into every row): no
causal form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from common.options import option, require
from variants.base import Attention, Choice, Complexity, Range
from variants.registry import register

SHARING = ("none", "kv")


@register("linformer")
class Linformer(Attention):
    """Keys and values projected along the sequence to `rank` rows: softmax(q (E k)^T / sqrt(d)) F v; O(n r d)."""

    complexity = Complexity("O(n r d)", 1, 1)  # r the rank

    supports_causal = False
    size_option = "rank"  # its E and F, (rank, max_len) per layer, are what it has beyond dense's parameters
    position_indexed = True  # E and F have one column per position
    order_aware = True
    approximation = ("A low-rank approximation of softmax attention: keys and values are projected along the "
                     "sequence to `rank` rows by learned matrices of a fixed length (max_len).")
    search_space = {"rank": Range(8, "seq_len", log=True), "share": Choice(SHARING)}

    @dataclass(frozen=True)
    class Options:
        rank: int = option(64, "rows the keys and values are projected to along the sequence (the paper's k)",
                           tag="r")
        share: Literal["none", "kv"] = option(
            "none", "none: E and F per layer, shared by its heads (headwise); kv: also F = E (key-value)",
            tag="share")

        def __post_init__(self) -> None:
            require(self.rank >= 1, "rank", self.rank, "an integer >= 1")
            require(self.share in SHARING, "share", self.share, ", ".join(repr(name) for name in SHARING))

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if self.max_len is None:
            raise ValueError("Variant 'linformer' sizes its projections by the longest sequence, and max_len is "
                             "None; accepted: variants.create(..., max_len=N) with N the longest sequence length.")
        # Matrices of linear maps along the sequence, decayed like a linear layer's weight (the training loop
        # reads this).
        self.key_projection = nn.Parameter(self._initial_projection())  # E: (rank, max_len)
        self.linear_weights: tuple[str, ...] = ("key_projection",)
        if options.share == "none":
            self.value_projection = nn.Parameter(self._initial_projection())  # F: (rank, max_len)
            self.linear_weights += ("value_projection",)

    def _initial_projection(self) -> torch.Tensor:
        projection = torch.empty(self.options.rank, self.max_len)
        return nn.init.xavier_uniform_(projection, gain=1 / math.sqrt(2))

    def factors(self, q: torch.Tensor, k: torch.Tensor, key_padding_mask: torch.Tensor | None) -> list[torch.Tensor]:
        seq_k = k.shape[2]
        if seq_k > self.max_len:
            raise ValueError(f"Variant 'linformer' got {seq_k} keys but its projections cover max_len="
                             f"{self.max_len} positions; accepted: at most {self.max_len} keys.")
        key_projection = self.key_projection[:, :seq_k]  # E: (rank, seq_k)
        value_projection = (self.key_projection if self.options.share == "kv" else self.value_projection)[:, :seq_k]
        if key_padding_mask is not None:  # zero the columns of padded keys: (B, 1, rank, seq_k)
            padded = ~key_padding_mask[:, None, None, :]
            key_projection = key_projection.masked_fill(padded, 0.0)
            value_projection = value_projection.masked_fill(padded, 0.0)
        projected_keys = torch.matmul(key_projection, k)  # (B, H, rank, d)
        logits = torch.matmul(q, projected_keys.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, seq_q, rank)
        return [torch.softmax(logits, dim=-1), value_projection]
