"""The settings of the softmax saturation studies (`make saturation`): the sizes of each study in a named setting,
quick (under 10 minutes on CPU) or full. A study's folder keeps the setting it ran (`analysis.saturation.study` reads it
back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Setting:
    """The sizes of one setting of the studies."""

    name: str
    # A: at initialisation
    head_dims: tuple[int, ...]
    key_counts: tuple[int, ...]
    temperatures: tuple[float, ...]
    samples: int
    # B: training dynamics
    dynamics_head_dims: tuple[int, ...]
    seeds: tuple[int, ...]
    steps: int
    batch_size: int
    eval_every: int
    additive_hidden_dim: int | None  # None: the head dim
    # C: learning rates
    learning_rates: tuple[float, ...]
    lr_seeds: tuple[int, ...]
    # D: fading with length
    fading_key_counts: tuple[int, ...]
    length_seeds: tuple[int, ...]
    length_steps: int
    train_length: int
    eval_lengths: tuple[int, ...]
    init_seed: int = 0  # A's draws
    strong_logit: float = 5.0
    length_scales: tuple[float, ...] = (0.2, 0.43)
    # D's drawn rows: (variant, options) weighed on q and keys drawn in fading_head_dim dimensions, fading_draws
    # draws per key count; a variant this version does not register is left out of fading.csv, and the findings
    # name it (`fading_variants`).
    fading_kernelised: tuple[tuple[str, dict[str, Any]], ...] = (
        ("linear", {}), ("performer", {}), ("performer", {"num_features": 512}))
    fading_head_dim: int = 64
    fading_draws: int = 32
    # A's normalisers besides the softmax (unscaled and scaled rows); B's dense runs with another normaliser
    # (NORMALISER_VARIANTS) at these head dims.
    init_normalisers: tuple[str, ...] = ("sigmoid", "sparsemax", "entmax15", "entmax_adaptive")
    normaliser_head_dims: tuple[int, ...] = (64,)
    seq_len: int = 32  # B and C
    model: dict[str, Any] = field(default_factory=lambda: {"dim": 64, "depth": 2, "heads": 2})


SETTINGS = {
    "quick": Setting(
        name="quick", head_dims=(16, 64, 256, 1024), key_counts=(16, 256, 4096),
        temperatures=(0.25, 0.5, 2.0, 4.0), samples=256,
        dynamics_head_dims=(16, 64, 256), seeds=(0, 1, 2), steps=150, batch_size=16, eval_every=10,
        additive_hidden_dim=64,
        learning_rates=(1e-4, 1e-3, 1e-2, 1e-1), lr_seeds=(0,),
        fading_key_counts=tuple(2**power for power in range(1, 15)), length_seeds=(0,), length_steps=250,
        train_length=64, eval_lengths=(128, 256, 512),
    ),
    "full": Setting(
        name="full", head_dims=(16, 32, 64, 128, 256, 512, 1024), key_counts=(16, 64, 256, 1024, 4096),
        temperatures=(0.25, 0.5, 2.0, 4.0), samples=2048,
        dynamics_head_dims=(16, 64, 256), seeds=(0, 1, 2, 3, 4), steps=600, batch_size=32, eval_every=20,
        additive_hidden_dim=None, normaliser_head_dims=(16, 64, 256),
        learning_rates=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1), lr_seeds=(0, 1, 2),
        fading_key_counts=tuple(2**power for power in range(1, 17)), length_seeds=(0, 1, 2), length_steps=800,
        train_length=64, eval_lengths=(128, 256, 512, 1024, 2048, 4096),
    ),
}


def setting_named(name: str) -> Setting:
    if name not in SETTINGS:
        raise ValueError(f"Saturation setting {name!r} is unknown; accepted: {', '.join(SETTINGS)}.")
    return SETTINGS[name]
