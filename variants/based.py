"""Based (Arora et al. 2024, "Simple linear attention language models balance the recall-throughput
tradeoff"): linear attention with a Taylor feature map, and short sliding windows of softmax attention.

Linear layers. q and k are projected per head to `feature_dim` = d' (16 in the paper; a learned map from
head_dim, standing in for the paper's projection of the model's width, which here is the block's own q and k
projection followed by this one), then mapped by the second-order Taylor expansion of exp(q.k / sqrt(d')):

    phi(x) = [1, x / d'^(1/4), vec(x x^T) / (sqrt(2) sqrt(d'))]       (1 + d' + d'^2 features)
    phi(q) . phi(k) = 1 + s + s^2 / 2,   s = q.k / sqrt(d')

which is positive for every s (its discriminant is negative), so the `sum` normaliser applies although single
features may be negative. O(n d'^2 d) time on the `linear` kernel (causal: chunks with a running state).

Window layers. In the paper's hybrid some layers are exact softmax attention over a short sliding window
(64 keys); here the blocks with layer_index % window_every == window_every - 1 are such layers (window_every 0:
none). `window` counts keys as every window of attnlab does, Longformer's w: |i - j| <= window // 2, so a
causal query sees itself and the window // 2 keys before it. The default, 128, is the paper's code's window
size, which it gives FlashAttention as window_size=(64, 0): 64 keys back. These layers are
`variants.layouts.Local(window)` and run on the block-sparse kernels in O(n window d).

The paper's hybrid also has BaseConv layers (gated short convolutions); they are left out, the block's MLP
standing in for them (`approximation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from einops import rearrange
from torch import nn

from common.options import option, require
from variants import layouts
from variants.base import LAYOUT_KERNELS_FIRST, Attention, Complexity, Range
from variants.registry import register


def taylor_features(x: torch.Tensor) -> torch.Tensor:
    """phi(x) (B, H, seq, 1 + d' + d'^2) for x (B, H, seq, d'): phi(q) . phi(k) = 1 + s + s^2 / 2,
    s = q.k / sqrt(d')."""
    dim = x.shape[-1]
    squares = rearrange(x[..., :, None] * x[..., None, :], "... i j -> ... (i j)")  # vec(x x^T)
    return torch.cat([torch.ones_like(x[..., :1]), x / dim**0.25, squares / math.sqrt(2 * dim)], dim=-1)


@register("based")
class Based(Attention):
    """Taylor-feature linear attention, with every window_every-th block a sliding window of softmax attention."""

    approximation = ("No BaseConv (gated convolution) layers of the paper's hybrid: the block's MLP stands in "
                     "for them.")
    search_space = {"feature_dim": Range(4, 32, log=True), "window": Range(8, "seq_len", log=True)}
    order_aware = True  # its window layers (none with window_every 0, which leaves it blind to order)

    @dataclass(frozen=True)
    class Options:
        feature_dim: int = option(16, "d', the width q and k are projected to before the Taylor map", tag="f")
        window: int = option(128, "Longformer's w of the window layers: window // 2 keys on each side, "
                                  "|i - j| <= window // 2 (causal: the window // 2 keys before the query)", tag="w")
        window_every: int = option(2, "blocks with layer_index % window_every == window_every - 1 are sliding-"
                                      "window softmax layers (0: none)", tag="e")

        def __post_init__(self) -> None:
            require(self.feature_dim >= 1, "feature_dim", self.feature_dim, "an integer >= 1")
            require(self.window >= 1, "window", self.window, "an integer >= 1")
            require(self.window_every >= 0, "window_every", self.window_every, "an integer >= 0 (0: no window layers)")

    @classmethod
    def class_for(cls, options: Options, layer_index: int = 0) -> type[Attention]:
        every = options.window_every
        return BasedWindow if every and layer_index % every == every - 1 else BasedLinear


class BasedLinear(Based):
    """A linear layer: q and k projected to feature_dim, then the Taylor feature map."""

    complexity = Complexity("O(n d'^2 d)", 1, 1)  # d' the projected feature dim
    normaliser = "sum"

    def __init__(self, options: Based.Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        # (heads, head_dim, feature_dim), initialised so that a projected coordinate has the variance of one of x;
        # the matrices of linear maps, decayed like a linear layer's weight (the training loop reads this).
        self.linear_weights = ("query_projection", "key_projection")
        shape = (self.num_heads, self.head_dim, options.feature_dim)
        self.query_projection = nn.Parameter(torch.randn(shape) / math.sqrt(self.head_dim))
        self.key_projection = nn.Parameter(torch.randn(shape) / math.sqrt(self.head_dim))

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.einsum("bhnd,hde->bhne", q, self.query_projection.to(q.dtype)),
                torch.einsum("bhnd,hde->bhne", k, self.key_projection.to(k.dtype)))

    def features(self, q, k, q_pos, k_pos, causal, key_padding_mask) -> tuple[torch.Tensor, torch.Tensor]:
        return taylor_features(q), taylor_features(k)


class BasedWindow(Based):
    """A window layer: softmax attention over the query and the window // 2 keys before it (|i - j| <= window // 2
    without causality), on a block-sparse kernel."""

    kernel_preference = LAYOUT_KERNELS_FIRST

    def __init__(self, options: Based.Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.block_layout = layouts.Local(options.window)
