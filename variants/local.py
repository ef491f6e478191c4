"""Local (sliding window) attention: each query attends the keys within `window` positions.

    softmax(q k^T / sqrt(d) + M) v,   M_ij = 0 if |i - j| < window else -inf   (causal: 0 <= i - j < window)

As in Image Transformer / Longformer's sliding window (Parmar et al. 2018; Beltagy et al. 2020).
Cost with the blocked kernel (CPU) or flex (CUDA, tiles of 128 from the same layout): O(n * window * d)
time and O(n * d) memory plus one chunk of scores, against O(n^2 d) when the window is applied as a mask
to dense attention (the `sdpa` kernel here, kept as the masked emulation to compare against). xformers
runs it with its local-attention bias class when the lengths are equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.options import option, require
from variants import layouts
from variants.base import Attention, Range
from variants.registry import register


@register("local")
class Local(Attention):
    """Sliding-window attention, |i - j| < window, on a block-sparse kernel: O(n * window)."""

    kernels = ("flex", "blocked", "xformers", "sdpa", "reference")
    search_space = {"window": Range(8, "seq_len", log=True)}  # a window of seq_len or more is dense attention

    @dataclass(frozen=True)
    class Options:
        window: int = option(16, "a query at i sees keys j with |i - j| < window (causal: 0 <= i - j < window)",
                             tag="w")

        def __post_init__(self) -> None:
            require(self.window >= 1, "window", self.window, "an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.pattern = layouts.Local(options.window)
