"""Convolutional baseline: a depthwise-separable 1-D convolution in place of attention (as in ByteNet,
Kalchbrenner et al. 2016, and WaveNet's dilations, van den Oord et al. 2016).

    y_t[c] = sum_{j < kernel_size} w[c, j] x_{t - j * dilation}[c]      (depthwise: one filter per channel)
    out_t  = W y_t + b                                                 (pointwise: mixes the channels)

With `gate` (BaseConv's, Arora et al. 2023, "Zoology", section 4: y = (u W + b) * (h conv u)), the filter's output is
multiplied elementwise by a linear projection of the input before the pointwise mixing,
out_t = W (y_t * (G x_t + g)) + b; a filter as long as the sequence (kernel_size = seq_len) then stands for BaseConv's
long one, which Zoology parameterises implicitly (an explicit filter here, the same reach).

Block l dilates its filter by dilation_growth ** l, so a stack of depth L reaches
sum_{l < L} (kernel_size - 1) * dilation_growth ** l positions back: kernel_size - 1 per layer without
dilation, exponentially many with it. Causal configs pad on the left only; non-causal ones centre the filter
(floor of the span to the left, the rest to the right). The tutorials' convolutional row: O(k n d^2) time
per layer for a full convolution; the depthwise-separable one costs O(k n d + n d^2), O(1) sequential
operations, and a reach of O(k) per layer (O(log_k n) layers with dilations) to connect any two positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from common.options import option, require
from variants.base import Choice, Complexity, Range
from variants.baselines.base import Baseline
from variants.registry import register


@register("conv")
class Conv(Baseline):
    """Depthwise-separable 1-D convolution in place of attention: O(k n d + n d^2), a reach of k - 1 per layer."""

    complexity = Complexity("O(k n d^2)", 1, 2)  # the tutorials' row; depthwise-separable: O(k n d + n d^2)

    search_space = {"kernel_size": Range(2, 16, log=True), "dilation_growth": Choice((None, 2))}

    @dataclass(frozen=True)
    class Options:
        kernel_size: int = option(4, "taps of each channel's filter", tag="k")
        dilation_growth: int | None = option(
            None, "block l dilates its filter by dilation_growth ** l (none: no dilation)", tag="g")
        gate: bool = option(False, "BaseConv's gate: the filter's output times a linear projection of the input, "
                                   "elementwise, before the pointwise mixing", tag="gated")

        def __post_init__(self) -> None:
            require(self.kernel_size >= 1, "kernel_size", self.kernel_size, "an integer >= 1")
            require(self.dilation_growth is None or self.dilation_growth >= 1, "dilation_growth",
                    self.dilation_growth, "none or an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.dilation = (options.dilation_growth or 1) ** self.layer
        span = (options.kernel_size - 1) * self.dilation  # positions the filter covers besides its own
        # (past, future) positions each output sees: all in the past when causal, centred otherwise.
        self.reach = (span, 0) if self.causal else (span // 2, span - span // 2)
        self.depthwise = nn.Conv1d(self.dim, self.dim, options.kernel_size, dilation=self.dilation, groups=self.dim)
        self.pointwise = nn.Linear(self.dim, self.dim)
        self.gate = nn.Linear(self.dim, self.dim) if options.gate else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, seq, dim) -> (batch, seq, dim)."""
        channels_first = F.pad(rearrange(x, "b t d -> b d t"), self.reach)  # zeros beyond either end
        filtered = rearrange(self.depthwise(channels_first), "b d t -> b t d")
        return self.pointwise(filtered if self.gate is None else filtered * self.gate(x))
