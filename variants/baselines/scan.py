"""The selective scan of Mamba's S6 layer, twice: a parallel chunked form, and the plain recurrence it is
tested against (the naive twin, one position at a time).

    h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t        h: (channels, state) per example
    y_t = C_t h_t + D x_t

Shapes: x, delta (batch, seq, channels); A (channels, state), negative; B, C (batch, seq, state);
D (channels,). Each channel has its own decay per state entry, so the decay between two positions is a
(channels, state) tensor, not a scalar as in Mamba-2.

The chunked form cuts the sequence into chunks of `chunk_size`. Within a chunk every state is
    h_t = sum_{s <= t} exp(S_t - S_s) delta_s B_s x_s + exp(S_t) h_entry,    S_t = sum_{r <= t} delta_r A
(S from the chunk's start), all positions at once; across chunks the state is carried one chunk at a
time, seq / chunk_size steps. The sum is taken in log space: exp(-S_s) alone overflows once a chunk's
decay passes the float range (a few strong decays do it), whereas logcumsumexp keeps a running maximum;
the inputs' signs are carried by two sums, of their positive and their negative parts. Chunks bound how
far S runs from 0, and with it the rounding of S_t - S_s.

Cost: O(n d N) time and memory for both (d channels, N states); the chunked form runs n / chunk_size
sequential steps instead of n.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange


def sequential_scan(x: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                    D: torch.Tensor) -> torch.Tensor:
    """The recurrence as written, one position at a time: y (batch, seq, channels)."""
    batch, _, channels = x.shape
    h = x.new_zeros(batch, channels, A.shape[1])  # (batch, channels, state)
    outputs = []
    # unbind, not x[:, t]: each indexing's backward writes a zero tensor of the whole sequence, O(n^2) in all
    for x_t, delta_t, B_t, C_t in zip(x.unbind(1), delta.unbind(1), B.unbind(1), C.unbind(1), strict=True):
        h = torch.exp(delta_t[:, :, None] * A) * h + (delta_t * x_t)[:, :, None] * B_t[:, None, :]
        outputs.append(torch.einsum("ben,bn->be", h, C_t))
    return torch.stack(outputs, dim=1) + x * D


def _decayed_cumsum(inputs: torch.Tensor, log_decay: torch.Tensor) -> torch.Tensor:
    """sum_{s <= t} exp(log_decay_t - log_decay_s) inputs_s along dim 2, in log space (see the module's doc).

    A part that is zero gets the log of the dtype's smallest normal number instead of -inf: logcumsumexp's
    gradient at -inf is NaN, and a term of at most that size changes nothing."""
    floor = math.log(torch.finfo(inputs.dtype).tiny)
    total = torch.zeros_like(inputs)
    for sign in (1.0, -1.0):
        part = sign * inputs
        log_part = torch.where(part > 0, part.clamp_min(torch.finfo(inputs.dtype).tiny).log(), floor)
        total = total + sign * torch.exp(torch.logcumsumexp(log_part - log_decay, dim=2) + log_decay)
    return total


def chunked_scan(x: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                 D: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """The same y (batch, seq, channels), all positions of a chunk at once, the state carried across chunks."""
    seq = x.shape[1]
    pad = -seq % chunk_size
    # Padding has delta = 0: decay 1 and no input, so the state passes through; its outputs are dropped.
    x_, delta_, B_, C_ = (rearrange(F.pad(t, (0, 0, 0, pad)), "b (c l) e -> b c l e", l=chunk_size)
                          for t in (x, delta, B, C))
    log_decay = torch.cumsum(delta_[..., None] * A, dim=2)  # S: (batch, chunk, position, channels, state)
    inputs = (delta_ * x_)[..., None] * B_[:, :, :, None, :]  # delta B x: (batch, chunk, position, channels, state)
    local = _decayed_cumsum(inputs, log_decay)  # each chunk's states from its own inputs alone
    entering, state = [], torch.zeros_like(local[:, 0, 0])  # (batch, channels, state)
    # each chunk's last position, unbound once (indexing per chunk would cost a whole-tensor gradient each)
    ends = zip(torch.exp(log_decay[:, :, -1]).unbind(1), local[:, :, -1].unbind(1), strict=True)
    for decay_end, local_end in ends:
        entering.append(state)
        state = decay_end * state + local_end
    states = local + torch.exp(log_decay) * torch.stack(entering, dim=1)[:, :, None]
    y = torch.einsum("bclen,bcln->bcle", states, C_)
    return rearrange(y, "b c l e -> b (c l) e")[:, :seq] + x * D
