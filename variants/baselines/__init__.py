"""Baselines: token mixers that take the place of a block's attention sub-layer, so that the tutorials'
comparison of attention with recurrent and convolutional layers (and a selective state space model) runs on
the same tasks with the same model around it.

They share the variant registry (one name space for `--variant`) and are listed apart:

    >>> import variants
    >>> variants.list_baselines()
    ['conv', 'gru', 'lstm', 'mamba']
    >>> variants.create_baseline("conv", dim=64, causal=True, kernel_size=3).describe()
    'conv_k3'
"""

from common.registry import import_modules
from variants.baselines.base import Baseline, create_baseline

# Every module of the package is imported, and importing a baseline's module registers it.
import_modules(__name__, __path__)

__all__ = ["Baseline", "create_baseline"]
