"""Kernels execute a variant's description; `choose` picks one for a module and a device.

Each kernel states where it trains (forward and backward), where it also runs forward only, what it
needs (an optional package, a head_dim) and which layouts it runs; which of a variant's hooks it reads
is the table in `variants.base`, from which each variant derives the kernels that can run it, fastest
first (`Attention.kernels`). `auto` takes the first of those that trains on the device of the call and
fits the module: so never flex on CPU (forward only there) and never xformers without the package or
CUDA. A kernel forced by name runs wherever it runs at all, or says in one sentence why it cannot.

Kernels read a variant only through the `Call` it builds (`variants.kernels.call`): nothing here
imports the variant classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from common.options import closest
from variants import layouts
from variants.kernels import additive, blocked, chunked, flex, linear, lowrank, reference, sdpa, xformers
from variants.kernels.call import Call
from variants.normalisers import DOT_PRODUCT_NORMALISERS

Run = Callable[[Call], torch.Tensor]  # a prepared call -> output (B, H, seq_q, dim_v)


def _always() -> bool:
    return True


def _fits_any(head_dim: int, device: torch.device) -> str | None:
    return None


@dataclass(frozen=True)
class Kernel:
    name: str
    run: Run
    summary: str
    devices: frozenset[str] | None = None  # device types it trains on (forward and backward); None for any
    forward_only_devices: frozenset[str] = frozenset()  # device types it also runs on, forward only
    available: Callable[[], bool] = _always  # its optional package (and device) are present
    requirement: str = ""  # what `available` checks, for the error when it is False
    unfit: Callable[[int, torch.device], str | None] = _fits_any  # why a module of head_dim cannot run here, or None
    # The layouts it runs (type(None): no layout); None: any layout, and none.
    layout_types: tuple[type, ...] | None = None
    # The normalisers it computes (`variants.normalisers`); None: whichever the call names.
    normalisers: frozenset[str] | None = frozenset({"softmax"})
    # Hooks a variant must override for it to run at all (the linear kernel needs feature maps).
    requires: frozenset[str] = frozenset()

    def runs_on(self, device: torch.device) -> bool:
        """Whether it trains on `device` here: what `auto` and the benchmarks ask."""
        return (self.devices is None or device.type in self.devices) and self.available()

    def runs_layout(self, layout: layouts.Layout | None) -> bool:
        """Whether it runs variants with this layout (None: no layout)."""
        return self.layout_types is None or isinstance(layout, self.layout_types)

    def runs_normaliser(self, normaliser: str) -> bool:
        """Whether it computes this normaliser."""
        return self.normalisers is None or normaliser in self.normalisers

    def refusal(self, head_dim: int, device: torch.device) -> str | None:
        """One sentence on why it cannot run a module of `head_dim` on `device` even forward only, or None."""
        if not self.available():
            return f"Kernel {self.name!r} is not available here: it needs {self.requirement}."
        if self.devices is not None and device.type not in self.devices | self.forward_only_devices:
            return (f"Kernel {self.name!r} does not run on {device.type}; it runs on "
                    f"{', '.join(sorted(self.devices | self.forward_only_devices))}. "
                    "Use kernel='auto' to pick one that does.")
        return self.unfit(head_dim, device)


KERNELS: dict[str, Kernel] = {
    kernel.name: kernel
    for kernel in (
        Kernel("sdpa", sdpa.run, "torch scaled_dot_product_attention (fused, with masks and biases; flash, "
                                 "memory-efficient or cuDNN on CUDA where no mask or bias is needed)"),
        Kernel("flex", flex.run, "FlexAttention: the variant's score_mod and a BlockMask from its layout, "
                                 "compiled on CUDA (forward only on CPU, for checking)",
               devices=frozenset({"cuda"}), forward_only_devices=frozenset({"cpu"}),
               unfit=flex.unfit),
        Kernel("xformers", xformers.run, "xformers memory_efficient_attention: dense, causal and local windows "
                                         "(optional gpu extra, CUDA)",
               devices=frozenset({"cuda"}), available=xformers.available, requirement=xformers.REQUIREMENT,
               layout_types=(type(None), layouts.Local)),
        Kernel("blocked", blocked.run, "block-sparse: gathers only the key blocks a layout allows, O(n) for local; "
                                       "fused sdpa on them for softmax, the normaliser on their scores otherwise",
               layout_types=(layouts.Layout,), normalisers=frozenset(DOT_PRODUCT_NORMALISERS)),
        Kernel("linear", linear.run, "kernelised attention from feature maps in O(n): one sum, or chunks with a "
                                     "running state when causal (flash-linear-attention's chunk form, pure PyTorch)",
               normalisers=frozenset({"sum", "none"}), requires=frozenset({"features"})),
        Kernel("lowrank", lowrank.run, "weights given as factors, applied to the values right to left: O(n r d)",
               normalisers=None, requires=frozenset({"factors"})),
        Kernel("additive", additive.run, "additive attention's logits w . tanh(q_i + k_j) and their gradients in "
                                         "closed form, chunk by chunk: bounded memory, no tanh kept for backward",
               normalisers=None, requires=frozenset({"additive_scorer"})),
        Kernel("chunked", chunked.run, "query chunks, recomputed in backward: memory bounded for any score",
               normalisers=None),
        Kernel("reference", reference.run, "each variant's own formula, materialises seq_q x seq_k; the truth in "
                                           "tests", normalisers=None),
    )
}

attend_with_weights = reference.attend


def check_kernel(variant_name: str, supported: tuple[str, ...], kernel: str, normaliser: str = "softmax") -> None:
    """Reject a kernel name that does not exist or cannot run the variant (with `normaliser`), at creation time."""
    if kernel == "auto":
        return
    if kernel not in KERNELS:
        raise ValueError(
            f"Unknown kernel {kernel!r}{closest(kernel, KERNELS)}; accepted: 'auto', "
            f"{', '.join(repr(name) for name in KERNELS)}."
        )
    if kernel not in supported:
        computed = KERNELS[kernel].normalisers
        why = "" if KERNELS[kernel].runs_normaliser(normaliser) else (
            f" with normaliser {normaliser!r} (it computes {', '.join(sorted(computed))} only)")
        raise ValueError(
            f"Kernel {kernel!r} cannot run variant {variant_name!r}{why}; it runs on: "
            f"'auto', {', '.join(repr(name) for name in supported)}."
        )


def choose(requested: str, candidates: tuple[str, ...], head_dim: int, device: torch.device,
           variant_name: str) -> Kernel:
    """The kernel that runs a module on `device`: the `requested` one, or with "auto" the first of the
    variant's `candidates` (fastest first) that trains there and fits its `head_dim`."""
    if requested != "auto":
        kernel = KERNELS[requested]
        refusal = kernel.refusal(head_dim, device)
        if refusal is not None:
            raise ValueError(refusal)
        return kernel
    for name in candidates:
        kernel = KERNELS[name]
        if kernel.runs_on(device) and kernel.unfit(head_dim, device) is None:
            return kernel
    raise ValueError(f"No kernel runs variant {variant_name!r} on {device.type}.")


def _shape(tensor: torch.Tensor) -> str:
    return "(" + ", ".join(str(size) for size in tensor.shape) + ")"


def check_inputs(
    variant_name: str,
    num_heads: int,
    head_dim: int,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
) -> None:
    """One clear sentence for inputs that cannot be attended, before any kernel sees them."""
    for label, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.dim() != 4:
            raise ValueError(
                f"{label} has shape {_shape(tensor)}; accepted: 4 dimensions (batch, heads, seq, head_dim)."
            )
        if tensor.shape[1] != num_heads:
            raise ValueError(
                f"{label} has {tensor.shape[1]} heads (shape {_shape(tensor)}); this "
                f"{variant_name} module was created with num_heads={num_heads}."
            )
        if not tensor.is_floating_point() or tensor.dtype != q.dtype:
            raise ValueError(f"{label} has dtype {tensor.dtype}; accepted: a floating dtype shared by q, k and v.")
    for label, tensor in (("q", q), ("k", k)):
        if tensor.shape[-1] != head_dim:
            raise ValueError(
                f"{label} has head_dim {tensor.shape[-1]} (shape {_shape(tensor)}); this "
                f"{variant_name} module was created with head_dim={head_dim}."
            )
    if q.shape[0] != k.shape[0] or k.shape[0] != v.shape[0]:
        raise ValueError(
            f"q, k and v have batch sizes {q.shape[0]}, {k.shape[0]}, {v.shape[0]}; accepted: equal batch sizes."
        )
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k has {k.shape[2]} keys but v has {v.shape[2]}; accepted: one value per key.")
    if key_padding_mask is not None:
        expected = (k.shape[0], k.shape[2])
        if key_padding_mask.dtype != torch.bool or tuple(key_padding_mask.shape) != expected:
            raise ValueError(
                f"key_padding_mask has dtype {key_padding_mask.dtype} and shape {_shape(key_padding_mask)}; "
                f"accepted: torch.bool of shape (batch, seq_k) = {expected}, True where a key is real."
            )
