"""The base of every attention variant: a score, a layout and a normaliser, executed by a kernel.

A variant says how a query and a key become a logit (`prepare`, `logit_scale`, `logit_bias`, `logits`)
and which keys a query may see (`allowed`); the normaliser is the softmax. A kernel (see
`variants.kernels`) executes that description; the variant states which kernels can run it in
`kernels`, and `backend="auto"` picks the fastest of those on the device of the call.

Positions: query i sits at position i and key j at position j, also when the lengths differ, so
`causal=True` lets query i see the keys j <= i (the alignment of `scaled_dot_product_attention`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import nn

from variants import kernels, layouts
from variants.options import format_value


class Attention(nn.Module):
    """Attention over (batch, heads, seq, head_dim) tensors; subclasses override what differs."""

    name: ClassVar[str]  # set by variants.register
    Options: ClassVar[type]  # a frozen dataclass of the variant's options
    # The kernels that can run this variant, fastest first: `auto` takes the first that runs on the device.
    kernels: ClassVar[tuple[str, ...]] = ("sdpa", "chunked", "reference")
    # Which keys each query may see beyond causality and padding; None: all of them.
    pattern: layouts.Layout | None = None

    def __init__(self, options: Any, *, num_heads: int, head_dim: int, backend: str) -> None:
        super().__init__()
        self.options = options
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.requested_backend = backend
        # Follows the module across .to(device), so `backend` can answer for the device it lives on.
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

    def logit_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool) -> torch.Tensor | None:
        """Additive bias that depends on positions only: (heads, seq_q, seq_k), or None.

        It may come in float64 (exact constants); kernels cast it to the logits' dtype."""
        return None

    def logits(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        """Logits (batch, heads, len(q_pos), len(k_pos)) for prepared q (those positions) and k."""
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.logit_scale()
        bias = self.logit_bias(q_pos, k_pos, causal)
        return scores if bias is None else scores + bias.to(scores.dtype)

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
        return f"{self.describe()}, num_heads={self.num_heads}, head_dim={self.head_dim}, backend={self.backend}"

    @property
    def backend(self) -> str:
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
