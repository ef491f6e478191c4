"""Recurrent baselines: an LSTM (Hochreiter & Schmidhuber 1997) or a GRU (Cho et al. 2014) in place of attention.

    LSTM: i, f, o, g = sigma/tanh(W x_t + U h_{t-1} + b);  c_t = f c_{t-1} + i g;  h_t = o tanh(c_t)
    GRU:  r, z = sigma(W x_t + U h_{t-1} + b);  n = tanh(W_n x_t + r (U_n h_{t-1}) + b_n);  h_t = (1 - z) n + z h_{t-1}

The tutorials' recurrent row: O(n d^2) time per layer and O(n) sequential operations (each position waits
for the state of the one before), against attention's O(n^2 d) time and O(1) sequential operations.
Causal configs read the sequence left to right with a hidden state of width dim; non-causal configs read it
both ways, dim / 2 per direction, concatenated back to dim, so the parameter count stays comparable
(6 d^2 + O(d) for a bidirectional LSTM against 8 d^2 + O(d) one way; attention's projections hold 4 d^2 + O(d)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from common.options import OptionError
from variants.base import Complexity
from variants.baselines.base import Baseline
from variants.registry import register


class Recurrent(Baseline):
    """A torch recurrent layer of width dim, one way when causal, both ways (dim / 2 each) when not."""

    complexity = Complexity("O(n d^2)", 1, 2, "O(n)")

    rnn_class: ClassVar[type[nn.RNNBase]]

    @dataclass(frozen=True)
    class Options:
        pass

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if not self.causal and self.dim % 2:
            raise OptionError(f"Baseline {self.name!r} reads a non-causal sequence both ways with dim / 2 per "
                              f"direction, so model.dim {self.dim} cannot apply; accepted: an even model.dim.")
        hidden = self.dim if self.causal else self.dim // 2
        self.rnn = self.rnn_class(self.dim, hidden, batch_first=True, bidirectional=not self.causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, seq, dim) -> the hidden states (batch, seq, dim), both directions concatenated when two."""
        return self.rnn(x)[0]


@register("lstm")
class LSTM(Recurrent):
    """LSTM in place of attention: O(n d^2) time, n sequential steps; both ways (dim / 2 each) when not causal."""

    rnn_class = nn.LSTM


@register("gru")
class GRU(Recurrent):
    """GRU in place of attention: O(n d^2) time, n sequential steps; both ways (dim / 2 each) when not causal."""

    rnn_class = nn.GRU
