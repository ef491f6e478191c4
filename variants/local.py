"""Local (sliding window) attention: each query attends a window of `window` keys centred on it.

    softmax(q k^T / sqrt(d) + M) v,   M_ij = 0 if |i - j| <= window // 2 else -inf
                                      (causal: 0 <= i - j <= window // 2)

The window counts keys as Longformer's w does (Beltagy et al. 2020: "each token attends to 1/2 w tokens on
each side"): window // 2 keys on each side of the query, and the query itself; causal keeps the half
before it (every layout is intersected with j <= i). The default, 32, sees 16 positions on each side.
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
from variants.base import LAYOUT_KERNELS_FIRST, Attention, Complexity, NormaliserOptions, Range
from variants.registry import register


@register("local")
class Local(Attention):
    """Sliding-window attention, |i - j| <= window // 2, on a block-sparse kernel: O(n * window)."""

    complexity = Complexity("O(n w d)", 1, 1)  # w the window
    order_aware = True  # which keys are near

    kernel_preference = LAYOUT_KERNELS_FIRST
    # A window of 2 * (seq_len - 1) or more is dense attention.
    search_space = {"window": Range(8, "seq_len*2", log=True)}

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        window: int = option(32, "Longformer's w: window // 2 keys on each side, |i - j| <= window // 2 "
                                 "(causal: 0 <= i - j <= window // 2)", tag="w")

        def __post_init__(self) -> None:
            require(self.window >= 1, "window", self.window, "an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.block_layout = layouts.Local(options.window)
