"""A linear map with its own weight and bias per head, for variants that compute something from each head's
queries or keys with a small network (the Synthesizer's MLPs, the Sinkhorn sorting network)."""

from __future__ import annotations

import math

import torch
from torch import nn


class PerHeadLinear(nn.Module):
    """x (batch, heads, seq, in_features) -> (batch, heads, seq, out_features), head h through its own weight
    (out_features, in_features) and bias, both initialised as nn.Linear's are: uniform in +-1/sqrt(in_features)."""

    # The matrix of the map, decayed like nn.Linear's weight (the training loop reads this).
    linear_weights = ("weight",)

    def __init__(self, heads: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(heads, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(heads, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bhni,hoi->bhno", x, self.weight) + self.bias[:, None, :]  # (B, H, seq, out)
