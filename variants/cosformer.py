"""cosFormer (Qin et al. 2022, "cosFormer: Rethinking Softmax in Attention").

    s_ij = relu(q_i) . relu(k_j) cos(pi/2 (i - j) / M),   out_i = sum_j s_ij v_j / sum_j s_ij

ReLU features keep every similarity non-negative, and the cosine re-weighting, largest at i = j and falling
with the distance, restores the locality bias of softmax attention. It stays linear because
cos(a - b) = cos a cos b + sin a sin b splits it into features of each side, as in the paper:

    phi(q_i) = [relu(q_i) cos(pi i / 2M), relu(q_i) sin(pi i / 2M)]   (and phi(k_j) alike, at position j)

so phi(q_i) . phi(k_j) = s_ij. M = max(seq_q, seq_k), as the paper's code takes it, so |i - j| < M and the
cosine stays positive. 2d features: O(n d^2) time on the `linear` kernel (causal: chunks with a running
state); the denominator is floored at 1e-6, as in the paper's code.
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

    @dataclass(frozen=True)
    class Options:
        pass

    def features(self, q, k, q_pos, k_pos, causal, key_padding_mask) -> tuple[torch.Tensor, torch.Tensor]:
        horizon = max(len(q_pos), len(k_pos))  # M
        return cos_reweighted(q, q_pos, horizon), cos_reweighted(k, k_pos, horizon)
