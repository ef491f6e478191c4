"""The base of every baseline: a token mixer (batch, seq, dim) -> (batch, seq, dim) that takes the place of
a block's attention sub-layer, [qkv projection -> attention -> out projection], so that the block around it
(pre-norm, residual, MLP) is the same as for an attention variant.

A baseline has no heads and runs on no attention kernel. Its causality is fixed when it is built, since
a causal and a non-causal form can differ in their parameters (an LSTM read one way or both ways).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from variants.base import Attention, Choice, Complexity, Range
from variants.registry import check_kernel_name, list_baselines, options_of, variant_class


class Baseline(nn.Module):
    """A token mixer over (batch, seq, dim) in place of attention; subclasses build it and define `forward`."""

    name: ClassVar[str]  # set by variants.register
    Options: ClassVar[type]  # a frozen dataclass of the baseline's options
    kernels: ClassVar[tuple[str, ...]] = ()  # no attention kernel runs a baseline
    complexity: ClassVar[Complexity | None] = None  # its time per layer as the literature states it
    # Where a sweep searches each option (an option not named keeps its default), as for attention variants.
    search_space: ClassVar[dict[str, Range | Choice]] = {}
    # The model around a baseline is the attention variants' own, absolute positions included, so that only
    # the token mixer differs; `--set model.positions=none` drops them for any run.
    provides_positions: ClassVar[bool] = False
    # No option of a baseline is sized to match dense's parameters: a benchmark sizes its model width
    # (`variants.base.Attention.size_option`).
    size_option: ClassVar[str | None] = None
    # The capabilities config resolution reads of an attention variant (`variants.base.Attention`), as every
    # baseline has them: a causal form that reads no later input, no parameter per position, and a recurrence or a
    # convolution that tells one order of its inputs from another in either direction.
    supports_causal: ClassVar[bool] = True
    prefix_consistent: ClassVar[bool] = True
    position_indexed: ClassVar[bool] = False
    order_aware: ClassVar[bool] = True

    def __init__(self, options: Any, *, dim: int, causal: bool, layer: int) -> None:
        super().__init__()
        self.options = options
        self.dim = dim
        self.causal = causal
        self.layer = layer  # the block's index from 0: a dilated convolution grows its dilation with it

    # The same self-describing name as an attention variant's: the registered name plus its tagged options.
    describe = Attention.describe

    @property
    def kernel(self) -> str:
        """What runs the mixer, for the run record's `kernel`: PyTorch's own modules unless a subclass says."""
        return "torch"

    def extra_repr(self) -> str:
        return f"{self.describe()}, dim={self.dim}, causal={self.causal}, layer={self.layer}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - every baseline defines it
        raise NotImplementedError


def create_baseline(name: str, *, dim: int, causal: bool, layer: int = 0, kernel: str = "auto",
                    options: Any = None, **values: Any) -> Baseline:
    """Build the baseline registered as `name` for width `dim`, causal or not, as the mixer of block `layer`.

    `kernel` is there to be refused: a baseline runs on no attention kernel, so anything but `auto` is an
    error rather than a setting silently ignored. The options are `options` (its typed `Options`) or `values`."""
    cls = variant_class(name)
    if not issubclass(cls, Baseline):
        raise ValueError(f"{name!r} is an attention variant, not a baseline; accepted: {', '.join(list_baselines())}.")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim got {dim!r}; accepted: an integer >= 1.")
    check_kernel_name(name, kernel)
    return cls(options_of(name, values if options is None else options), dim=dim, causal=causal, layer=layer)
