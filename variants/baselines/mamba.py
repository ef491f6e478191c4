"""Mamba's selective state space block (Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective
State Spaces"), in pure PyTorch, in place of attention.

    u, z = in_proj(x)                                     each (batch, seq, inner), inner = expand * dim
    u    = SiLU(causal depthwise conv1d(u))               a short conv of conv_kernel taps
    delta = softplus(dt_proj(W_dt u)), B = W_B u, C = W_C u   input-dependent (S6): delta (inner), B, C (state_size)
    h_t  = exp(delta_t A) h_{t-1} + delta_t B_t u_t;  y_t = C_t h_t + D u_t      (variants.baselines.scan)
    out  = out_proj(y * SiLU(z))

Initialised as in the paper: A = -(1..state_size) for every channel (S4D-real), D = 1, delta's bias the
inverse softplus of a log-uniform draw from [0.001, 0.1], dt_proj's weight uniform within dt_rank ** -0.5.
A is learned as log(-A), stored flat (channels * state_size) so that the training loop's weight decay,
which applies to matrices only, leaves it alone as the paper's does (D and the biases are vectors already).

Non-causal configs add a second scan that reads the sequence backwards (its own conv, projections, A and D,
as in Vision Mamba's bidirectional block); both share in_proj, the gate and out_proj, and are summed.
Cost: O(n d N) time and memory (N = state_size) and n / chunk_size sequential steps with the chunked scan;
the optional mamba-ssm CUDA kernel is not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from common.options import option, require
from variants.base import Choice, Complexity
from variants.baselines.base import Baseline
from variants.baselines.scan import chunked_scan, sequential_scan
from variants.registry import register

DT_MIN, DT_MAX, DT_FLOOR = 0.001, 0.1, 1e-4  # the paper's range of initial step sizes


class SelectiveScan(nn.Module):
    """One direction of the block: the short causal conv, SiLU, the input-dependent projections and the scan."""

    def __init__(self, inner: int, options: Mamba.Options, dt_rank: int) -> None:
        super().__init__()
        self.options = options
        self.conv = nn.Conv1d(inner, inner, options.conv_kernel, groups=inner, padding=options.conv_kernel - 1)
        self.x_proj = nn.Linear(inner, dt_rank + 2 * options.state_size, bias=False)
        self.dt_proj = nn.Linear(dt_rank, inner)
        nn.init.uniform_(self.dt_proj.weight, -dt_rank**-0.5, dt_rank**-0.5)
        step = torch.exp(torch.rand(inner) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
        step = step.clamp(min=DT_FLOOR)
        with torch.no_grad():
            self.dt_proj.bias.copy_(step + torch.log(-torch.expm1(-step)))  # softplus(bias) = step
        self.A_log = nn.Parameter(torch.log(torch.arange(1, options.state_size + 1, dtype=torch.float32)).repeat(inner))
        self.D = nn.Parameter(torch.ones(inner))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u (batch, seq, inner) -> y (batch, seq, inner), causal."""
        seq, state = u.shape[1], self.options.state_size
        u = F.silu(rearrange(self.conv(rearrange(u, "b t e -> b e t"))[..., :seq], "b e t -> b t e"))
        dt, B, C = self.x_proj(u).split([self.dt_proj.in_features, state, state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))  # (batch, seq, inner)
        A = -torch.exp(rearrange(self.A_log, "(e n) -> e n", n=state))  # (inner, state)
        # The scan runs in float32 at least, also under bf16 autocast, as Mamba's own kernel does.
        dtype = torch.promote_types(u.dtype, torch.float32)
        with torch.autocast(u.device.type, enabled=False):
            inputs = [tensor.to(dtype) for tensor in (u, delta, A, B, C, self.D)]
            if resolved_scan(self.options.scan, u.device) == "sequential":
                return sequential_scan(*inputs)
            return chunked_scan(*inputs, chunk_size=self.options.chunk_size)


def resolved_scan(scan: str, device: torch.device) -> str:
    """The scan `auto` means on `device`; both compute the same recurrence (tested against each other)."""
    if scan != "auto":
        return scan
    return "chunked" if device.type == "cuda" else "sequential"


@register("mamba")
class Mamba(Baseline):
    """Mamba's selective state space block (S6) in place of attention: O(n d N) time, a parallel chunked scan."""

    complexity = Complexity("O(n d N)", 1, 1, "O(n)")  # N the state size; the scan steps through time

    search_space = {"state_size": Choice((8, 16, 32))}

    @dataclass(frozen=True)
    class Options:
        state_size: int = option(16, "N, the state entries per channel", tag="n")
        expand: int = option(2, "inner width / dim")
        conv_kernel: int = option(4, "taps of the short causal depthwise convolution before the scan")
        dt_rank: int | None = option(None, "rank of delta's projection; none: ceil(dim / 16)")
        chunk_size: int = option(64, "positions per chunk of the parallel scan (speed and memory, same result)")
        scan: Literal["auto", "chunked", "sequential"] = option(
            "auto", "chunked: the parallel scan; sequential: the plain recurrence, one position at a time; auto: "
                    "chunked on CUDA, sequential elsewhere (on a CPU the chunked scan's (batch, seq, channels, state) "
                    "tensors made it about 10x slower)")

        def __post_init__(self) -> None:
            for name in ("state_size", "expand", "conv_kernel", "chunk_size"):
                require(getattr(self, name) >= 1, name, getattr(self, name), "an integer >= 1")
            require(self.dt_rank is None or self.dt_rank >= 1, "dt_rank", self.dt_rank, "none or an integer >= 1")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        inner = options.expand * self.dim
        dt_rank = options.dt_rank or math.ceil(self.dim / 16)
        self.in_proj = nn.Linear(self.dim, 2 * inner, bias=False)
        self.directions = nn.ModuleList(SelectiveScan(inner, options, dt_rank) for _ in range(1 if self.causal else 2))
        self.out_proj = nn.Linear(inner, self.dim, bias=False)

    @property
    def kernel(self) -> str:
        return f"{resolved_scan(self.options.scan, self.out_proj.weight.device)}-scan"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, seq, dim) -> (batch, seq, dim)."""
        u, gate = self.in_proj(x).chunk(2, dim=-1)  # each (batch, seq, inner)
        y = self.directions[0](u)
        if not self.causal:  # the backward direction: the same scan over the reversed sequence
            y = y + self.directions[1](u.flip(1)).flip(1)
        return self.out_proj(y * F.silu(gate))
