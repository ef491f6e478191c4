"""The base of every attention variant: a score, a layout and a normaliser, executed by a kernel.

A variant says how a query and a key become a logit (`prepare`, `logit_scale`, `pair_bias`,
`logit_bias`, `score_mod`, `logits`) and which keys a query may see (`allowed`, `block_layout`); the
normaliser is the softmax unless it names another (`normaliser`, see `variants.normalisers`). Every variant
that normalises a row of logits takes the normaliser as an option (its `Options` inherit `NormaliserOptions`):
softmax, sigmoid, sparsemax, 1.5-entmax or adaptive entmax, whose alpha per head the module learns. Two families
replace the logits: the kernelised one gives feature maps whose dot products are the similarities (`features`,
normalised by their sum, run in O(n) by the `linear` kernel), the low-rank one gives its weights as a product
of factors (`factors`, run right to left by the `lowrank` kernel). A kernel (see `variants.kernels`)
executes that description. Not every kernel reads every hook: `HONOURED_BY` below is the one table of which
kernel honours which hook, and a variant runs on the kernels that honour every hook it overrides
(`Attention.kernels`, derived, never written by hand); `kernel="auto"` picks the fastest of those on the
device of the call.

A per-pair score is written once, as a function of broadcast index tensors (`pair_bias`, `score_mod`):
the reference formula calls it on whole position ranges, FlexAttention's fused kernel on each pair.

Positions: query i sits at position i and key j at position j, also when the lengths differ, so
`causal=True` lets query i see the keys j <= i (the alignment of `scaled_dot_product_attention`).

A variant also declares where a hyperparameter sweep should look for each of its options
(`search_space`, with `Range` and `Choice`), next to the code the options control.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from common.options import option, tagged_name
from variants import kernels, layouts, normalisers
from variants.kernels.call import ScoreMod
from variants.search_space import Choice, Range

# (head, query position, key position) -> additive term; integer tensors that broadcast together.
PairBias = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# Which kernel honours which hook. A kernel missing from a hook's row ignores that hook (its output would
# be wrong) or refuses it, so a variant runs on the kernels in the rows of every hook it overrides, and
# where it sets a `block_layout`, on those whose `Kernel.layout_types` take it (blocked runs layouts only,
# xformers local windows only), that compute its normaliser (`Kernel.normalisers`) and whose `Kernel.requires`
# it overrides (linear needs `features`, lowrank `factors`, additive `additive_scorer`). `prepare` runs before any
# kernel; `pair_bias` reaches sdpa and blocked through the default `logit_bias`, reference, chunked and flex through
# the default `score_mod`; chunked passes slices of the queries, which a `block_layout` (expanded for whole ranges)
# cannot take. The additive kernel computes the additive family's logits w . tanh(q'_i + k'_j) from `additive_scorer`
# (w): it honours `logits` of a variant that gives w, whose `logits` is that formula (how reference and chunked read w).
HONOURED_BY: dict[str, frozenset[str]] = {
    "prepare": frozenset(kernels.KERNELS),
    "logit_scale": frozenset({"reference", "chunked", "sdpa", "blocked", "flex", "xformers"}),
    "pair_bias": frozenset({"reference", "chunked", "sdpa", "blocked", "flex"}),
    "logit_bias": frozenset({"sdpa", "blocked"}),
    "score_mod": frozenset({"reference", "chunked", "flex"}),
    "logits": frozenset({"reference", "chunked", "additive"}),
    "additive_scorer": frozenset({"reference", "chunked", "additive"}),
    "allowed": frozenset({"reference", "chunked", "sdpa", "additive"}),
    "block_layout": frozenset({"reference", "sdpa", "blocked", "flex", "xformers"}),
    "features": frozenset({"reference", "linear"}),
    "factors": frozenset({"reference", "lowrank"}),
}
# auto's preference for a variant with a layout: the fused and block-sparse kernels skip what it leaves
# out, where sdpa applies it as a dense n x n mask.
LAYOUT_KERNELS_FIRST = ("flex", "blocked", "xformers")


@dataclass(frozen=True)
class Complexity:
    """Time per layer as the literature writes it (the tutorials' table, Vaswani et al. 2017, Table 1, or the
    variant's paper), its exponents of the length n and the width d, and its sequential operations, "O(1)" or
    "O(n)": what `make speed` measures each row against."""

    text: str
    n: float
    d: float
    sequential: str = "O(1)"

    @property
    def step_exponent(self) -> int:
        """The exponent of time against n at fixed total work that the sequential operations predict."""
        return 1 if self.sequential == "O(n)" else 0


@dataclass(frozen=True)
class NormaliserOptions:
    """The option every variant that normalises a row of logits shares (dot-product variants and additive):
    its Options inherit this class, which the kernels that run it follow (`Kernel.normalisers`)."""

    normaliser: normalisers.DotProductNormaliser = option(
        "softmax", "how a row of logits becomes weights: softmax, sigmoid(logit - log n), sparsemax, 1.5-entmax, "
                   "or entmax with alpha learned per head (papers: variants.normalisers); fused kernels: softmax only",
        tag="n", tag_default=False)


class Attention(nn.Module):
    """Attention over (batch, heads, seq, head_dim) tensors; subclasses override what differs."""

    name: ClassVar[str]  # set by variants.register
    Options: ClassVar[type]  # a frozen dataclass of the variant's options
    # Kernels `auto` tries first, in this order, among those that run the variant (`kernels`); the others
    # follow in the order of `variants.kernels.KERNELS`, fastest first (sdpa: flash where nothing is masked).
    kernel_preference: ClassVar[tuple[str, ...]] = ()
    # Which keys each query may see beyond causality and padding; None: all of them.
    block_layout: layouts.Layout | None = None
    # Where a sweep searches each option (an option not named keeps its default); see Range and Choice.
    search_space: ClassVar[dict[str, Range | Choice]] = {}
    # Whether the variant brings its own position terms (as ALiBi, RoPE, T5 and Shaw do, in place of absolute
    # positions in their papers): the model then adds no absolute positions unless a config asks for them.
    provides_positions: ClassVar[bool] = False
    # Whether the variant has a causal form. Those bidirectional in their papers (Linformer, Nystromformer)
    # refuse causal=True, and a config on a task that allows it runs them with model.causal false.
    supports_causal: ClassVar[bool] = True
    # Whether its causal form is prefix-consistent: no output reads a later input, so a sequence's prefix gives
    # the outputs the whole sequence gives there. Reformer's is not (later buckets move where its chunks are cut):
    # a config then runs it bidirectionally only, as those without a causal form.
    prefix_consistent: ClassVar[bool] = True
    # Whether it has terms indexed by absolute position (Linformer's E and F columns, Synthesizer's position
    # logits, Sinkhorn's block scores, cosFormer's angles against max_len): positions past the training length
    # read terms that never trained there, so evaluation beyond it is refused, as for learned positions.
    position_indexed: ClassVar[bool] = False
    # Whether it tells one order of its inputs from another without the causal mask or absolute positions (its
    # own position terms or position-indexed parameters, a window). Bidirectional and without positions, one
    # that does not (dense: permutation-equivariant) is blind to order, refused on a task that depends on it.
    order_aware: ClassVar[bool] = False
    # Its time per layer as the literature states it (None: not declared, e.g. when it depends on an option).
    complexity: ClassVar[Complexity | None] = Complexity("O(n^2 d)", 2, 1)
    # One sentence when the variant approximates what its paper approximates (softmax attention, say) or
    # departs from its paper; `attnlab list` and the report print it. None: exact to its paper.
    approximation: ClassVar[str | None] = None
    # How a row of similarities becomes weights (`variants.normalisers`): the option of a variant whose Options
    # inherit NormaliserOptions, else this (the kernelised family's "sum"); see `normaliser_for`.
    normaliser: str = "softmax"
    # Whether which keys a query attends depends on the input (Reformer's hash buckets, Sinkhorn's learned
    # sorting): the report then draws `example_layout` on an example through the trained model, not `layout`.
    layout_depends_on_input: ClassVar[bool] = False
    # The option that drives the variant's parameters beyond dense's (Linformer's projection rank), an integer: a
    # benchmark sizes it, before the model width, to bring the model within 10% of dense's parameters. None: none.
    size_option: ClassVar[str | None] = None

    def __init__(self, options: Any, *, num_heads: int, head_dim: int, kernel: str, layer_index: int = 0,
                 run_seed: int = 0, max_len: int | None = None) -> None:
        super().__init__()
        self.options = options
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.requested_kernel = kernel
        # Which block of the model this module serves, and the run's seed: what a layout drawn at random
        # (BigBird's) is seeded from, so that layers differ and a run is reproduced.
        self.layer_index = layer_index
        self.run_seed = run_seed
        # The longest sequence the module will be given, where known (what Linformer sizes its projections by).
        self.max_len = max_len
        # Follows the module across .to(device), so `kernel` can answer for the device it lives on.
        self.register_buffer("_device_probe", torch.empty(0), persistent=False)
        self.normaliser = self.normaliser_for(options)
        if self.normaliser == "entmax_adaptive":  # Correia et al.: a per head, alpha = 1 + sigmoid(a), a at random
            self.alpha_preactivation = nn.Parameter(torch.randn(num_heads))  # (heads,)

    @classmethod
    def normaliser_for(cls, options: Any) -> str:
        """The normaliser a module of this class built with `options` uses: the `normaliser` option of one that
        has it, else the class's (overridden where an option decides it: linear attention's identity map)."""
        return options.normaliser if isinstance(options, NormaliserOptions) else cls.normaliser

    @classmethod
    def class_for(cls, options: Any, layer_index: int = 0) -> type[Attention]:
        """The class that runs these options in block `layer_index`: this one, or a subclass per value of an
        option that changes which hooks are overridden (relative's kind; Based's sliding-window layers), so
        that the kernels follow from the class."""
        return cls

    @classmethod
    def overridden_hooks(cls) -> tuple[str, ...]:
        """The hooks of `HONOURED_BY` this class overrides (`block_layout` is set per instance)."""
        return tuple(hook for hook in HONOURED_BY
                     if hook != "block_layout" and getattr(cls, hook) is not getattr(Attention, hook))

    @functools.cached_property  # read by every forward; the hooks and the layout are fixed once built
    def kernels(self) -> tuple[str, ...]:
        """The kernels that run this module, in `auto`'s order: those honouring every hook it overrides and
        its layout (`HONOURED_BY`), its `kernel_preference` first. `auto` takes the first that trains on the
        device (flex and xformers train on CUDA only, so the CPU gets the next one)."""
        used = {*self.overridden_hooks(), *(["block_layout"] if self.block_layout is not None else [])}
        honoured = set(kernels.KERNELS).intersection(*(HONOURED_BY[hook] for hook in used))
        order = [*self.kernel_preference, *(name for name in kernels.KERNELS if name not in self.kernel_preference)]
        return tuple(name for name in order
                     if name in honoured and kernels.KERNELS[name].requires <= used
                     and kernels.KERNELS[name].runs_layout(self.block_layout)
                     and kernels.KERNELS[name].runs_normaliser(self.normaliser))

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
        (..., seq_k), in float64 where it holds constants; None when there is none. Read by sdpa and blocked,
        whose key positions may differ per head: (heads or 1, ..., seq_k) beside query positions (..., seq_q),
        the first axis of the key positions then being the result's heads."""
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

    def additive_scorer(self) -> torch.Tensor:
        """The additive family's w (heads, hidden): a pair's logit is w . tanh(q'_i + k'_j) of prepared q', k', as the
        `additive` kernel computes it and the family's `logits` does pair by pair. Overridden by that family only."""
        raise NotImplementedError(f"{type(self).__name__} does not score pairs additively.")

    def features(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool,
                 key_padding_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The kernelised family's feature maps: non-negative phi(q) (B, H, seq_q, m) and phi(k) (B, H, seq_k, m)
        of the whole prepared q and k (at positions q_pos, k_pos; padded keys where `key_padding_mask` is False,
        which the kernels then zero), whose dot products are the similarities (normalised by their sum: set
        `normaliser = "sum"`). Overridden by that family only."""
        raise NotImplementedError(f"{type(self).__name__} has no feature maps.")

    def factors(self, q: torch.Tensor, k: torch.Tensor, key_padding_mask: torch.Tensor | None) -> list[torch.Tensor]:
        """The low-rank family's weights as matrices whose product is (B, H, seq_q, seq_k), of prepared q and k;
        bidirectional, padded keys given no weight. Overridden by that family only."""
        raise NotImplementedError(f"{type(self).__name__} has no factors.")

    # ----------------------------------------------------------------------------------------------
    # The normaliser: how a row of logits becomes weights.

    @property
    def entmax_alpha(self) -> torch.Tensor:
        """Adaptive entmax's alpha per head, (heads,), in [1.01, 2] (only with normaliser entmax_adaptive)."""
        return normalisers.adaptive_alpha(self.alpha_preactivation)

    def normalise(self, similarities: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        """Weights from (batch, heads, ..., seq_k) similarities over the keys `allowed` (broadcasting to them;
        None: all): the module's normaliser, with what it learns (adaptive entmax's alpha per head)."""
        if self.normaliser == "entmax_adaptive":
            return normalisers.entmax_adaptive(similarities, allowed, self.entmax_alpha)
        return normalisers.NORMALISERS[self.normaliser](similarities, allowed)

    # ----------------------------------------------------------------------------------------------
    # The layout: which keys each query may see.

    def allowed(
        self,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        causal: bool,
        key_padding_mask: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """Bool (batch or 1, heads or 1, len(q_pos), len(k_pos)), True where attended; None when all are.

        With a block layout, q_pos and k_pos must be the whole ranges 0..seq-1 (hence no chunked kernel
        for layouts: it passes a slice of the queries).
        """
        mask = None
        if self.block_layout is not None:  # (1, layout heads, seq_q, seq_k)
            mask = layouts.dense(self.block_layout, len(q_pos), len(k_pos), causal, q_pos.device)[None]
        elif causal:
            mask = (k_pos[None, :] <= q_pos[:, None])[None, None]
        if key_padding_mask is not None:
            padding = key_padding_mask[:, None, None, :]
            mask = padding if mask is None else mask & padding
        return mask

    def layout(self, seq_q: int, seq_k: int, *, causal: bool = False, head: int = 0) -> torch.Tensor:
        """Bool (seq_q, seq_k) of the pairs `head` of this module attends (the layer is the module's own),
        for drawing and checking layouts."""
        if not 0 <= head < self.num_heads:
            raise ValueError(f"head {head} does not exist; accepted: 0 to {self.num_heads - 1}.")
        if self.block_layout is not None:
            drawn = layouts.dense(self.block_layout, seq_q, seq_k, causal)  # (layout heads, seq_q, seq_k)
            return drawn[head if len(drawn) > 1 else 0]
        everything = torch.ones(seq_q, seq_k, dtype=torch.bool)
        return everything.tril() if causal else everything

    def example_layout(self, q: torch.Tensor, k: torch.Tensor, *, causal: bool, head: int = 0) -> torch.Tensor:
        """Float (seq_q, seq_k) in [0, 1]: how much `head` attends each pair on one example, q and k (heads, seq,
        head_dim) after `prepare`; 1 for a pair attended outright, 0 for one never attended. Here the `layout`,
        the same on every input; variants with `layout_depends_on_input` compute it from q and k."""
        return self.layout(q.shape[1], k.shape[1], causal=causal, head=head).to(q.dtype)

    # ----------------------------------------------------------------------------------------------

    def describe(self) -> str:
        """Short self-describing name, e.g. `temperature_t0.5` or `dense_nentmax15` (`common.options.tagged_name`)."""
        return tagged_name(self.name, self.options)

    @classmethod
    def resolved_options(cls, options: Any, *, head_dim: int) -> Any:
        """The options as a module of heads `head_dim` wide runs them: every option that defaults to a size
        (additive's hidden_dim) filled in. Here, the options as given."""
        return options

    def extra_repr(self) -> str:
        return f"{self.describe()}, num_heads={self.num_heads}, head_dim={self.head_dim}, kernel={self.kernel}"

    def kernel_on(self, device: torch.device) -> kernels.Kernel:
        """The kernel this module runs on `device` (what `auto` chooses, or the forced one)."""
        return kernels.choose(self.requested_kernel, self.kernels, self.head_dim, device, self.name)

    @property
    def kernel(self) -> str:
        """The kernel this module runs on the device it lives on (what `auto` chose, or the forced one)."""
        return self.kernel_on(self._device_probe.device).name

    def kernel_call(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                    key_padding_mask: torch.Tensor | None) -> kernels.Call:
        """What a kernel receives: q and k through `prepare`, and the hooks it may read."""
        q_pos, k_pos = torch.arange(q.shape[2], device=q.device), torch.arange(k.shape[2], device=k.device)
        q, k = self.prepare(q, k)
        hooks = self.overridden_hooks()
        return kernels.Call(q, k, v, q_pos, k_pos, causal, key_padding_mask, name=self.name,
                            scale=self.logit_scale(), layout=self.block_layout, logits=self.logits,
                            allowed=self.allowed, logit_bias=self.logit_bias, score_mod=self.score_mod,
                            pair_width=self.pair_width, parameters=self.parameters, normalise=self.normalise,
                            normaliser=self.normaliser,
                            features=self.features if "features" in hooks else None,
                            factors=self.factors if "factors" in hooks else None,
                            additive_scorer=self.additive_scorer() if "additive_scorer" in hooks else None)

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
        kernels.check_inputs(self.name, self.num_heads, self.head_dim, q, k, v, key_padding_mask)
        if causal and not self.supports_causal:
            raise ValueError(f"Variant {self.name!r} is bidirectional in its paper and has no causal form; "
                             "accepted: causal=False.")
        call = self.kernel_call(q, k, v, causal, key_padding_mask)
        if return_weights:
            return kernels.attend_with_weights(call)
        return self.kernel_on(q.device).run(call)

