"""What a kernel receives: one attention call, with q and k already through the variant's `prepare`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from variants.base import Attention


@dataclass(frozen=True)
class Call:
    variant: Attention
    q: torch.Tensor  # (B, H, seq_q, d), prepared (rotated, projected) by the variant
    k: torch.Tensor  # (B, H, seq_k, d), prepared
    v: torch.Tensor  # (B, H, seq_k, dim_v)
    q_pos: torch.Tensor  # (seq_q,) positions of the queries: 0..seq_q-1, or a slice of them
    k_pos: torch.Tensor  # (seq_k,) positions of the keys
    causal: bool
    key_padding_mask: torch.Tensor | None  # (B, seq_k) bool, True where a key is real
