"""The reference kernel: each variant's own formula with the full seq_q x seq_k matrix of weights.

    weights = normalise(similarities)    similarities: the variant's logits (scaled q.k through its score),
                                         or phi(q_i) . phi(k_j) for a variant with feature maps; normalise:
                                         the variant's normaliser (softmax, the reference formula of the
                                         tutorials, unless it names another: `variants.normalisers`)
    weights = F_1 F_2 ... F_r            for a variant that gives its weights as factors (Linformer, Nystromformer)
    output  = weights v

Slow and memory hungry on purpose: it is the truth every other kernel is tested against (in float64),
and the only kernel that returns the dense attention weights.
"""

from __future__ import annotations

import functools

import torch

from variants.kernels.call import Call


def similarities(call: Call) -> torch.Tensor:
    """(B, H, seq_q, seq_k): the variant's logits, or its features' dot products."""
    if call.features is not None:
        phi_q, phi_k = call.features(call.q, call.k, call.q_pos, call.k_pos, call.causal, call.key_padding_mask)
        return torch.matmul(phi_q, phi_k.transpose(-2, -1))
    return call.logits(call.q, call.k, call.q_pos, call.k_pos, call.causal)


def attend(call: Call) -> tuple[torch.Tensor, torch.Tensor]:
    """Output (B, H, seq_q, dim_v) and weights (B, H, seq_q, seq_k)."""
    if call.factors is not None:
        weights = functools.reduce(torch.matmul, call.factors(call.q, call.k, call.key_padding_mask))
    else:
        weights = normalised(call, similarities(call))
    return torch.matmul(weights, call.v), weights


def normalised(call: Call, similarities: torch.Tensor) -> torch.Tensor:
    """Weights (B, H, seq_q, seq_k) from similarities of that shape: the variant's normaliser over the keys the
    call allows its queries."""
    allowed = call.allowed(call.q_pos, call.k_pos, call.causal, call.key_padding_mask)
    return call.normalise(similarities, allowed)


def run(call: Call) -> torch.Tensor:
    return attend(call)[0]
