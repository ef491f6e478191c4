"""attnlab's attention variants: a registry of pluggable attention modules and the kernels they run on.

    >>> import variants
    >>> variants.list_variants()
    ['additive', 'dense', 'local', 'qknorm', 'relative', 'softcap', 'sparse', 'ssmax', 'temperature', 'unscaled']
    >>> attn = variants.create("temperature", num_heads=4, head_dim=32, temperature=0.5)
    >>> attn.describe()
    'temperature_t0.5'
"""

from common.options import OptionError
from variants.base import Attention
from variants.registry import create, describe_variants, list_variants, register, variant_class

# Importing a variant module registers it.
from variants import (  # noqa: E402,F401  isort: skip
    additive, dense, local, qknorm, relative, softcap, sparse, ssmax, temperature, unscaled,
)

__all__ = [
    "Attention",
    "OptionError",
    "create",
    "describe_variants",
    "list_variants",
    "register",
    "variant_class",
]
