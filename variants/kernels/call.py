"""What a kernel receives: one attention call, with q and k already through the variant's `prepare`, and
the variant's hooks as plain values and functions (which kernel reads which: the table in `variants.base`).

Kernels know nothing of the variant classes: everything they read of a variant is in the `Call`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from variants.layouts import Layout
from variants.normalisers import Normalise

# (score, batch, head, query position, key position) -> logit: FlexAttention's score_mod signature.
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# (q, k, q_pos, k_pos, causal) -> logits (B, H, len(q_pos), len(k_pos)), for q at positions q_pos.
Logits = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]
# (q_pos, k_pos, causal, key_padding_mask) -> bool (B or 1, H or 1, seq_q, seq_k), True where attended; or None.
Allowed = Callable[[torch.Tensor, torch.Tensor, bool, torch.Tensor | None], torch.Tensor | None]
# (q_pos, k_pos, causal) -> additive term (H, ..., seq_q, seq_k) for positions (..., seq_q) and (..., seq_k); or None.
LogitBias = Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor | None]
# (q, k, q_pos, causal) -> the ScoreMod of these prepared q (first row at q_pos[0]) and k; or None.
ScoreModFor = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], ScoreMod | None]
# (q, k, q_pos, k_pos, causal, key_padding_mask) -> non-negative features phi(q) (B, H, seq_q, m) and phi(k)
# (B, H, seq_k, m), whose dot product phi(q_i) . phi(k_j) is the similarity of a pair (the kernelised family).
Features = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool, torch.Tensor | None],
                    tuple[torch.Tensor, torch.Tensor]]
# (q, k, key_padding_mask) -> matrices whose product, left to right, is the (B, H, seq_q, seq_k) weights (the
# low-rank family: Linformer, Nystromformer); bidirectional, so no causal flag.
Factors = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], list[torch.Tensor]]


@dataclass(frozen=True)
class Call:
    q: torch.Tensor  # (B, H, seq_q, d), prepared (rotated, projected) by the variant
    k: torch.Tensor  # (B, H, seq_k, d), prepared
    v: torch.Tensor  # (B, H, seq_k, dim_v)
    q_pos: torch.Tensor  # (seq_q,) positions of the queries: 0..seq_q-1, or a slice of them
    k_pos: torch.Tensor  # (seq_k,) positions of the keys
    causal: bool
    key_padding_mask: torch.Tensor | None  # (B, seq_k) bool, True where a key is real
    name: str  # the variant as it describes itself, for errors
    scale: float | torch.Tensor  # the factor on q.k: a float, or (H, 1, 1) when learned per head
    layout: Layout | None  # which keys each query may see beyond causality and padding; None: all
    logits: Logits  # reference, chunked (additive computes the same logits from additive_scorer)
    allowed: Allowed  # reference, chunked, sdpa, additive
    logit_bias: LogitBias  # sdpa, blocked
    score_mod: ScoreModFor  # flex (xformers refuses a call that has one)
    pair_width: int  # floats materialised per (query, key) pair while scoring: sizes the chunked kernel's chunks
    parameters: Callable[[], Iterable[torch.Tensor]]  # its learned tensors (flex on CPU: no gradient; additive)
    # The variant's normaliser bound to what it learns (adaptive entmax's alpha per head): (B, H, ..., seq_k)
    # similarities, head axis 1, and the keys allowed -> weights. Reference, chunked, blocked, additive.
    normalise: Normalise
    normaliser: str = "softmax"  # its name (`variants.normalisers`): what kernels that compute one form check
    features: Features | None = None  # the kernelised family's feature maps, of whole q and k: reference, linear
    factors: Factors | None = None  # the low-rank family's factors of the weights: reference, lowrank
    # The additive family's score vector w (H, hidden): logits w . tanh(q_i + k_j) of the prepared q and k, which
    # reference and chunked compute through `logits`, the additive kernel from w (with `parameters`: what the
    # normaliser learns, differentiated in its backward pass).
    additive_scorer: torch.Tensor | None = None


def untraced(function: Callable) -> Callable:
    """`function` runs eagerly, never traced into a compiled graph (a cache lookup, say). The wrapping with
    torch.compiler.disable happens only while compiling: importing it loads dynamo, seconds an eager run
    never needs to spend."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        if torch.compiler.is_compiling():
            return _disabled(function)(*args, **kwargs)
        return function(*args, **kwargs)

    return call


@functools.cache
def _disabled(function: Callable) -> Callable:
    return torch.compiler.disable(function)
