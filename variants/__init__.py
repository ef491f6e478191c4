"""attnlab's attention variants: a registry of pluggable attention modules and the kernels they run on.

    >>> import variants
    >>> variants.list_variants()[:4]
    ['additive', 'based', 'cosformer', 'dense']
    >>> attn = variants.create("temperature", num_heads=4, head_dim=32, temperature=0.5)
    >>> attn.describe()
    'temperature_t0.5'

Baselines (LSTM, GRU, convolution, Mamba; `variants.baselines`) run in attention's place and are listed apart:

    >>> variants.list_baselines()
    ['conv', 'gru', 'lstm', 'mamba']
"""

from common.options import OptionError
from common.registry import import_modules
from variants.base import Attention
from variants.registry import (
    check_kernel_name,
    coverage,
    create,
    describe,
    describe_variants,
    is_baseline,
    list_baselines,
    list_variants,
    options_of,
    register,
    variant_class,
)

# Every module of the package is imported (kernels/ and baselines/ import their own), and importing a variant's
# module registers it: a new file needs its `@register` and nothing else.
import_modules(__name__, __path__)
from variants.baselines import Baseline, create_baseline  # noqa: E402  isort: skip

__all__ = [
    "Attention",
    "Baseline",
    "OptionError",
    "check_kernel_name",
    "coverage",
    "create",
    "create_baseline",
    "describe",
    "describe_variants",
    "is_baseline",
    "list_baselines",
    "list_variants",
    "options_of",
    "register",
    "variant_class",
]
