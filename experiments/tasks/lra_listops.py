"""LRA's ListOps as released: the value of each expression of the release's TSV files, read at a final query.

The data of Long Range Arena's ListOps (Tay et al. 2021, Table 1: Transformer 36.37), read from LRA's release
archive: DATA_DIR/lra_release/listops-1000/basic_{train,val,test}.tsv (one more lra_release/ level is accepted),
96,000, 2,000 and 2,000 expressions (LRA's generator keeps trees of 500 to 2,000 nodes). Each line after the header
`Source<TAB>Target` is an expression as LRA's generator writes it, with parentheses, `( ( ( [MAX 2 ) 9 ) ] )`, and
its value 0-9; the tokens are those LRA's pipeline keeps (parentheses dropped, split on whitespace): `[MAX 2 9 ]`.

Tokens and layout are the generated `listops` task's: digits 0-9 (ids 0-9, the answers), `[MIN` `[MAX` `[MED`
`[SM` (10-13), `]` (14), padding `_` (15) and the query `=` (16); `_ ... _ <expression> =`, the query scored,
its distance the expression's kept length. An expression longer than seq_len - 1 keeps its first seq_len - 1
tokens (LRA: 2,000).

Worked example: the line `( ( ( [SM 3 ) 4 ) ] )<TAB>7` with seq_len 12 is
    input:    _ _ _ _ _ _ _ [SM 3 4 ] =    label 7 (id 7) at position 11, the `=`; distance 4 (metadata length 4)

Profiles: quick, LRA's lengths (seq_len 2,001) with the small bidirectional model (dim 64, depth 2), 400 steps of
16, 512 examples of each held-out split: a check that the files train. lra, LRA's published setup
(`lra_benchmarks/listops/configs/base_listops_config.py`): 2,000 tokens, 4 layers of width 512, 8 heads, MLP 1,024
(mlp_ratio 2), bidirectional with sinusoidal positions; 5,000 steps of 32, LRA's lr 0.05 with 1,000 warm-up steps
and inverse-square-root decay (`rsqrt_budget`), weight decay 0.1, no gradient clipping; the whole test split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.tasks.listops import DIGITS, OPERATORS, PAD, QUERY
from experiments.tasks.lra_base import DataOptions, DataTask, data_profiles, pack, rsqrt_budget
from experiments.tasks.lra_files import RELEASE_SOURCE, read_listops, release_file
from experiments.tasks.registry import register_task

FILES = {"train": "listops-1000/basic_train.tsv", "validation": "listops-1000/basic_val.tsv",
         "test": "listops-1000/basic_test.tsv"}


@register_task("lra_listops")
class RealListOps(DataTask):
    """LRA's ListOps from its release's TSV files: the value 0-9 of a nested expression of up to 2,000 tokens."""

    data_source = f"lra_release/listops-1000/basic_{{train,val,test}}.tsv, from {RELEASE_SOURCE}"

    profiles = data_profiles(options={"seq_len": 2001},
                             model={"dim": 512, "depth": 4, "heads": 8, "mlp_ratio": 2, "positions": "sinusoidal"},
                             train={"steps": 5000, "batch_size": 32, **rsqrt_budget(0.05, 1000, 5000),
                                    "weight_decay": 0.1, "grad_clip": 0.0, "eval_every": 500})

    def __init__(self, options: DataOptions, profile: str) -> None:
        self.vocabulary = [str(digit) for digit in range(DIGITS)] + list(OPERATORS) + ["]", "_", "="]
        self.num_classes = DIGITS
        self.value_offset, self.pad, self.query = 0, PAD, QUERY
        super().__init__(options, profile)

    def sources(self, root: Path) -> tuple[list[Path], dict]:
        return [release_file(root, relative, self.name) for relative in FILES.values()], {}

    def cache_name(self) -> str:
        return "listops"

    def encode(self, root: Path) -> dict[str, np.ndarray]:
        arrays = {}
        for split, relative in FILES.items():
            arrays.update(pack(split, *read_listops(release_file(root, relative, self.name))))
        return arrays
