"""What the tasks that read the Long Range Arena's files share: where the files are, the cached encoding, the
splits, and how a stored document becomes an example.

Data: `task.data_dir` (or, left empty, the environment's ATTNLAB_DATA, recorded in the run's config) names the
folder holding the data; each task says what it looks for there (`lra_files`). The encoded data is cached under
DATA_DIR/.attnlab-cache/ (or `task.cache_dir`) and memory-mapped (`lra_cache`): the first build of a task reads
the files, later ones start in seconds. Nothing is read until a task is built by name: these tasks are not in
`list_tasks()`, the default suite or the registry-wide tests.

Layout, as the generated tasks have it: one document per tower, left padded, then the query, the one scored
position being the last: `_ ... _ <document> =` (two towers: `_ _ <doc1> = _ <doc2> =`, each tower seq_len / 2
positions, which the model encodes apart). A document longer than its tower keeps its first seq_len / towers - 1
tokens (LRA keeps the first max_length). Stored values v (a ListOps symbol, a byte, a grey level) are token id
v + `value_offset`; the answers are token ids 0..num_classes-1. distance: the kept length of the longest document
of the example; metadata `length` (and `length2` for a pair), the kept lengths.

Splits: training batches draw examples of the train split uniformly, with replacement, from the run's generator
(seeded and checkpointed, so a run is deterministic and resumes exactly); the test and validation sets are the
whole test and validation splits, or with `test_size` > 0 a fixed subset of each of that many examples, drawn
once from the task's test (validation) seed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from common.options import OptionError, option, require
from experiments.tasks.base import (
    IGNORE,
    REPORT_BUCKETS,
    Batch,
    Profile,
    Task,
    distance_buckets,
    test_seed,
    validation_seed,
)
from experiments.tasks.lra_cache import CACHE_FOLDER, cache_key, cached
from experiments.tasks.lra_files import DataError, MissingData

SPLITS = ("train", "validation", "test")
QUICK_TRAIN = {"steps": 400, "batch_size": 16, "lr": 1e-3, "eval_every": 200}


def data_profiles(*, model: dict, train: dict, options: dict | None = None, quick: dict | None = None,
                  quick_model: dict | None = None, quick_train: dict | None = None) -> dict[str, Profile]:
    """The profiles of a file-reading task. lra: LRA's published `model` sizes and `train`ing budget, bidirectional
    as LRA's encoders are, with the task `options` (its seq_len) on whole held-out splits. quick: a check on a CPU
    that the files train, bidirectional too, with the small model (dim 64, depth 2, 4 heads: `quick_model`) and
    QUICK_TRAIN (`quick_train`), on 512 examples of each held-out split, with `options` then `quick`."""
    return {"quick": Profile(options={**(options or {}), "test_size": 512, **(quick or {})},
                             model={**(quick_model or {"dim": 64, "depth": 2, "heads": 4}), "causal": False},
                             train=quick_train or QUICK_TRAIN),
            "lra": Profile(options=options or {}, model={**model, "causal": False}, train=train)}


def rsqrt_budget(lr: float, warmup: int, steps: int) -> dict[str, float | int]:
    """LRA's `constant * linear_warmup * rsqrt_decay` learning rate, lr * min(1, step / warmup) / sqrt(max(step,
    warmup)), as this harness's warm-up then cosine decay: the same warm-up, the same peak (lr / sqrt(warmup)) and
    final value (lr / sqrt(steps)); between them a cosine rather than LRA's inverse square root. With a warm-up
    longer than the run (LRA's retrieval: 8,000 of 5,000 steps) the run ends still warming up, in both."""
    return {"lr": lr / math.sqrt(warmup), "warmup_steps": warmup, "min_lr_ratio": min(1.0, math.sqrt(warmup / steps))}


@dataclass(frozen=True)
class DataOptions:
    """The options every file-reading task has."""

    data_dir: str = option("", "the folder holding the data; empty: $ATTNLAB_DATA (the folder is recorded in the "
                               "run's config)")
    cache_dir: str = option("", "the folder of the encoded data's cache; empty: DATA_DIR/.attnlab-cache")
    test_size: int = option(0, "examples of the test split scored: 0, all of them; else a fixed subset of that "
                               "many, drawn once from the task's test seed (the validation set likewise)")
    seq_len: int = option(0, "tokens per example (a pair: both towers), each document cut to seq_len / towers - 1 "
                             "tokens and a query; the profiles set the task's (its docstring; lra: LRA's)")

    def __post_init__(self) -> None:
        require(self.test_size >= 0, "test_size", self.test_size, "0 (the whole split) or an integer >= 1")
        if not self.data_dir:  # frozen: filled once, while being constructed
            object.__setattr__(self, "data_dir", os.environ.get("ATTNLAB_DATA", ""))


@dataclass(frozen=True)
class Split:
    """One split's examples: `towers` documents each, stored one after another."""

    tokens: np.ndarray  # (total,) uint8: every document's values, in order
    offsets: np.ndarray  # (documents + 1,) int64: document d is tokens[offsets[d] : offsets[d + 1]]
    labels: np.ndarray  # (examples,) int64

    def __len__(self) -> int:
        return len(self.labels)


def pack(split: str, documents: list[np.ndarray], labels: list[int] | np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of a `Split` under the names the cache keeps them by, `<split>_tokens` and so on."""
    lengths = np.array([len(document) for document in documents], dtype=np.int64)
    tokens = np.concatenate(documents).astype(np.uint8) if documents else np.zeros(0, dtype=np.uint8)
    return {f"{split}_tokens": tokens, f"{split}_offsets": np.concatenate([[0], np.cumsum(lengths)]),
            f"{split}_labels": np.asarray(labels, dtype=np.int64)}


def pack_images(split: str, images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """`pack` for images of one size (n, pixels): no copy of the pixels."""
    offsets = np.arange(len(images) + 1, dtype=np.int64) * images.shape[1]
    return {f"{split}_tokens": images.reshape(-1), f"{split}_offsets": offsets,
            f"{split}_labels": np.asarray(labels, dtype=np.int64)}


class DataTask(Task):
    """A task whose examples are read from files (module docstring). A subclass sets `data_source`, its `profiles`
    (quick, lra: `data_profiles`), `Options` where it has options beyond DataOptions', and `vocabulary`,
    `num_classes`, `value_offset`, `pad` and `query` in `__init__` before calling this one; it implements `sources`,
    `cache_name` and `encode`."""

    Options = DataOptions
    value_offset: int  # the token id of stored value 0
    pad: int  # the padding's token id
    query: int  # the query's token id, at the last position of each tower
    show_limit: ClassVar[int] = 160  # characters of a document `text` shows

    def __init__(self, options: DataOptions, profile: str) -> None:
        super().__init__(options, profile)
        if self.seq_len % self.towers or self.seq_len // self.towers < 2:
            accepted = ("an integer >= 2, room for a token and the query" if self.towers == 1 else
                        f"a multiple of {self.towers} >= {2 * self.towers}, room for a token and a query per tower")
            raise OptionError(f"Task {self.name!r} option 'seq_len' got {self.seq_len}; accepted: {accepted}.")
        self.width = self.seq_len // self.towers - 1  # tokens of a document kept, per tower
        root = self.data_root()
        cache_root = Path(options.cache_dir).expanduser() if options.cache_dir else root / CACHE_FOLDER
        try:
            sources, parameters = self.sources(root)
            arrays = cached(cache_root, self.cache_name(), cache_key(sources, root, parameters),
                            lambda: self.encode(root))
        except OSError as error:  # a file that cannot be read (its permissions, a folder where a file should be)
            raise DataError(f"{error.filename}: {error.strerror or error}; accepted: a readable file of the data set "
                            f"({self.data_source}).") from None
        self.splits = {split: Split(*(arrays[f"{split}_{part}"] for part in ("tokens", "offsets", "labels")))
                       for split in SPLITS}
        for split, data in self.splits.items():
            if len(data) == 0:
                raise DataError(f"The {split} split of task {self.name!r} holds no examples in {root}; accepted: "
                                f"the data set's files as published ({self.data_source}).")
        self.held_out = {"test": self._subset("test", test_seed(self.name)),
                         "validation": self._subset("validation", validation_seed(self.name))}
        self.test_size = len(self.held_out["test"])

    def data_root(self) -> Path:
        """The data folder: task.data_dir or ATTNLAB_DATA; MissingData when neither names a folder."""
        folder = self.options.data_dir
        if not folder or not Path(folder).expanduser().is_dir():
            named = f"{folder}, which is no folder" if folder else "none (neither task.data_dir nor ATTNLAB_DATA)"
            raise MissingData(f"Task {self.name!r} reads its files from a data folder and was given {named}; "
                              f"accepted: --set task.data_dir=DIR (or ATTNLAB_DATA=DIR), DIR holding "
                              f"{self.data_source}.")
        return Path(folder).expanduser()

    # ----------------------------------------------------------------------------------------------
    # What a subclass defines.

    def sources(self, root: Path) -> tuple[list[Path], dict]:
        """The files the encoding reads (their sizes and times key the cache) and the parameters it depends on;
        MissingData naming the first file not found."""
        raise NotImplementedError

    def cache_name(self) -> str:
        """The cache's name under the cache folder (no dot): one per data set and encoding."""
        raise NotImplementedError

    def encode(self, root: Path) -> dict[str, np.ndarray]:
        """Every split's arrays (`pack`), read from the files."""
        raise NotImplementedError

    def show(self, values: list[int]) -> str:
        """A document's stored values as `text` shows them."""
        return " ".join(self.vocabulary[value + self.value_offset] for value in values)

    # ----------------------------------------------------------------------------------------------
    # What callers use.

    def _subset(self, split: str, seed: int) -> np.ndarray:
        count = len(self.splits[split])
        if self.options.test_size == 0 or self.options.test_size >= count:
            return np.arange(count)
        chosen = torch.randperm(count, generator=torch.Generator().manual_seed(seed))[: self.options.test_size]
        return chosen.sort().values.numpy()

    @property
    def validation_size(self) -> int:
        return len(self.held_out["validation"])

    @cached_property
    def chance_accuracy(self) -> float:
        """The frequency of the test set's most common label: the accuracy of always guessing it."""
        labels = self.splits["test"].labels[self.held_out["test"]]
        return float(np.bincount(labels, minlength=self.num_classes).max() / len(labels))

    def report_buckets(self) -> list[tuple[int, int]]:
        """Buckets of the kept document length, 1..seq_len / towers - 1 (the distance)."""
        return distance_buckets(self.width, REPORT_BUCKETS)

    def examples(self, split: str, indices: np.ndarray) -> Batch:
        """Examples `indices` of `split` in the task's layout, on the CPU."""
        data, width = self.splits[split], self.width
        inputs = np.full((len(indices), self.seq_len), self.pad, dtype=np.int64)
        lengths = np.zeros((len(indices), self.towers), dtype=np.int64)
        for row, example in enumerate(indices.tolist()):
            for tower in range(self.towers):
                document = example * self.towers + tower
                values = data.tokens[data.offsets[document] : data.offsets[document + 1]][:width]
                end = (tower + 1) * (width + 1) - 1  # the tower's query position
                inputs[row, end - len(values) : end] = values.astype(np.int64) + self.value_offset
                inputs[row, end] = self.query
                lengths[row, tower] = len(values)
        inputs = torch.from_numpy(inputs)
        targets = torch.full_like(inputs, IGNORE)
        targets[:, -1] = torch.from_numpy(np.asarray(data.labels[indices], dtype=np.int64))
        distance = torch.full_like(inputs, -1)
        distance[:, -1] = torch.from_numpy(lengths.max(1))
        metadata = {"length": torch.from_numpy(lengths[:, 0].copy())}
        if self.towers == 2:
            metadata["length2"] = torch.from_numpy(lengths[:, 1].copy())
        return Batch(inputs, targets, distance, metadata)

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        """Examples of the train split drawn uniformly with replacement by `generator` (read on the host)."""
        indices = torch.randint(len(self.splits["train"]), (batch_size,), generator=generator, device=device)
        return self.examples("train", indices.cpu().numpy()).to(device)

    def test_set(self, device: torch.device | str) -> Batch:
        """The test split (or its fixed subset: `test_size`), in file order."""
        return self.examples("test", self.held_out["test"]).to(device)

    def validation_set(self, device: torch.device | str) -> Batch:
        """The validation split (or its fixed subset of `test_size` examples)."""
        return self.examples("validation", self.held_out["validation"]).to(device)

    def text(self, batch: Batch, index: int) -> str:
        """The example's document(s), as stored and cut, and its label, e.g. 'I loved it... -> positive'."""
        tokens = batch.inputs[index].view(self.towers, -1)[:, :-1]  # (towers, width): the query dropped
        shown = []
        for tower in tokens.tolist():
            document = self.show([token - self.value_offset for token in tower if token != self.pad])
            shown.append(document if len(document) <= self.show_limit else document[: self.show_limit] + "...")
        return f"{' | '.join(shown)} -> {self.vocabulary[int(batch.targets[index, -1])]}"
