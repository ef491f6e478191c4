"""Softmax temperature on scaled dot-product attention, fixed or learned per head.

    softmax(q k^T / (temperature * sqrt(d))) v

temperature < 1 sharpens the distribution, > 1 flattens it; temperature = 1 is `dense` and
temperature = 1/sqrt(d) is `unscaled`. With `learnable=True` each head learns its own temperature,
parametrised as log(temperature) so it stays positive (as in learned-temperature / QK-scale work,
e.g. Henry et al. 2020, "Query-Key Normalization for Transformers").
Cost: as `dense`, O(n^2 d) time, plus `heads` parameters when learned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from common.options import option, require
from variants.base import Attention, Choice, NormaliserOptions, Range
from variants.registry import register


@register("temperature")
class Temperature(Attention):
    """Scaled dot product divided by a temperature, fixed or learned per head (in log space)."""

    search_space = {"temperature": Range(0.1, 10.0, log=True), "learnable": Choice((False, True))}

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        temperature: float = option(1.0, "divides q.k/sqrt(d); the initial value when learnable", tag="t")
        learnable: bool = option(False, "learn one temperature per head, in log space", tag="learned")

        def __post_init__(self) -> None:
            require(
                math.isfinite(self.temperature) and self.temperature > 0,
                "temperature", self.temperature, "a finite number > 0",
            )

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if options.learnable:
            initial = torch.full((self.num_heads, 1, 1), math.log(options.temperature))
            self.log_temperature = nn.Parameter(initial)  # (heads, 1, 1)

    def logit_scale(self) -> float | torch.Tensor:
        if self.options.learnable:
            return torch.exp(-self.log_temperature) / math.sqrt(self.head_dim)  # (heads, 1, 1)
        return 1.0 / (self.options.temperature * math.sqrt(self.head_dim))

    @property
    def temperature(self) -> torch.Tensor:
        """Current temperature per head, (heads,)."""
        if self.options.learnable:
            return self.log_temperature.detach().exp().flatten()
        return torch.full((self.num_heads,), self.options.temperature)
