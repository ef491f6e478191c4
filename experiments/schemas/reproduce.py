"""Which published claims `attnlab reproduce` measures, and how their runs are tuned and kept. `ReproduceOptions` is
the one declaration (`common.schema`) of the command's own flags; `analysis.claims.reproductions` runs the claims.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.schema import setting
from experiments.schemas.shared import storage_setting


@dataclass(frozen=True)
class ReproduceOptions:
    """The options of `attnlab reproduce`: the claims, the learning rates their cells train at, the storage."""

    claims: str | None = setting(None, "claims, comma-separated (default: every one; `make list` names them)",
                                 flag="--claim")
    lr_multiples: str | None = setting(None, "multiples of each task's learning rate: one, every cell fixed at it, "
                                             "nothing screened; 1,3,9, screened on the validation set first, as the "
                                             "benchmark (default: 1; a claim sweeping its paper's grid, as mad, "
                                             "keeps it)")
    storage_url: str | None = storage_setting("an Optuna RDB storage URL shared by machines")
