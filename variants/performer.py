"""Performer (Choromanski et al. 2021, "Rethinking Attention with Performers"): FAVOR+, softmax attention
estimated with positive orthogonal random features, in O(n).

    exp(q.k / sqrt(d)) = E_w[phi(q) . phi(k)],   phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(m),   x' = x / d^(1/4)

with the m rows w_r of W drawn from N(0, I_d) (Lemma 1 of the paper: positive random features, so every
estimate of a similarity is positive and the normalised weights are a distribution). With `orthogonal` (the
paper's choice) the rows come in blocks of d exactly orthogonal ones, each block the Q of a QR
factorisation of a Gaussian d x d matrix (signs fixed by R's diagonal, so that Q is uniformly distributed), and
each row is rescaled to the norm of a fresh Gaussian vector, so that every row is still marginally N(0, I_d)
and the estimate stays unbiased with a lower variance. Attention is then linear attention on these
features: O(n m d) time on the `linear` kernel instead of O(n^2 d).

Stabilisers keep exp finite, as in the paper's code: a maximum of the exponent is subtracted, a factor that
cancels exactly in the normalisation. For the queries the maximum of each row over its features; for the keys
the maximum over all the real (unpadded) keys and features of a batch element and head, when not causal. A
causal call has no key stabiliser, since that maximum would read the future: the key exponent w.x' - |x'|^2/2
is then bounded by |w|^2/2, about d/2 plus a few standard deviations over the rows (near 50 at head_dim 64, far
below float32's limit of 88; near that limit at head_dim 128). The estimated row sum is floored at 1e-6, as in
linear attention's code: a causal row whose key features all but vanish (large key norms, no key stabiliser)
would otherwise divide by a number whose square underflows, and its gradient overflow (a quick-profile
induction run diverged so).

The random matrix W is drawn from a torch.Generator seeded from (run seed, layer index, number of draws so
far), redrawn every `redraw` forward calls in training mode (never in eval), and kept in
the module's state dict (W in a buffer, the counters as extra state, plain integers so that a forward never
waits on the device to read them): a run and its resume use the same features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from einops import rearrange

from common.options import option, require
from variants.base import Attention, Complexity, Range
from variants.kernels.call import untraced
from variants.layouts import derived_seed
from variants.registry import register


def random_features(num_features: int, dim: int, seed: int, orthogonal: bool) -> torch.Tensor:
    """W (num_features, dim) in float64, drawn on the CPU from `seed`: iid N(0, 1) entries, or orthogonal
    blocks of `dim` rows with Gaussian row norms (the paper's orthogonal random features)."""
    generator = torch.Generator().manual_seed(seed)
    if not orthogonal:
        return torch.randn(num_features, dim, generator=generator, dtype=torch.float64)
    blocks = math.ceil(num_features / dim)
    gaussian = torch.randn(blocks, dim, dim, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)  # (blocks, d, d): orthonormal columns
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]  # Haar-distributed (Mezzadri 2007)
    rows = rearrange(q, "b d r -> (b r) d")[:num_features]  # the columns of each block, as rows
    norms = torch.randn(num_features, dim, generator=generator, dtype=torch.float64).norm(dim=-1)
    return rows * norms[:, None]


def positive_features(x: torch.Tensor, projection: torch.Tensor, stabilise_over: tuple[int, ...],
                      real: torch.Tensor | None = None) -> torch.Tensor:
    """phi(x) (B, H, seq, m) for x (B, H, seq, d), with the maximum of the exponent over the dimensions
    `stabilise_over` subtracted (a factor common to what it spans; none when empty), taken over the positions
    that are `real` (B, seq) where given, so that a padded key never sets the scale of the real ones. The
    exponent is computed in float32 at least, also under bf16 autocast: its rounding would multiply the
    features."""
    dtype = torch.promote_types(x.dtype, torch.float32)
    with torch.autocast(x.device.type, enabled=False):
        scaled = x.to(dtype) * x.shape[-1] ** -0.25  # x' = x / d^(1/4)
        exponent = scaled @ projection.to(dtype).T - scaled.square().sum(dim=-1, keepdim=True) / 2
        if stabilise_over:
            seen = exponent.detach()
            if real is not None:
                seen = seen.masked_fill(~real[:, None, :, None], float("-inf"))
            largest = seen.amax(dim=stabilise_over, keepdim=True)
            exponent = exponent - largest.masked_fill(largest == float("-inf"), 0.0)  # no real key: no stabiliser
        features = torch.exp(exponent) / math.sqrt(projection.shape[0])
    return features.to(x.dtype)


@register("performer")
class Performer(Attention):
    """FAVOR+: positive (orthogonal) random features whose dot products estimate exp(q.k / sqrt(d)); O(n m d)."""

    complexity = Complexity("O(n m d)", 1, 1)  # m random features
    normaliser = "sum"

    approximation = ("Approximates softmax attention with num_features positive random features: unbiased in "
                     "expectation, with an error that falls as num_features grows.")
    search_space = {"num_features": Range(16, 1024, log=True)}

    @dataclass(frozen=True)
    class Options:
        num_features: int | None = option(
            None, "m, the number of random features (none: round(head_dim * ln(head_dim)), the paper's "
                  "m = Theta(d log d) as in its reference code)", tag="m")
        redraw: int = option(1000, "training forward calls between redraws of the features (0: never)", tag="r")
        orthogonal: bool = option(True, "orthogonal random features (the paper's), else iid Gaussian ones",
                                  tag="orf")

        def __post_init__(self) -> None:
            require(self.num_features is None or self.num_features >= 1, "num_features", self.num_features,
                    "none or an integer >= 1")
            require(self.redraw >= 0, "redraw", self.redraw, "an integer >= 0 (0: never redraw)")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.draws = 0  # redraws so far: W was drawn from (run seed, layer index, draws)
        self.calls_since_draw = 0  # training forward calls that have used the current W
        self.num_features = options.num_features or max(1, round(self.head_dim * math.log(self.head_dim)))
        self.register_buffer("projection", self._draw())  # W (num_features, head_dim)

    def _draw(self) -> torch.Tensor:
        seed = derived_seed(self.run_seed, self.layer_index, self.draws)
        return random_features(self.num_features, self.head_dim, seed, self.options.orthogonal).float()

    @untraced
    def _count_training_call(self) -> None:
        """Redraw W when the current one has served `redraw` training calls, then count this call. W is
        replaced, not written in place: a graph still waiting for its backward keeps the W it used."""
        if self.calls_since_draw == self.options.redraw:
            self.draws += 1
            self.calls_since_draw = 0
            self.projection = self._draw().to(self.projection)
        self.calls_since_draw += 1

    def get_extra_state(self) -> dict[str, int]:
        return {"draws": self.draws, "calls_since_draw": self.calls_since_draw}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.draws, self.calls_since_draw = int(state["draws"]), int(state["calls_since_draw"])

    def features(self, q, k, q_pos, k_pos, causal, key_padding_mask) -> tuple[torch.Tensor, torch.Tensor]:
        phi_q = positive_features(q, self.projection, (-1,))
        phi_k = positive_features(k, self.projection, () if causal else (-2, -1), key_padding_mask)
        return phi_q, phi_k

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any):
        if self.training and self.options.redraw:
            self._count_training_call()
        return super().forward(q, k, v, **kwargs)
