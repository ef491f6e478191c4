"""Nystromformer (Xiong et al. 2021, "Nystromformer: A Nystrom-Based Algorithm for Approximating
Self-Attention").

    weights = softmax(q k~^T / sqrt(d)) Z softmax(q~ k^T / sqrt(d)),   Z ~ pinv(softmax(q~ k~^T / sqrt(d)))

q~ and k~ are m = `num_landmarks` landmarks: the means of the queries and of the keys over m segments of
nearly equal size that cover the sequence (segment of position p: floor(p m / n)). Z is the paper's
iterative approximation of the Moore-Penrose pseudo-inverse (Razavi et al. 2014), `pinv_iterations` steps of

    Z_{j+1} = Z_j (13 I - A Z_j (15 I - A Z_j (7 I - A Z_j))) / 4,   Z_0 = A^T / (||A||_1 ||A||_inf)

with ||A||_1 the largest column sum and ||A||_inf the largest row sum of each (batch, head) matrix A; the
paper's code takes the maximum over the whole batch tensor instead, which ties each example's start to the
others in its batch. As the low-rank family's factors, the three matrices are n x m, m x m and m x n: the
`lowrank` kernel applies them to the values right to left in O(n m d), plus O(m^3) per pseudo-inverse step.

Choices, with the paper:
- A sequence shorter than `num_landmarks` uses one landmark per position (each segment one position): with
  a converged pseudo-inverse the weights are then exactly softmax attention (S pinv(S) S = S).
- Padding masks keys only: a key landmark is the mean over the real keys of its segment, and a landmark
  whose segment holds no real key gets no weight (masked in the first two softmaxes); padded keys are
  masked in the last one. Query landmarks are the means of all queries of their segment.
- The paper's depthwise convolution over the values, added to the output as a skip connection, is a token
  mixer of its own rather than part of the attention weights: it is left out.
Bidirectional, as in the paper (landmarks average over the whole sequence): no causal form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from common.options import option, require
from variants.base import Attention, Complexity, Range
from variants.normalisers import softmax
from variants.registry import register


@register("nystromformer")
class Nystromformer(Attention):
    """Segment-mean landmarks and an iterative pseudo-inverse: three softmaxes of n x m, m x m, m x n; O(n m d)."""

    complexity = Complexity("O(n m d)", 1, 1)  # m landmarks

    supports_causal = False
    approximation = ("A Nystrom approximation of softmax attention through segment-mean landmarks and an "
                     "iterative pseudo-inverse; exact only with one landmark per position once it has converged.")
    search_space = {"num_landmarks": Range(4, "seq_len", log=True)}

    @dataclass(frozen=True)
    class Options:
        num_landmarks: int = option(32, "landmarks m: segment means of the queries and of the keys", tag="m")
        pinv_iterations: int = option(6, "steps of the iterative pseudo-inverse (the paper's 6)", tag="it")

        def __post_init__(self) -> None:
            require(self.num_landmarks >= 1, "num_landmarks", self.num_landmarks, "an integer >= 1")
            require(self.pinv_iterations >= 1, "pinv_iterations", self.pinv_iterations, "an integer >= 1")

    def factors(self, q: torch.Tensor, k: torch.Tensor, key_padding_mask: torch.Tensor | None) -> list[torch.Tensor]:
        scale = 1.0 / math.sqrt(self.head_dim)
        q_landmarks, _ = segment_means(q, self.options.num_landmarks, None)  # (B, H, m_q, d)
        k_landmarks, landmark_has_key = segment_means(k, self.options.num_landmarks, key_padding_mask)  # (B, H, m_k, d)
        real_keys = None if key_padding_mask is None else key_padding_mask[:, None, None, :]  # (B, 1, 1, seq_k)
        to_landmarks = softmax(torch.matmul(q, k_landmarks.transpose(-2, -1)) * scale, landmark_has_key)
        between_landmarks = softmax(torch.matmul(q_landmarks, k_landmarks.transpose(-2, -1)) * scale, landmark_has_key)
        from_landmarks = softmax(torch.matmul(q_landmarks, k.transpose(-2, -1)) * scale, real_keys)
        # (B, H, seq_q, m_k), (B, H, m_k, m_q), (B, H, m_q, seq_k)
        return [to_landmarks, iterative_pinv(between_landmarks, self.options.pinv_iterations), from_landmarks]


def segment_means(x: torch.Tensor, num_landmarks: int, real: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Means of x (B, H, n, d) over min(num_landmarks, n) segments of nearly equal size, over the positions
    `real` (B, n) marks (None: all); and bool (B, 1, 1, m), True where a segment holds a real position (None
    when all are real)."""
    length = x.shape[2]
    count = min(num_landmarks, length)
    segment = torch.arange(length, device=x.device) * count // length  # (n,): each of 0..count-1 at least once
    members = (segment[None, :] == torch.arange(count, device=x.device)[:, None]).to(x.dtype)  # (m, n)
    members = members[None] if real is None else members * real[:, None, :].to(x.dtype)  # (B or 1, m, n)
    sizes = members.sum(dim=-1, keepdim=True)  # (B or 1, m, 1)
    means = torch.matmul((members / sizes.clamp_min(1.0))[:, None], x)  # (B, H, m, d)
    return means, None if real is None else (sizes[:, None, None, :, 0] > 0)


def iterative_pinv(matrix: torch.Tensor, iterations: int) -> torch.Tensor:
    """The iterative Moore-Penrose pseudo-inverse of each (..., rows, cols) matrix (Razavi et al. 2014, as
    Xiong et al. 2021 use it), started from A^T / (largest column sum * largest row sum) of that matrix."""
    magnitudes = matrix.abs()
    norms = magnitudes.sum(dim=-2).amax(dim=-1) * magnitudes.sum(dim=-1).amax(dim=-1)  # (...)
    # A matrix of zeros (a batch element without real keys) starts, and stays, at zeros.
    norms = torch.where(norms > 0, norms, torch.ones_like(norms))
    inverse = matrix.transpose(-2, -1) / norms[..., None, None]
    identity = torch.eye(matrix.shape[-2], dtype=matrix.dtype, device=matrix.device)
    for _ in range(iterations):
        product = torch.matmul(matrix, inverse)  # A Z: (..., rows, rows)
        inner = 15 * identity - torch.matmul(product, 7 * identity - product)
        inverse = 0.25 * torch.matmul(inverse, 13 * identity - torch.matmul(product, inner))
    return inverse
