"""The variant registry: one decorator adds a variant, `create` builds one by name."""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable
from typing import Any

from variants import kernels
from variants.base import Attention
from variants.options import build_options, closest, describe_options


class Registry:
    """Names -> classes. A name registers once; a lookup of an unknown name suggests the closest one.

    Shared by variants and tasks: `kind` names what is registered in messages, and `check` rejects a
    class that lacks what its kind requires, when it registers.
    """

    def __init__(self, kind: str, check: Callable[[str, type], None]) -> None:
        self.kind = kind
        self.check = check
        self.classes: dict[str, type] = {}

    def register(self, name: str) -> Callable[[type], type]:
        """Class decorator: `@register("dense")`."""

        def add(cls: type) -> type:
            if name in self.classes:
                raise ValueError(f"{self.kind.capitalize()} {name!r} is already registered "
                                 f"(by {self.classes[name].__qualname__}).")
            self.check(name, cls)
            cls.name = name
            self.classes[name] = cls
            return cls

        return add

    def names(self, pattern: str = "*") -> list[str]:
        """Registered names matching a shell-style pattern, sorted."""
        return sorted(name for name in self.classes if fnmatch.fnmatchcase(name, pattern))

    def get(self, name: str) -> type:
        """The class registered as `name`, or a ValueError naming the closest match and the full list."""
        if name not in self.classes:
            raise ValueError(f"Unknown {self.kind} {name!r}{closest(str(name), self.classes)}; "
                             f"available: {', '.join(self.names())}.")
        return self.classes[name]

    def summary(self, name: str) -> str:
        """The first line of the class's docstring."""
        return inspect.getdoc(self.get(name)).splitlines()[0]


def _check_kernels(name: str, cls: type[Attention]) -> None:
    unknown = [kernel for kernel in cls.kernels if kernel not in kernels.KERNELS]
    if unknown:
        raise ValueError(f"Variant {name!r} lists unknown kernels {unknown}; known: {list(kernels.KERNELS)}.")


VARIANTS = Registry("variant", _check_kernels)
register = VARIANTS.register
list_variants = VARIANTS.names
variant_class = VARIANTS.get


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


def describe_variants() -> str:
    """Every variant with its one-line description, kernels and options (what `make list` prints)."""
    lines = []
    for name in list_variants():
        cls = variant_class(name)
        lines.append(f"{name}: {VARIANTS.summary(name)}")
        lines.append(f"    kernels: {', '.join(cls.kernels)}")
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
    return "\n".join(lines)
