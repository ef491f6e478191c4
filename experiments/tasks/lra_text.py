"""LRA's byte-level tasks on real text: IMDb sentiment (Text) and AAN citation links between two papers (Retrieval).

Both read documents as bytes, as LRA's pipelines do (tfds' ByteTextEncoder): token ids 0 and 1 are the answers,
then byte b is id b + 2, then the padding `<pad>` (258) and the query `<query>` (259); vocab_size 260. Layout
(`lra_base`): `<pad> ... <pad> <bytes> <query>`, the query scored; a document keeps its first seq_len / towers - 1
bytes (LRA keeps the first max_length).

Text (`lra_text`, LRA Table 1's Text, Transformer 64.27): IMDb's reviews, aclImdb/{train,test}/{pos,neg}/*.txt,
label 1 for pos; 25,000 to train on and 25,000 to test. LRA validated on the test split; here a tenth of the
train split is held out for validation instead (the reviews whose `pos/<file>` or `neg/<file>` name falls in the
validation bucket of `lra_files.split_of`, about 2,500), and training draws from the rest. Lengths: LRA's paper
states 4K bytes, its released config (`base_tc_config.py`) 1,000; profile lra uses 4,000 (seq_len 4,001), and
`--set task.seq_len=1001` gives the config's.

Retrieval (`lra_retrieval`, LRA Table 1's Retrieval, Transformer 57.46): pairs of ACL Anthology Network papers,
lra_release/tsv_data/new_aan_pairs.{train,eval,test}.tsv, label 1 when one cites the other. Two towers, as LRA's
dual encoder: the first seq_len / 2 positions hold the first paper and its query, the rest the second paper and
its query; the model encodes each tower alone with the same blocks, takes each at its query and classifies
[u, v, u * v, u - v] (`experiments.run.model`). 4,000 bytes per paper (seq_len 8,002), as LRA. The cache keeps the
first max(4,000, seq_len / 2 - 1) bytes of each paper.

Worked examples. Text, seq_len 8, the review `Great.` of train/pos:
    input: <pad> G r e a t . <query>        label 1 (positive) at position 7; distance 6 (metadata length 6)
Retrieval, seq_len 10 (towers of 5), the line `1.0<TAB>id1<TAB>id2<TAB>ab<TAB>hello`:
    input: <pad> <pad> a b <query> h e l l <query>    (`hello` cut to 4 bytes)
    label 1 (linked) at position 9; distance 4, the longer kept paper (metadata length 2, length2 4)

Profiles: quick, 1,000 bytes per document with the small bidirectional model, 400 steps of 16, 512 examples of each
held-out split. lra, LRA's published setup (`text_classification/configs/base_tc_config.py`,
`matching/configs/base_match_config.py`): Text 4 layers of width 256, 4 heads, MLP 1,024, 20,000 steps of 32, lr
0.05 with 8,000 warm-up steps and inverse-square-root decay; Retrieval 4 layers of width 128, 4 heads, MLP 512,
5,000 steps of 32 with the same schedule (which never ends its warm-up); both weight decay 0.1, no clipping,
sinusoidal positions, bidirectional, the whole test split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.tasks.lra_base import DataOptions, DataTask, data_profiles, pack, rsqrt_budget
from experiments.tasks.lra_files import RELEASE_SOURCE, imdb_reviews, read_aan, release_file, split_of
from experiments.tasks.registry import register_task

LRA_BYTES = 4000  # LRA's longest document, in bytes
IMDB = "aclImdb"
IMDB_SOURCE = ("IMDb's archive, https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz, unpacked into the "
               "data folder (the reviews of TFDS's imdb_reviews, which LRA read)")
AAN_FILES = {"train": "tsv_data/new_aan_pairs.train.tsv", "validation": "tsv_data/new_aan_pairs.eval.tsv",
             "test": "tsv_data/new_aan_pairs.test.tsv"}


def lra_budget(steps: int) -> dict:
    """LRA's budget for text and matching: `steps` batches of 32, lr 0.05 with 8,000 warm-up steps and inverse-square-
    root decay (`rsqrt_budget`), weight decay 0.1, no gradient clipping; evaluation every tenth of the run."""
    return {"steps": steps, "batch_size": 32, **rsqrt_budget(0.05, 8000, steps), "weight_decay": 0.1,
            "grad_clip": 0.0, "eval_every": steps // 10}


class ByteTask(DataTask):
    """A task over documents read as bytes: two answers, then the 256 byte values, the padding and the query."""

    answers: tuple[str, str]

    def __init__(self, options: DataOptions, profile: str) -> None:
        names = [chr(value) if 33 <= value <= 126 else f"<0x{value:02x}>" for value in range(256)]
        self.vocabulary = [*self.answers, *names, "<pad>", "<query>"]
        self.num_classes = len(self.answers)
        self.value_offset, self.pad, self.query = self.num_classes, len(self.vocabulary) - 2, len(self.vocabulary) - 1
        super().__init__(options, profile)

    def show(self, values: list[int]) -> str:
        return bytes(values).decode("utf-8", errors="replace")


@register_task("lra_text")
class RealText(ByteTask):
    """IMDb sentiment from the reviews' bytes (LRA's Text): is the review positive?"""

    data_source = f"{IMDB}/{{train,test}}/{{pos,neg}}/*.txt, from {IMDB_SOURCE}"
    answers = ("negative", "positive")

    profiles = data_profiles(options={"seq_len": 4001}, quick={"seq_len": 1001}, train=lra_budget(20000),
                             model={"dim": 256, "depth": 4, "heads": 4, "mlp_ratio": 4, "positions": "sinusoidal"})

    def sources(self, root: Path) -> tuple[list[Path], dict]:
        return [path for split in ("train", "test") for _, path, _ in imdb_reviews(root / IMDB, split, self.name)], {}

    def cache_name(self) -> str:
        return "imdb"

    def encode(self, root: Path) -> dict[str, np.ndarray]:
        documents: dict[str, list[np.ndarray]] = {"train": [], "validation": [], "test": []}
        labels: dict[str, list[int]] = {"train": [], "validation": [], "test": []}
        for split in ("train", "test"):
            for name, path, label in imdb_reviews(root / IMDB, split, self.name):
                into = split if split == "test" or split_of(name) != "validation" else "validation"
                documents[into].append(np.frombuffer(path.read_bytes().strip(), dtype=np.uint8))
                labels[into].append(label)
        return {name: array for split in documents for name, array in pack(split, documents[split],
                                                                           labels[split]).items()}


@register_task("lra_retrieval")
class RealRetrieval(ByteTask):
    """AAN document matching from the papers' bytes (LRA's Retrieval): does one paper cite the other? Two towers."""

    data_source = f"lra_release/tsv_data/new_aan_pairs.{{train,eval,test}}.tsv, from {RELEASE_SOURCE}"
    answers = ("unlinked", "linked")
    towers = 2

    profiles = data_profiles(options={"seq_len": 8002}, quick={"seq_len": 2002}, train=lra_budget(5000),
                             model={"dim": 128, "depth": 4, "heads": 4, "mlp_ratio": 4, "positions": "sinusoidal"})

    @property
    def kept(self) -> int:
        """Bytes of each paper the cache keeps: LRA's 4,000, or more where a tower holds more."""
        return max(LRA_BYTES, self.width)

    def sources(self, root: Path) -> tuple[list[Path], dict]:
        return [release_file(root, relative, self.name) for relative in AAN_FILES.values()], {"keep": self.kept}

    def cache_name(self) -> str:
        return f"aan{self.kept}"

    def encode(self, root: Path) -> dict[str, np.ndarray]:
        arrays = {}
        for split, relative in AAN_FILES.items():
            arrays.update(pack(split, *read_aan(release_file(root, relative, self.name), self.kept)))
        return arrays
