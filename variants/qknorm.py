"""QK normalisation (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters";
Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training instabilities").

    q' = g_q * norm(q) + b_q,   k' = g_k * norm(k),   softmax(q' k'^T / sqrt(d)) v

q and k are normalised per head over head_dim before the dot product, so the logits stay bounded
whatever the scale of q and k (|q' . k'| <= |q'| |k'|): the remedy both papers give for attention
logits that grow until the softmax collapses onto one key. `norm="layer"` is LayerNorm (mean and
variance), `norm="rms"` is RMSNorm (root mean square only); both use LayerNorm's default eps = 1e-5
under the square root. The learnable gains g_q, g_k (initially 1) and, for LayerNorm, the query bias
b_q (initially 0) are per head and dimension, (heads, head_dim). A key bias b_k is left out on purpose:
it would add q'_i . b_k to every logit of row i, which the softmax cancels, so it could never learn.
Cost: as `dense`, O(n^2 d) time on dense's fused kernels, plus O(n d) for the norms and 3 (layer) or
2 (rms) * heads * d parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from common.options import option
from variants.base import Attention, Choice, NormaliserOptions
from variants.registry import register

EPS = 1e-5  # LayerNorm's default


@register("qknorm")
class QKNorm(Attention):
    """Scaled dot product of q and k each normalised per head (LayerNorm or RMSNorm) with learned gains."""

    search_space = {"norm": Choice(("layer", "rms"))}

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        norm: Literal["layer", "rms"] = option(
            "layer", "how q and k are normalised over head_dim: LayerNorm with a query bias, or RMSNorm", tag=""
        )

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        self.query_gain = nn.Parameter(torch.ones(self.num_heads, self.head_dim))  # (heads, head_dim)
        self.key_gain = nn.Parameter(torch.ones(self.num_heads, self.head_dim))
        if options.norm == "layer":
            self.query_bias = nn.Parameter(torch.zeros(self.num_heads, self.head_dim))

    def prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        query_bias = self.query_bias if self.options.norm == "layer" else None
        return self._normalise(q, self.query_gain, query_bias), self._normalise(k, self.key_gain, None)

    def _normalise(self, x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """x (B, H, seq, head_dim) normalised over head_dim, times gain (and plus bias) of its head, in x's
        dtype (autocast runs the norms in float32; v stays in x's dtype)."""
        if self.options.norm == "layer":
            normalised = F.layer_norm(x, (self.head_dim,), eps=EPS)
        else:
            normalised = F.rms_norm(x, (self.head_dim,), eps=EPS)
        normalised = normalised * gain[:, None, :]  # (B, H, seq, head_dim) * (H, 1, head_dim)
        if bias is not None:
            normalised = normalised + bias[:, None, :]
        return normalised.to(x.dtype)
