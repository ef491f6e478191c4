"""The variant registry: one decorator adds a variant, `create` builds one by name."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

from common.options import OptionError, build_options, closest, describe_options, ordered_fields, tagged_name
from common.registry import Registry
from variants import kernels, layouts
from variants.base import HONOURED_BY, Attention, NormaliserOptions


def _check_kernels(name: str, cls: type) -> None:
    if not issubclass(cls, Attention):  # a baseline: no attention kernel runs it
        return
    unknown = [kernel for kernel in cls.kernel_preference if kernel not in kernels.KERNELS]
    if unknown:
        raise ValueError(f"Variant {name!r} prefers unknown kernels {unknown}; known: {list(kernels.KERNELS)}.")
    unread = [hook for hook in cls.overridden_hooks() if "reference" not in HONOURED_BY[hook]]
    if unread:  # the reference is the truth every other kernel is tested against
        raise ValueError(f"Variant {name!r} overrides {', '.join(unread)}, which the reference kernel does not "
                         "read; accepted: override pair_bias, which sdpa and blocked read through logit_bias.")
    if cls.layout_depends_on_input and cls.example_layout is Attention.example_layout:
        raise ValueError(f"Variant {name!r} says its layout depends on the input but does not override "
                         "example_layout, so the report would draw the input-independent layout as the one that ran; "
                         "accepted: override example_layout, or layout_depends_on_input = False.")


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


def _index(label: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{label} got {value!r}; accepted: an integer >= {low}.")


def options_of(name: str, values: Any, *, head_dim: int | None = None) -> Any:
    """The typed options of variant (or baseline) `name`: `values`, a dict or already its `Options`, checked
    against its Options dataclass; with `head_dim`, every option that defaults to a size filled in as a module
    with heads that wide runs it (`Attention.resolved_options`). A bad name or value is a one-sentence error."""
    cls = variant_class(name)
    if not isinstance(values, cls.Options):
        owner = f"Baseline {name!r}" if is_baseline(name) else f"Variant {name!r}"
        values = build_options(cls.Options, owner, dict(values))
    if head_dim is not None and issubclass(cls, Attention):
        values = cls.resolved_options(values, head_dim=head_dim)
    return values


def check_kernel_name(name: str, kernel: str) -> None:
    """Refuse, in one sentence, a kernel that does not exist, or any kernel but auto for a baseline (it runs on
    none). Whether an attention variant runs on a kernel that exists is known once its module is built."""
    if kernel == "auto":
        return
    if is_baseline(name):
        raise OptionError(f"Baseline {name!r} runs on no attention kernel, so kernel {kernel!r} cannot apply; "
                          "accepted: auto.")
    if kernel not in kernels.KERNELS:
        raise OptionError(f"Unknown kernel {kernel!r}{closest(kernel, kernels.KERNELS)}; accepted: 'auto', "
                          f"{', '.join(repr(known) for known in kernels.KERNELS)}.")


def describe(name: str, options: Any, *, head_dim: int | None = None) -> str:
    """The self-describing name a module of variant `name` with `options` (and heads `head_dim` wide, for an
    option that defaults to a size) gives itself, e.g. `local_w16`, without building the module."""
    return tagged_name(name, options_of(name, options, head_dim=head_dim))


def create(name: str, *, num_heads: int, head_dim: int, kernel: str = "auto", layer_index: int = 0,
           run_seed: int = 0, max_len: int | None = None, options: Any = None, **values: Any) -> Attention:
    """Build the attention module registered as `name` for `num_heads` heads of `head_dim` each, to serve
    block `layer_index` of a model trained from `run_seed` (what a layout or features drawn at random are
    seeded from) on sequences of at most `max_len` positions (None: unknown; Linformer needs it). The options
    are `options` (its typed `Options`, as a run's config holds them) or the keyword `values`."""
    cls = variant_class(name)
    if is_baseline(name):
        raise ValueError(f"{name!r} is a baseline, not an attention variant; accepted: "
                         f"{', '.join(list_variants())} (a baseline is built by variants.create_baseline).")
    _index("num_heads", num_heads, 1)
    _index("head_dim", head_dim, 1)
    _index("layer_index", layer_index, 0)
    _index("run_seed", run_seed, 0)
    if max_len is not None:
        _index("max_len", max_len, 1)
    resolved = options_of(name, values if options is None else options)
    module = cls.class_for(resolved, layer_index)(resolved, num_heads=num_heads, head_dim=head_dim, kernel=kernel,
                                                  layer_index=layer_index, run_seed=run_seed, max_len=max_len)
    # a variant's kernels may depend on its options (its normaliser, say)
    kernels.check_kernel(module.describe(), module.kernels, kernel, module.normaliser)
    return module


def coverage(name: str, seq_len: int, *, causal: bool, num_heads: int, head_dim: int, layers: int = 1,
             run_seed: int = 0, options: Any = None) -> float | None:
    """The fraction of the pairs of a sequence of `seq_len` (causal: of the pairs j <= i) that a model of `layers`
    blocks of variant `name` attends, averaged over its blocks and heads (`layouts.coverage` of each block's
    `block_layout`; BigBird draws its random blocks per layer and head from `run_seed`): 1.0 computes dense attention.
    None for a baseline, and for a variant any of whose blocks has no layout (Based's linear blocks: a layout decides
    only its window blocks)."""
    if is_baseline(name):
        return None
    found = [layouts.coverage(create(name, num_heads=num_heads, head_dim=head_dim, layer_index=layer, run_seed=run_seed,
                                     max_len=seq_len, options=options).block_layout, seq_len, causal)
             for layer in range(layers)]
    return None if None in found else sum(found) / len(found)


# How many blocks `attnlab list` looks at for a variant whose class differs per block (Based's window layers).
LISTED_LAYERS = 8


def _kernel_lines(name: str) -> list[str]:
    """'kernels: ...', or for each choice option of the variant's own that changes them one line per set of
    kernels, naming the values that run on it ('kernels (kind=t5|alibi): ...'), or, for a variant whose blocks
    differ in class (`Attention.class_for`), one line per class at the first layer_index that has it; then one
    line per set of kernels of the normalisers other than the softmax (on which a kernel runs whatever the other
    options)."""
    def kernels_with(layer_index: int = 0, **options: Any) -> str:
        module = create(name, num_heads=2, head_dim=8, max_len=64, layer_index=layer_index, **options)
        return ", ".join(module.kernels)

    cls = variant_class(name)
    hints, shared = typing.get_type_hints(cls.Options), {field.name for field in dataclasses.fields(NormaliserOptions)}
    own_lines, shared_lines = [], []
    for field in ordered_fields(cls.Options):
        if typing.get_origin(hints[field.name]) is not Literal:
            continue
        by_kernels: dict[str, list[str]] = {}
        for value in typing.get_args(hints[field.name]):
            by_kernels.setdefault(kernels_with(**{field.name: value}), []).append(value)
        if len(by_kernels) == 1:
            continue
        for names, values in by_kernels.items():
            line = f"kernels ({field.name}={'|'.join(values)}): {names}"
            if field.name not in shared:
                own_lines.append(line)
            elif field.default not in values:  # the default's kernels are those of the lines above
                shared_lines.append(line)
    if not own_lines:
        defaults = build_options(cls.Options, f"Variant {name!r}", {})
        first_layer: dict[type, int] = {}
        for layer in range(LISTED_LAYERS):
            first_layer.setdefault(cls.class_for(defaults, layer), layer)
        if len(first_layer) > 1:
            own_lines = [f"kernels (layer_index={layer}): {kernels_with(layer)}" for layer in first_layer.values()]
    return (own_lines or [f"kernels: {kernels_with()}"]) + shared_lines


def describe_variants() -> str:
    """Every variant with its one-line description, kernels and options, then the baselines with theirs
    (what `make list` prints)."""
    lines = []
    for name in list_variants():
        cls = variant_class(name)
        lines.append(f"{name}: {VARIANTS.summary(name)}")
        if cls.approximation:
            lines.append(f"    approximation: {cls.approximation}")
        if not cls.supports_causal:
            lines.append("    causal: no (bidirectional in its paper; runs with model.causal false)")
        elif not cls.prefix_consistent:
            lines.append("    causal: not prefix-consistent (a later input changes earlier outputs; runs with "
                         "model.causal false)")
        if cls.position_indexed:
            lines.append("    length: terms indexed by absolute position (no evaluation beyond the training length)")
        lines.extend(f"    {line}" for line in _kernel_lines(name))
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
    lines.append("\nBaselines (--variant NAME as well: a token mixer in place of each block's attention sub-layer, "
                 "with no heads and no attention kernel):")
    for name in list_baselines():
        lines.append(f"{name}: {VARIANTS.summary(name)}")
        lines.extend(f"    {line}" for line in describe_options(variant_class(name).Options))
    return "\n".join(lines)
