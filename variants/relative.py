"""Relative position terms on scaled dot-product attention: Shaw, T5, ALiBi and rotary.

    logits_ij = q_i . k_j / sqrt(d) + r(i, j)

- `shaw` (Shaw et al. 2018, "Self-Attention with Relative Position Representations"): learned key
  embeddings a_m for the clipped distance m = clip(j - i, -max_distance, max_distance), shared by the
  heads; r(i, j) = q_i . a_m / sqrt(d), the key term of the paper. O(n^2 d) time; the per-distance
  products q_i . a_m, O(n * max_distance), are computed once per call and looked up per pair, which is
  how FlexAttention runs it (no sdpa: r depends on q).
- `t5` (Raffel et al. 2020): a learned scalar per head and bucket of j - i, buckets exact up to
  num_buckets/4 (bidirectional) or /2 (causal) and log-spaced up to max_distance, as T5's
  `_relative_position_bucket`. Per pair on flex; an O(n^2) bias on sdpa.
- `alibi` (Press et al. 2022, "Train Short, Test Long"): r(i, j) = -m_h |i - j| with the paper's
  geometric head slopes, and its interleaving rule for head counts that are not powers of two.
- `rope` (Su et al. 2021, "RoFormer"): q and k rotated by position-dependent angles
  theta_t = base^(-2t/d) (rotate-half pairing, t < d/2), so q_i . k_j depends on j - i only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from common.options import fill_choice_defaults, option, require
from variants.base import Attention, Choice, NormaliserOptions, PairBias, Range, ScoreMod
from variants.registry import register

# The options each kind reads, with their defaults; an option given for a kind that ignores it is an error.
KIND_DEFAULTS = {
    "shaw": {"max_distance": 16},
    "t5": {"num_buckets": 32, "max_distance": 128},
    "alibi": {},
    "rope": {"rope_base": 10000.0},
}


def alibi_slopes(num_heads: int) -> list[float]:
    """Press et al.'s head slopes: 2^(-8/n), its powers, and interleaving for non-powers of two."""
    if math.log2(num_heads).is_integer():
        start = 2.0 ** (-(2.0 ** -(math.log2(num_heads) - 3)))
        return [start ** (power + 1) for power in range(num_heads)]
    closest_power = 2 ** math.floor(math.log2(num_heads))
    extra = alibi_slopes(2 * closest_power)[0::2][: num_heads - closest_power]
    return alibi_slopes(closest_power) + extra


def t5_bucket(relative: torch.Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int) -> torch.Tensor:
    """T5's `_relative_position_bucket` for relative = key position - query position (elementwise, so that
    FlexAttention can call it per pair)."""
    if bidirectional:
        num_buckets //= 2
        buckets = (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        buckets = 0
        distance = (-relative).clamp(min=0)  # only the past has its own buckets
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log-spaced beyond max_exact; clamp(min=1) only keeps log finite where is_small picks the exact bucket
    large = max_exact + (
        torch.log(distance.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


@register("relative")
class Relative(Attention):
    """Scaled dot product plus a relative position term: shaw, t5, alibi or rope."""

    # Each kind is a subclass below (`class_for`) overriding the hooks it uses, so that its kernels follow.
    # A position term per pair: flex computes it inside its fused kernel, sdpa materialises it (n x n).
    kernel_preference = ("flex",)
    provides_positions = True  # every kind: its position term replaces absolute positions in its paper
    order_aware = True

    # Each kind's own options, searched only when it is chosen; t5 keeps max_distance at its default
    # (128), which exceeds num_buckets // 2 over the whole range.
    search_space = {
        "kind": Choice(("shaw", "t5", "alibi", "rope")),
        "max_distance": Range(2, "seq_len", log=True, when=("kind", ("shaw",))),
        "num_buckets": Range(4, 64, log=True, when=("kind", ("t5",))),
        "rope_base": Range(100.0, 100000.0, log=True, when=("kind", ("rope",))),
    }

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        kind: Literal["shaw", "t5", "alibi", "rope"] = option(
            "alibi", "which relative position scheme (each kind runs on the kernels `list` shows for it)", tag=""
        )
        num_buckets: int | None = option(None, "t5: number of buckets (default 32)", tag="b")
        max_distance: int | None = option(
            None, "shaw: clip distance (default 16); t5: distance of the last bucket (default 128)", tag="d"
        )
        rope_base: float | None = option(None, "rope: base of the rotation frequencies (default 10000)")

        def __post_init__(self) -> None:
            fill_choice_defaults(self, "kind", KIND_DEFAULTS)
            require(self.max_distance is None or self.max_distance >= 1, "max_distance", self.max_distance,
                    "an integer >= 1")
            require(self.num_buckets is None or self.num_buckets >= 4, "num_buckets", self.num_buckets,
                    "an integer >= 4")
            require(self.rope_base is None or self.rope_base > 1, "rope_base", self.rope_base, "a number > 1")
            if self.kind == "t5":
                require(self.max_distance > self.num_buckets // 2, "max_distance", self.max_distance,
                        f"an integer > num_buckets // 2 = {self.num_buckets // 2} (the buckets before it are exact)")

    @classmethod
    def class_for(cls, options: Options, layer_index: int = 0) -> type[Attention]:
        return {"shaw": Shaw, "t5": T5, "alibi": ALiBi, "rope": Rope}[options.kind]


class Shaw(Relative):
    """Shaw et al.'s key term q_i . a_clip(j - i) / sqrt(d): a function of q per pair, so a `score_mod`."""

    def __init__(self, options: Relative.Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.distance_embedding = nn.Parameter(  # (2 * max_distance + 1, head_dim), shared by heads
            torch.randn(2 * options.max_distance + 1, self.head_dim) * 0.02
        )

    def score_mod(self, q, k, q_pos, causal) -> ScoreMod | None:
        limit = self.options.max_distance
        per_distance = torch.matmul(q, self.distance_embedding.T) * self.logit_scale()  # (B, H, seq_q, 2*limit+1)
        first = q_pos[0]  # q's first row sits at this position (the chunked kernel passes slices)

        def key_term(score, batch, head, q_idx, kv_idx):
            distance = (kv_idx - q_idx).clamp(-limit, limit) + limit
            return score + per_distance[batch, head, q_idx - first, distance]

        return key_term


class T5(Relative):
    """T5's learned scalar per head and bucket of j - i: a `pair_bias`."""

    def __init__(self, options: Relative.Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.bucket_bias = nn.Parameter(torch.randn(options.num_buckets, self.num_heads) * 0.02)

    def pair_bias(self, causal, device, dtype) -> PairBias | None:
        num_buckets, max_distance = self.options.num_buckets, self.options.max_distance

        def t5_bias(head, q_idx, kv_idx):
            bucket = t5_bucket(kv_idx - q_idx, bidirectional=not causal, num_buckets=num_buckets,
                               max_distance=max_distance)
            return self.bucket_bias[bucket, head]

        return t5_bias


class ALiBi(Relative):
    """ALiBi's -m_h |i - j|: a `pair_bias`."""

    def __init__(self, options: Relative.Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.slopes = tuple(alibi_slopes(self.num_heads))  # exact in any dtype: not a buffer .float() rounds

    def pair_bias(self, causal, device, dtype) -> PairBias | None:
        slopes = torch.tensor(self.slopes, dtype=dtype, device=device)  # (H,)
        return lambda head, q_idx, kv_idx: -slopes[head] * (kv_idx - q_idx).abs()


class Rope(Relative):
    """Rotary embedding: q and k rotated in `prepare`, then scored as dense attention is."""

    kernel_preference = ()  # no term left per pair: sdpa's flash kernel first, as for dense

    def __init__(self, options: Relative.Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if self.head_dim % 2:
            raise ValueError(f"Relative kind 'rope' rotates pairs of dimensions; head_dim={self.head_dim} is odd, "
                             "accepted: an even head_dim.")

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._rotate(q), self._rotate(k)

    def _rotate(self, x: torch.Tensor) -> torch.Tensor:
        """Rotary embedding, rotate-half pairing: dims t and t + d/2 rotate by position * theta_t."""
        half = self.head_dim // 2
        theta = self.options.rope_base ** (-torch.arange(half, device=x.device, dtype=torch.float64) / half)
        angles = torch.arange(x.shape[2], device=x.device, dtype=torch.float64)[:, None] * theta  # (seq, d/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
