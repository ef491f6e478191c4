"""The linear kernel: kernelised attention in O(n), never forming the seq_q x seq_k matrix.

For a variant with feature maps phi (the kernelised family) and the `sum` normaliser,

    out_i = phi(q_i) S_i / max(phi(q_i) . z_i, EPSILON),   S_i = sum_j phi(k_j) v_j^T,   z_i = sum_j phi(k_j)

over the keys j that query i may see (Katharopoulos et al. 2020, eq. 4-6), EPSILON = 1e-6 as in the paper's
code. Without causality S and z are one
sum over the real keys: O(n m d) time and O(m d) state. With causality the sequence is cut into chunks of
`CHUNK` positions, as in flash-linear-attention's chunk mode: inside a chunk the quadratic form phi(Q) phi(K)^T
masked to j <= i (C x C per chunk), across chunks the running state S and z summed over the chunks before
(an exclusive prefix sum), so causal training costs O(n (C m + m d)) time and O(n (C + m d / C)) memory,
in pure PyTorch on any device. Padded keys have their features zeroed: they add nothing to any sum. With the
`none` normaliser (an identity feature map) the numerators are the output. Under autocast the sums and their ratio
are computed in float32 (as flash-linear-attention keeps its states), the output returned in the values' dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from variants.kernels.call import Call
from variants.normalisers import EPSILON

CHUNK = 64  # positions per chunk in causal attention (flash-linear-attention's default chunk size)


def _fit_keys(phi_k: torch.Tensor, v: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys cut or zero-padded to `length` positions: with causality query i sees keys j <= i, so keys past
    the last query are never seen, and queries past the last key see them all."""
    if phi_k.shape[2] >= length:
        return phi_k[:, :, :length], v[:, :, :length]
    extra = length - phi_k.shape[2]
    return F.pad(phi_k, (0, 0, 0, extra)), F.pad(v, (0, 0, 0, extra))


def _causal(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Numerators (B, H, n, d) and denominators (B, H, n) of causal linear attention, chunk by chunk."""
    seq = phi_q.shape[2]
    phi_k, v = _fit_keys(phi_k, v, seq)
    pad = (-seq) % CHUNK
    phi_q, phi_k, v = (F.pad(x, (0, 0, 0, pad)) for x in (phi_q, phi_k, v))  # zero features add nothing
    q_c, k_c, v_c = (rearrange(x, "b h (n c) e -> b h n c e", c=CHUNK) for x in (phi_q, phi_k, v))
    inside = torch.matmul(q_c, k_c.transpose(-2, -1)).tril()  # (B, H, chunks, C, C), j <= i within the chunk
    states = torch.matmul(k_c.transpose(-2, -1), v_c)  # (B, H, chunks, m, d): each chunk's sum of phi(k) v^T
    sums = k_c.sum(dim=-2)  # (B, H, chunks, m)
    # The state of the chunks strictly before each chunk: an exclusive prefix sum, so that what follows a
    # chunk can never change its numbers (not even in the last bit).
    before = F.pad(states.cumsum(dim=2), (0, 0, 0, 0, 1, 0))[:, :, :-1]
    sums_before = F.pad(sums.cumsum(dim=2), (0, 0, 1, 0))[:, :, :-1]
    numerators = torch.matmul(inside, v_c) + torch.matmul(q_c, before)  # (B, H, chunks, C, d)
    denominators = inside.sum(dim=-1) + torch.matmul(q_c, sums_before[..., None])[..., 0]  # (B, H, chunks, C)
    numerators = rearrange(numerators, "b h n c d -> b h (n c) d")[:, :, :seq]
    return numerators, rearrange(denominators, "b h n c -> b h (n c)")[:, :, :seq]


def run(call: Call) -> torch.Tensor:
    if call.features is None:
        raise ValueError(f"Kernel 'linear' runs variants with feature maps; {call.name!r} has none.")
    phi_q, phi_k = call.features(call.q, call.k, call.q_pos, call.k_pos, call.causal,
                                 call.key_padding_mask)  # (B, H, seq, m)
    dtype = call.v.dtype
    # Sums and their ratio in float32 at least, autocast or not: a numerator and a denominator each rounded to
    # bfloat16 no longer cancel where a row has few keys (a single key's weight is exactly 1 in the reference
    # formula, here num / den), and the rounding, divided by a small denominator, swamps the gradient
    with torch.autocast(call.v.device.type, enabled=False):
        phi_q, phi_k, v = (x.to(torch.promote_types(x.dtype, torch.float32)) for x in (phi_q, phi_k, call.v))
        if call.key_padding_mask is not None:
            phi_k = phi_k * call.key_padding_mask[:, None, :, None].to(phi_k.dtype)
        if call.causal:
            numerators, denominators = _causal(phi_q, phi_k, v)
        else:
            state = torch.matmul(phi_k.transpose(-2, -1), v)  # (B, H, m, d)
            numerators = torch.matmul(phi_q, state)  # (B, H, seq_q, d)
            denominators = torch.matmul(phi_q, phi_k.sum(dim=2)[..., None])[..., 0]  # (B, H, seq_q)
        out = numerators if call.normaliser == "none" else numerators / denominators.clamp_min(EPSILON)[..., None]
    return out.to(dtype)
