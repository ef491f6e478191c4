"""The base of every attention variant: a score, a layout and a normaliser, executed by a kernel.

A variant says how a query and a key become a logit (`prepare`, `logit_scale`, `pair_bias`, `score_mod`,
`logits`) and which keys a query may see (`allowed`); the normaliser is the softmax. A kernel (see
`variants.kernels`) executes that description; the variant states which kernels can run it in
`kernels`, and `kernel="auto"` picks the fastest of those on the device of the call.

A per-pair score is written once, as a function of broadcast index tensors (`pair_bias`, `score_mod`):
the reference formula calls it on whole position ranges, FlexAttention's fused kernel on each pair.

Positions: query i sits at position i and key j at position j, also when the lengths differ, so
`causal=True` lets query i see the keys j <= i (the alignment of `scaled_dot_product_attention`).

A variant also declares where a hyperparameter sweep should look for each of its options
(`search_space`, with `Range` and `Choice`), next to the code the options control.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from common.options import format_value
from variants import kernels, layouts
from variants.kernels.call import untraced

Bound = int | float | str  # a number, or "seq_len", "head_dim", "steps", optionally "*k" or "/k" (k an integer)
# (head, query position, key position) -> additive term; integer tensors that broadcast together.
PairBias = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# (score, batch, head, query position, key position) -> logit: FlexAttention's score_mod signature.
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Range:
    """A sweep searches the option from `low` to `high`, uniformly or log-uniformly; integers when the
    option is an integer. A bound may name a size of the run (`"seq_len"`, `"head_dim"`, `"steps"`,
    scaled as in `"steps/5"` or `"head_dim*4"`), resolved when the sweep starts. `when=("pattern",
    ("strided", "fixed"))`: searched only when the option `pattern`, declared before it, takes one of
    those values (otherwise the option keeps its default)."""

    low: Bound
    high: Bound
    log: bool = False
    when: tuple[str, tuple[Any, ...]] | None = None


@dataclass(frozen=True)
class Choice:
    """A sweep picks one of `choices` for the option (`when` as for `Range`)."""

    choices: tuple[Any, ...]
    when: tuple[str, tuple[Any, ...]] | None = None


class Attention(nn.Module):
    """Attention over (batch, heads, seq, head_dim) tensors; subclasses override what differs."""

    name: ClassVar[str]  # set by variants.register
    Options: ClassVar[type]  # a frozen dataclass of the variant's options
    # The kernels that can run this variant, fastest first: `auto` takes the first that trains on the device
    # (flex and xformers train on CUDA only, so the CPU gets the next one listed).
    kernels: ClassVar[tuple[str, ...]] = ("sdpa", "flex", "xformers", "chunked", "reference")
    # Which keys each query may see beyond causality and padding; None: all of them.
    pattern: layouts.Layout | None = None
    # Where a sweep searches each option (an option not named keeps its default); see Range and Choice.
    search_space: ClassVar[dict[str, Range | Choice]] = {}
    # Whether the variant brings its own position terms (as ALiBi, RoPE, T5 and Shaw do, in place of absolute
    # positions in their papers): the model then adds no absolute positions unless a config asks for them.
    provides_positions: ClassVar[bool] = False

    def __init__(self, options: Any, *, num_heads: int, head_dim: int, kernel: str) -> None:
        super().__init__()
        self.options = options
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.requested_kernel = kernel
        # Follows the module across .to(device), so `kernel` can answer for the device it lives on.
        self.register_buffer("_device_probe", torch.empty(0), persistent=False)
        self._plans: dict[tuple, layouts.Plan] = {}

    # ----------------------------------------------------------------------------------------------
    # The score. Dot-product variants only change the scale, the bias or the q/k transform.

    @property
    def pair_width(self) -> int:
        """Floats materialised per (query, key) pair while scoring; sizes the chunked kernel's chunks."""
        return 1

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Transform whole q and k once before scoring (rotary embedding, projections)."""
        return q, k

    def logit_scale(self) -> float | torch.Tensor:
        """Factor on q.k: a float, or a (heads, 1, 1) tensor when it is learned per head."""
        return 1.0 / math.sqrt(self.head_dim)

    def pair_bias(self, causal: bool, device: torch.device, dtype: torch.dtype) -> PairBias | None:
        """The additive term that depends on positions only, as a function of (head, query position, key
        position), elementwise over integer tensors that broadcast together; None when there is none.

        Constants it holds are made on `device` in `dtype` (float64 where the logits are, for exactness);
        learned tables keep their own dtype. Callers cast the result to the logits' dtype."""
        return None

    def logit_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool) -> torch.Tensor | None:
        """`pair_bias` expanded: (heads, ..., seq_q, seq_k) for query positions (..., seq_q) and key positions
        (..., seq_k), in float64 where it holds constants; None when there is none (sdpa and blocked)."""
        bias = self.pair_bias(causal, q_pos.device, torch.float64)
        if bias is None:
            return None
        heads = torch.arange(self.num_heads, device=q_pos.device).view(-1, *[1] * (q_pos.dim() + 1))
        return bias(heads, q_pos[..., :, None], k_pos[..., None, :])

    def score_mod(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, causal: bool) -> ScoreMod | None:
        """The logit of a pair from its scaled dot product `score = logit_scale() * q'.k'`, as a FlexAttention
        `score_mod` (score, batch, head, query position, key position) -> logit, elementwise over tensors
        that broadcast together; None when the logit is the score itself.

        Built per call from the prepared q (whose first row sits at position q_pos[0]) and k, so it may
        capture tensors computed from them. A variant whose score is any other per-pair function of the
        scaled dot product and the positions overrides this, and then runs on flex as it runs on reference.
        """
        bias = self.pair_bias(causal, q.device, torch.float64 if q.dtype == torch.float64 else torch.float32)
        if bias is None:
            return None

        def add_bias(score, batch, head, q_idx, kv_idx):
            return score + bias(head, q_idx, kv_idx).to(score.dtype)

        return add_bias

    def logits(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        """Logits (batch, heads, len(q_pos), len(k_pos)) for prepared q (those positions) and k: the scaled
        dot product through `score_mod`, called on whole index ranges."""
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.logit_scale()  # (B, H, seq_q, seq_k)
        score_mod = self.score_mod(q, k, q_pos, causal)
        if score_mod is None:
            return scores
        batch = torch.arange(q.shape[0], device=q.device)[:, None, None, None]
        heads = torch.arange(q.shape[1], device=q.device)[None, :, None, None]
        return score_mod(scores, batch, heads, q_pos[:, None], k_pos[None, :])

    # ----------------------------------------------------------------------------------------------
    # The layout: which keys each query may see.

    def allowed(
        self,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        causal: bool,
        key_padding_mask: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """Bool (batch or 1, 1, len(q_pos), len(k_pos)), True where attended; None when all are.

        With a pattern, q_pos and k_pos must be the whole ranges 0..seq-1 (layout variants do not list
        the chunked kernel, the one that passes a slice of the queries).
        """
        mask = None
        if self.pattern is not None:
            mask = layouts.dense(self.pattern, len(q_pos), len(k_pos), causal, q_pos.device)[None, None]
        elif causal:
            mask = (k_pos[None, :] <= q_pos[:, None])[None, None]
        if key_padding_mask is not None:
            padding = key_padding_mask[:, None, None, :]
            mask = padding if mask is None else mask & padding
        return mask

    def layout(self, seq_q: int, seq_k: int, *, causal: bool = False) -> torch.Tensor:
        """Bool (seq_q, seq_k) of the pairs this variant attends, for drawing and checking layouts."""
        if self.pattern is not None:
            return layouts.dense(self.pattern, seq_q, seq_k, causal)
        everything = torch.ones(seq_q, seq_k, dtype=torch.bool)
        return everything.tril() if causal else everything

    @untraced  # in a compiled model: looked up in the cache, never traced into the graph
    def plan(self, seq_q: int, seq_k: int, causal: bool, device: torch.device, max_pairs: int) -> layouts.Plan:
        """The pattern cut into chunks for the blocked kernel, cached per lengths, causality and device."""
        key = (seq_q, seq_k, causal, str(device), max_pairs)
        if key not in self._plans:
            if len(self._plans) >= 16:  # lengths change rarely; keep the cache small all the same
                self._plans.clear()
            self._plans[key] = layouts.plan(self.pattern, seq_q, seq_k, causal, device, max_pairs)
        return self._plans[key]

    # ----------------------------------------------------------------------------------------------

    def describe(self) -> str:
        """Short self-describing name, e.g. `temperature_t0.5`: the name plus its tagged options."""
        parts = [self.name]
        for field, value in vars(self.options).items():
            tag = type(self.options).__dataclass_fields__[field].metadata.get("tag")
            if tag is None or value is None or value is False:
                continue
            parts.append(tag if value is True else f"{tag}{format_value(value)}")
        return "_".join(parts)

    def extra_repr(self) -> str:
        return f"{self.describe()}, num_heads={self.num_heads}, head_dim={self.head_dim}, kernel={self.kernel}"

    @property
    def kernel(self) -> str:
        """The kernel this module runs on the device it lives on (what `auto` chose, or the forced one)."""
        return kernels.choose(self, self._device_probe.device).name

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        causal: bool = False,
        key_padding_mask: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """q (batch, heads, seq_q, head_dim), k (batch, heads, seq_k, head_dim), v (batch, heads, seq_k, dim_v).

        key_padding_mask: (batch, seq_k) bool, True where a key is real. Rows that may see no key
        output zeros. With return_weights=True also returns the dense weights (batch, heads, seq_q,
        seq_k), computed by the reference formula (for analysis on short sequences).
        """
        kernels.check_inputs(self, q, k, v, key_padding_mask)
        q_pos, k_pos = torch.arange(q.shape[2], device=q.device), torch.arange(k.shape[2], device=k.device)
        call = kernels.Call(self, *self.prepare(q, k), v, q_pos, k_pos, causal, key_padding_mask)
        if return_weights:
            return kernels.attend_with_weights(call)
        return kernels.choose(self, q.device).run(call)
