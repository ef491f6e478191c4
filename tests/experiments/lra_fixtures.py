"""Small copies of the Long Range Arena's files in their published formats, written by the tests: a few dozen
examples each, in either of the archive's layouts (`lra_release/...` or `lra_release/lra_release/...`), with
IMDb's and CIFAR-10's own folders beside them.

Each writer returns what it wrote, as the test's own record (the documents' text and labels per file), so that
a test compares a task's examples with an independent reading rather than with the loader's code.
"""

import csv
import io
import pickle
import random
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

OPERATORS = ["[MIN", "[MAX", "[MED", "[SM"]
LISTOPS_FILES = {"train": "basic_train.tsv", "validation": "basic_val.tsv", "test": "basic_test.tsv"}
AAN_FILES = {"train": "new_aan_pairs.train.tsv", "validation": "new_aan_pairs.eval.tsv",
             "test": "new_aan_pairs.test.tsv"}


def release(root: Path, layout: str) -> Path:
    """The folder the archive's contents go in: root/lra_release, or one lra_release/ level deeper."""
    folder = root / "lra_release" / ("lra_release" if layout == "double" else "")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _tree(rng: random.Random, depth: int, max_depth: int):
    """LRA's generate_tree (lra_benchmarks/data/listops.py), at a small depth."""
    if depth >= max_depth or rng.random() > 0.25:
        return rng.choice(range(10))
    values = [_tree(rng, depth + 1, max_depth) for _ in range(rng.randint(2, 4))]
    tree = (rng.choice(OPERATORS), values[0])
    for value in values[1:]:
        tree = (tree, value)
    return (tree, "]")


def _to_string(tree) -> str:
    return str(tree) if isinstance(tree, (int, str)) else f"( {_to_string(tree[0])} {_to_string(tree[1])} )"


def _to_value(tree):
    if not isinstance(tree, tuple):
        return tree
    left, right = _to_value(tree[0]), _to_value(tree[1])
    if left in OPERATORS:
        return (left, [right])
    if right == "]":
        operator, args = left
        apply = {"[MIN": min, "[MAX": max, "[MED": lambda values: int(np.median(values)),
                 "[SM": lambda values: sum(values) % 10}
        return apply[operator](args)
    return (left[0], left[1] + [right])


def write_listops(root: Path, layout: str = "single", counts=(30, 8, 8), seed: int = 0) -> dict[str, list]:
    """basic_{train,val,test}.tsv as LRA's generator writes them (csv.writer, tab-delimited: `\\r\\n` line ends);
    returns {split: [(source text, value)]}."""
    rng = random.Random(seed)
    folder = release(root, layout) / "listops-1000"
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for (split, name), count in zip(LISTOPS_FILES.items(), counts, strict=True):
        rows = []
        while len(rows) < count:
            tree = _tree(rng, 1, 4)
            if isinstance(tree, tuple):
                rows.append((_to_string(tree), _to_value(tree)))
        with (folder / name).open("w", newline="") as file:
            writer = csv.writer(file, delimiter="\t")
            writer.writerow(["Source", "Target"])
            writer.writerows(rows)
        written[split] = rows
    return written


def _text(rng: random.Random, length: int) -> bytes:
    words = ["the", "model", "attends", "café", "naïve", '"quoted"', "<br />", "long-range", "arena", "x" * 7]
    return " ".join(rng.choice(words) for _ in range(length)).encode()


def write_aan(root: Path, layout: str = "single", counts=(20, 6, 6), seed: int = 0) -> dict[str, list]:
    """new_aan_pairs.{train,eval,test}.tsv: no header, label (a float), id1, id2, text1, text2; returns
    {split: [(label, text1 bytes, text2 bytes)]}."""
    rng = random.Random(seed)
    folder = release(root, layout) / "tsv_data"
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for (split, name), count in zip(AAN_FILES.items(), counts, strict=True):
        rows = [(rng.randint(0, 1), _text(rng, rng.randint(1, 30)), _text(rng, rng.randint(1, 30)))
                for _ in range(count)]
        lines = [b"\t".join([f"{label:.1f}".encode() if index % 2 else str(label).encode(),
                             f"P{index:02d}-1001".encode(), b"W05-0101", first, second])
                 for index, (label, first, second) in enumerate(rows)]
        (folder / name).write_bytes(b"\n".join(lines) + b"\n")
        written[split] = rows
    return written


def in_validation(name: str) -> bool:
    """The held-out rule, as the docs state it: crc32 of the name mod 10 is 1."""
    return zlib.crc32(name.encode()) % 10 == 1


def write_imdb(root: Path, per_folder: int = 12, seed: int = 0) -> dict[str, list]:
    """aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt and an unsup folder the task ignores; returns
    {"train"/"test": [(name, review bytes as written, label)]}. Train has at least two held-out reviews."""
    rng = random.Random(seed)
    written = {"train": [], "test": []}
    for split in ("train", "test"):
        for label, polarity in ((0, "neg"), (1, "pos")):
            folder = root / "aclImdb" / split / polarity
            folder.mkdir(parents=True, exist_ok=True)
            index = 0
            while index < per_folder or (split == "train" and sum(in_validation(name) for name, _, _ in
                                                                  written["train"]) < 2 * (1 + label)):
                name = f"{polarity}/{index}_{rng.randint(1, 10)}.txt"
                review = b"  " + _text(rng, rng.randint(1, 40)) + b"\n"
                (root / "aclImdb" / split / name).write_bytes(review)
                written[split].append((name, review, label))
                index += 1
    (root / "aclImdb" / "train" / "unsup").mkdir(exist_ok=True)
    (root / "aclImdb" / "train" / "unsup" / "0_0.txt").write_bytes(b"unlabelled")
    return written


def cifar_pickle(data: np.ndarray, labels: list) -> bytes:
    """A batch pickled as CIFAR-10's python version is (protocol 2, numpy's arrays under numpy.core)."""
    batch = {b"batch_label": b"training batch", b"labels": labels, b"data": data,
             b"filenames": [f"image_{index}.png".encode() for index in range(len(labels))]}
    return pickle.dumps(batch, protocol=2).replace(b"numpy._core.multiarray", b"numpy.core.multiarray")


def write_cifar(root: Path, per_batch: int = 10, test: int = 12, seed: int = 0) -> dict[str, tuple]:
    """cifar-10-batches-py/data_batch_1..5 and test_batch; returns {name: (data (n, 3072) uint8, labels)}."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in [*(f"data_batch_{index}" for index in range(1, 6)), "test_batch"]:
        count = test if name == "test_batch" else per_batch
        data = rng.integers(0, 256, (count, 3072), dtype=np.uint8)
        labels = [int(label) for label in rng.integers(0, 10, count)]
        (folder / name).write_bytes(cifar_pickle(data, labels))
        written[name] = (data, labels)
    return written


def split_of(name: str) -> str:
    bucket = zlib.crc32(name.encode()) % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def png_bytes(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_pathfinder(root: Path, layout: str = "single", size: int = 32, count: int = 40, seed: int = 0,
                     difficulty: str = "curv_contour_length_14") -> dict[str, tuple]:
    """pathfinder<size>/<difficulty>/imgs/<k>/sample_<i>.png and metadata/<k>.npy (space-separated text, one image
    a line), ten images a folder, with one empty PNG listed (skipped, as LRA does); returns
    {"imgs/<k>/sample_<i>.png": (pixels (size, size) uint8 or None for the empty one, label)}."""
    rng = np.random.default_rng(seed)
    folder = release(root, layout) / f"pathfinder{size}" / difficulty
    written = {}
    for index in range(count + 1):
        group, name = index // 10, f"sample_{index}.png"
        (folder / "imgs" / str(group)).mkdir(parents=True, exist_ok=True)
        (folder / "metadata").mkdir(parents=True, exist_ok=True)
        label = int(rng.integers(0, 2))
        if index == 3:  # the empty image
            pixels, data = None, b""
        else:
            pixels = rng.integers(0, 256, (size, size), dtype=np.uint8)
            data = png_bytes(pixels)
        (folder / "imgs" / str(group) / name).write_bytes(data)
        with (folder / "metadata" / f"{group}.npy").open("a") as metadata:
            metadata.write(f"imgs/{group} {name} {index % 10} {label} 14 1.5 7 2\n")
        written[f"imgs/{group}/{name}"] = (pixels, label)
    return written
