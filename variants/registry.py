"""The variant registry: one decorator adds a variant, `create` builds one by name."""

from __future__ import annotations

from typing import Any

from common.options import build_options, describe_options
from common.registry import Registry
from variants import kernels
from variants.base import Attention


def _check_kernels(name: str, cls: type[Attention]) -> None:
    unknown = [kernel for kernel in cls.kernels if kernel not in kernels.KERNELS]
    if unknown:
        raise ValueError(f"Variant {name!r} lists unknown kernels {unknown}; known: {list(kernels.KERNELS)}.")


VARIANTS = Registry("variant", _check_kernels)
register = VARIANTS.register
variant_class = VARIANTS.get


# Baselines (`variants.baselines`: token mixers run in attention's place) share the registry, so one name
# space serves `--variant`, sweeps and options; they are listed apart from the attention variants.
def list_variants(pattern: str = "*") -> list[str]:
    """The attention variants whose names match a shell-style pattern, sorted (baselines are listed apart)."""
    return [name for name in VARIANTS.names(pattern) if issubclass(VARIANTS.get(name), Attention)]


def list_baselines(pattern: str = "*") -> list[str]:
    """The baselines whose names match a shell-style pattern, sorted."""
    return [name for name in VARIANTS.names(pattern) if not issubclass(VARIANTS.get(name), Attention)]


def is_baseline(name: str) -> bool:
    """Whether `name` is a registered baseline (False for attention variants and unknown names)."""
    return name in list_baselines()


def _positive_int(label: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{label} got {value!r}; accepted: an integer >= 1.")


def create(name: str, *, num_heads: int, head_dim: int, kernel: str = "auto", **options: Any) -> Attention:
    """Build the attention module registered as `name` for `num_heads` heads of `head_dim` each."""
    cls = variant_class(name)
    if is_baseline(name):
        raise ValueError(f"{name!r} is a baseline, not an attention variant; accepted: "
                         f"{', '.join(list_variants())} (a baseline is built by variants.create_baseline).")
    _positive_int("num_heads", num_heads)
    _positive_int("head_dim", head_dim)
    resolved = build_options(cls.Options, f"Variant {name!r}", options)
    module = cls(resolved, num_heads=num_heads, head_dim=head_dim, kernel=kernel)
    kernels.check_kernel(module.describe(), module.kernels, kernel)  # a variant's kernels may depend on its options
    return module


def describe_variants() -> str:
    """Every variant with its one-line description, kernels and options, then the baselines with theirs
    (what `make list` prints)."""
    lines = []
    for name in list_variants():
        cls = variant_class(name)
        lines.append(f"{name}: {VARIANTS.summary(name)}")
        lines.append(f"    kernels: {', '.join(cls.kernels)}")
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
    lines.append("\nBaselines (--variant NAME as well: a token mixer in place of each block's attention sub-layer, "
                 "with no heads and no attention kernel):")
    for name in list_baselines():
        lines.append(f"{name}: {VARIANTS.summary(name)}")
        lines.extend(f"    {line}" for line in describe_options(variant_class(name).Options))
    return "\n".join(lines)
