"""The variant registry: one decorator adds a variant, `create` builds one by name."""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable
from typing import Any

from variants import kernels
from variants.base import Attention
from variants.options import build_options, closest, describe_options

_REGISTRY: dict[str, type[Attention]] = {}


def register(name: str) -> Callable[[type[Attention]], type[Attention]]:
    """Class decorator: `@register("dense")`. A name can be registered once."""

    def add(cls: type[Attention]) -> type[Attention]:
        if name in _REGISTRY:
            raise ValueError(f"Variant {name!r} is already registered (by {_REGISTRY[name].__qualname__}).")
        unknown = [kernel for kernel in cls.kernels if kernel not in kernels.KERNELS]
        if unknown:
            raise ValueError(f"Variant {name!r} lists unknown kernels {unknown}; known: {list(kernels.KERNELS)}.")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return add


def list_variants(pattern: str = "*") -> list[str]:
    """Registered variant names matching a shell-style pattern, sorted."""
    return sorted(name for name in _REGISTRY if fnmatch.fnmatchcase(name, pattern))


def variant_class(name: str) -> type[Attention]:
    """The class registered as `name`, or a ValueError naming the closest match and the full list."""
    if name not in _REGISTRY:
        raise ValueError(
            f"Unknown variant {name!r}{closest(name, _REGISTRY)}; available: {', '.join(list_variants())}."
        )
    return _REGISTRY[name]


def _positive_int(label: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{label} got {value!r}; accepted: an integer >= 1.")


def create(name: str, *, num_heads: int, head_dim: int, backend: str = "auto", **options: Any) -> Attention:
    """Build the attention module registered as `name` for `num_heads` heads of `head_dim` each."""
    cls = variant_class(name)
    _positive_int("num_heads", num_heads)
    _positive_int("head_dim", head_dim)
    resolved = build_options(cls.Options, f"Variant {name!r}", options)
    module = cls(resolved, num_heads=num_heads, head_dim=head_dim, backend=backend)
    kernels.check_backend(module.describe(), module.kernels, backend)  # a variant's kernels may depend on its options
    return module


def summary(name: str) -> str:
    """The first line of the variant's docstring."""
    return inspect.getdoc(variant_class(name)).splitlines()[0]


def describe_variants() -> str:
    """Every variant with its one-line description, kernels and options (what `make list` prints)."""
    lines = []
    for name in list_variants():
        cls = _REGISTRY[name]
        lines.append(f"{name}: {summary(name)}")
        lines.append(f"    kernels: {', '.join(cls.kernels)}")
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
    return "\n".join(lines)
