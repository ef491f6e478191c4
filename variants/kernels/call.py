"""What a kernel receives: one attention call, with q and k already through the variant's `prepare`."""

from __future__ import annotations

import functools
from collections.abc import Callable
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


def untraced(function: Callable) -> Callable:
    """`function` runs eagerly, never traced into a compiled graph (a cache lookup, say). The wrapping with
    torch.compiler.disable happens only while compiling: importing it loads dynamo, seconds an eager run
    never needs to spend."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        if torch.compiler.is_compiling():
            return _disabled(function)(*args, **kwargs)
        return function(*args, **kwargs)

    return call


@functools.cache
def _disabled(function: Callable) -> Callable:
    return torch.compiler.disable(function)
