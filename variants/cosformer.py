"""cosFormer (Qin et al. 2022, "cosFormer: Rethinking Softmax in Attention", ICLR).

    s_ij = relu(q_i) . relu(k_j) cos(pi/2 (i - j) / M),   out_i = sum_j s_ij v_j / sum_j s_ij

ReLU features keep every similarity non-negative, and the cosine re-weighting, largest at i = j and falling
with the distance, restores the locality bias of softmax attention. It stays linear because
cos(a - b) = cos a cos b + sin a sin b splits it into features of each side, as in the paper:

    phi(q_i) = [relu(q_i) cos(pi i / 2M), relu(q_i) sin(pi i / 2M)]   (and phi(k_j) alike, at position j)

so phi(q_i) . phi(k_j) = s_ij. M is fixed: the longest sequence the module is built for (`max_len`), as the
paper's M >= N asks, so |i - j| < M and the cosine stays positive. The paper's code takes M = max(seq_q, seq_k)
of each call instead, which makes a causal output depend on how long the sequence later grows; with M fixed the
causal form is prefix-consistent, and a longer sequence is refused. Positions past the training length reach
angles the model never trained at (`position_indexed`), so evaluation beyond it is refused. 2d features: O(n d^2) time
on the `linear` kernel (causal: chunks with a running state); the denominator is floored at 1e-6, as in the
paper's code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from variants.base import Attention, Complexity
from variants.registry import register


def cos_reweighted(x: torch.Tensor, positions: torch.Tensor, horizon: int) -> torch.Tensor:
    """[relu(x) cos(pi/2 t / M), relu(x) sin(pi/2 t / M)] (B, H, seq, 2d) for x (B, H, seq, d) at positions t."""
    angle = (math.pi / 2) * positions.to(torch.promote_types(x.dtype, torch.float32)) / horizon  # (seq,)
    cos, sin = (wave(angle).to(x.dtype)[:, None] for wave in (torch.cos, torch.sin))  # (seq, 1)
    x = F.relu(x)
    return torch.cat([x * cos, x * sin], dim=-1)


@register("cosformer")
class CosFormer(Attention):
    """ReLU features re-weighted by cos(pi/2 (i - j) / M), split into cos and sin halves; O(n d^2)."""

    complexity = Complexity("O(n d^2)", 1, 2)
    normaliser = "sum"
    position_indexed = True  # the angle of position i is pi i / 2M
    order_aware = True
    approximation = ("M is the longest sequence of the run (max_len, the paper's M >= N), where the paper's code "
                     "takes the length of each call, which would let a later token change earlier causal outputs.")

    @dataclass(frozen=True)
    class Options:
        pass

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if self.max_len is None:
            raise ValueError("Variant 'cosformer' re-weights by the distance over M, the longest sequence, and "
                             "max_len is None; accepted: variants.create(..., max_len=N) with N the longest "
                             "sequence length.")

    def features(self, q, k, q_pos, k_pos, causal, key_padding_mask) -> tuple[torch.Tensor, torch.Tensor]:
        longest = max(len(q_pos), len(k_pos))
        if longest > self.max_len:
            raise ValueError(f"Variant 'cosformer' was built for sequences of at most max_len={self.max_len} (its "
                             f"M); got {len(q_pos)} queries and {len(k_pos)} keys, accepted: at most {self.max_len}.")
        return cos_reweighted(q, q_pos, self.max_len), cos_reweighted(k, k_pos, self.max_len)
