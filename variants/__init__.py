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
from variants.base import Attention
from variants.registry import (
    create,
    describe_variants,
    is_baseline,
    list_baselines,
    list_variants,
    register,
    variant_class,
)

# Importing a variant module registers it.
from variants import (  # noqa: E402,F401  isort: skip
    additive, based, cosformer, dense, linear, linformer, local, nystromformer, performer, qknorm, reformer, relative,
    sinkhorn, softcap, sparse, ssmax, synthesizer, temperature, unscaled,
)
from variants.baselines import Baseline, create_baseline  # noqa: E402  isort: skip

__all__ = [
    "Attention",
    "Baseline",
    "OptionError",
    "create",
    "create_baseline",
    "describe_variants",
    "is_baseline",
    "list_baselines",
    "list_variants",
    "register",
    "variant_class",
]
