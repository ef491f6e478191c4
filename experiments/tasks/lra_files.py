"""Readers of the Long Range Arena's published files: each turns one data set's files into documents (token values,
0-255, one uint8 array per document) and labels, or refuses a malformed file in one sentence that names the file
and the line (`DataError`); a file that is not there is a `MissingData` sentence naming the folder, the file and
where the data comes from.

The formats, as LRA's release and its loaders (`lra_benchmarks/*/input_pipeline.py`) have them:
    ListOps     listops-1000/basic_{train,val,test}.tsv: a header `Source<TAB>Target`, then an expression and its
                value 0-9; tokens: drop `(` and `)`, split on whitespace (LRA renames `]` first, to keep it
                through its tokenizer; here `]` is a token as it stands).
    Retrieval   tsv_data/new_aan_pairs.{train,eval,test}.tsv: no header, five tab-separated columns (label, a float
                0 or 1; id1; id2; text1; text2), read with quoting off; each text's bytes.
    Text        aclImdb/{train,test}/{pos,neg}/*.txt (IMDb's own archive, not LRA's): one review per file, its
                bytes with surrounding whitespace stripped (as TFDS reads them); pos is label 1.
    Image       cifar-10-batches-py/data_batch_1..5 and test_batch (CIFAR-10's python version): pickled dicts of
                `data` (n, 3072) uint8, red, green then blue planes of 32x32, and `labels`; read by an unpickler
                that builds nothing but numpy arrays, lists and bytes.
    Pathfinder  pathfinder{32,64,128,256}/<difficulty>/metadata/*.npy: despite the name, text, one image a line,
                space-separated: field 0 the image's folder, 1 its file, 3 its label; the PNGs hold grey levels.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from common.options import OptionError
from experiments.tasks.listops import CLOSE, DIGITS, OPERATORS

RELEASE = "lra_release"
RELEASE_SOURCE = ("LRA's release archive, https://storage.googleapis.com/long-range-arena/lra_release.gz, unpacked "
                  "into the data folder")
# The generated ListOps task's token ids: digits 0-9, its operators, then `]`.
LISTOPS_TOKENS = {**{str(digit): digit for digit in range(DIGITS)},
                  **{operator: DIGITS + index for index, operator in enumerate(OPERATORS)}, "]": CLOSE}
CIFAR_BATCHES = (*(f"data_batch_{index}" for index in range(1, 6)), "test_batch")
GREY_WEIGHTS = (0.2989, 0.5870, 0.1140)  # tf.image.rgb_to_grayscale's, as LRA converts CIFAR-10


class DataError(OptionError):
    """A data file that is not in its published format; the sentence names the file and the line."""


class MissingData(OptionError):
    """A task's files are not where it looked; the sentence names the folder and file and where they come from."""


def release_file(root: Path, relative: str, task: str) -> Path:
    """`relative` under the release's folder in `root`: root/lra_release/, one lra_release/ level deeper (some copies
    of the archive), or root itself; MissingData naming where it looked when none holds it."""
    for base in (root / RELEASE, root / RELEASE / RELEASE, root):
        if (base / relative).exists():
            return base / relative
    raise MissingData(f"Task {task!r} found no {root / RELEASE / relative} (nor one {RELEASE}/ level deeper, nor "
                      f"{root / relative}); it comes with {RELEASE_SOURCE}.")


def split_of(name: str) -> str:
    """The split a fixed rule puts an example in, by its file name (crc32, so stable everywhere): one in ten each
    to test and validation, the rest to train; how Pathfinder's 80/10/10 split and IMDb's held-out part are made."""
    bucket = zlib.crc32(name.encode()) % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number from 1, line without its line break) of a file read as bytes; a last empty line is left out."""
    with path.open("rb") as file:
        for number, line in enumerate(file, 1):
            line = line.removesuffix(b"\n").removesuffix(b"\r")
            if line:
                yield number, line


def read_listops(path: Path) -> tuple[list[np.ndarray], list[int]]:
    """One ListOps TSV: each expression's token ids (digits 0-9, [MIN [MAX [MED [SM 10-13, `]` 14) and value."""
    documents, labels = [], []
    for number, line in _lines(path):
        text = line.decode("ascii", errors="replace")
        if number == 1:
            if text.split("\t") != ["Source", "Target"]:
                raise DataError(f"{path}, line 1: header {text[:40]!r}; accepted: Source<TAB>Target.")
            continue
        fields = text.split("\t")
        if len(fields) != 2:
            raise DataError(f"{path}, line {number}: {len(fields)} tab-separated columns; accepted: two, an "
                            "expression and its value.")
        source, target = fields
        if target.strip() not in {str(digit) for digit in range(10)}:
            raise DataError(f"{path}, line {number}: target {target[:20]!r}; accepted: a digit 0 to 9.")
        tokens = source.replace("(", " ").replace(")", " ").split()
        unknown = next((token for token in tokens if token not in LISTOPS_TOKENS), None)
        if unknown is not None or not tokens:
            raise DataError(f"{path}, line {number}: token {unknown!r} in the expression; accepted: a non-empty "
                            f"expression of {', '.join(LISTOPS_TOKENS)} with ( and ).")
        documents.append(np.array([LISTOPS_TOKENS[token] for token in tokens], dtype=np.uint8))
        labels.append(int(target))
    return documents, labels


def read_aan(path: Path, keep: int) -> tuple[list[np.ndarray], list[int]]:
    """One AAN pairs TSV: two documents per line (text1, text2: their first `keep` bytes) and the label."""
    documents, labels = [], []
    for number, line in _lines(path):
        fields = line.split(b"\t")
        if len(fields) != 5:
            raise DataError(f"{path}, line {number}: {len(fields)} tab-separated columns; accepted: five (label, "
                            "id1, id2, text1, text2), read with quoting off.")
        try:
            label = float(fields[0])
        except ValueError:
            label = None
        if label not in (0.0, 1.0):
            raise DataError(f"{path}, line {number}: label {fields[0][:20].decode(errors='replace')!r}; "
                            "accepted: 0 or 1.")
        documents += [np.frombuffer(fields[3][:keep], dtype=np.uint8), np.frombuffer(fields[4][:keep], np.uint8)]
        labels.append(int(label))
    return documents, labels


def imdb_reviews(folder: Path, split: str, task: str) -> list[tuple[str, Path, int]]:
    """(name `pos/123_9.txt`, path, label) of every review of IMDb's `split` (train or test), in name order."""
    reviews = []
    for label, polarity in ((0, "neg"), (1, "pos")):
        directory = folder / split / polarity
        files = sorted(directory.glob("*.txt")) if directory.is_dir() else []
        if not files:
            raise MissingData(f"Task {task!r} found no reviews (*.txt) in {directory}; IMDb's folder aclImdb/ comes "
                              "from https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz, unpacked into "
                              "the data folder.")
        reviews += [(f"{polarity}/{file.name}", file, label) for file in files]
    return reviews


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds numpy arrays and plain containers only: a CIFAR-10 batch needs nothing else, and
    a pickle that names any other callable is refused rather than run."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}  # encode: bytes, written by Python 3

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR-10 batch does not hold")
        return super().find_class(module.replace("numpy.core.", "numpy._core."), name)


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch: its images (n, 3072) uint8 (red, green, blue planes) and labels (n,) 0-9."""
    try:
        with path.open("rb") as file:
            batch = _ArraysOnly(file, encoding="bytes").load()
    except Exception as error:  # a truncated or foreign pickle fails in many ways; every one is the file's fault
        raise DataError(f"{path}, byte stream: not a readable CIFAR-10 batch ({type(error).__name__}: "
                        f"{str(error)[:80]}); accepted: a batch of CIFAR-10's python version.") from None
    data = batch.get(b"data") if isinstance(batch, dict) else None
    labels = batch.get(b"labels") if isinstance(batch, dict) else None
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{path}, entry 'data': not a (n, 3072) uint8 array; accepted: a batch of CIFAR-10's "
                        "python version.")
    if not isinstance(labels, list) or len(labels) != len(data):
        raise DataError(f"{path}, entry 'labels': not a list of {len(data)} labels; accepted: one label per image.")
    bad = next((index for index, label in enumerate(labels) if not isinstance(label, int) or not 0 <= label <= 9),
               None)
    if bad is not None:
        raise DataError(f"{path}, entry 'labels', item {bad}: {labels[bad]!r}; accepted: a class 0 to 9.")
    return data, np.array(labels, dtype=np.int64)


def grey(images: np.ndarray) -> np.ndarray:
    """(n, 3072) RGB planes -> (n, 1024) grey levels, as tf.image.rgb_to_grayscale computes them from uint8 (LRA's
    conversion): channels scaled to [0, 1] in float32, weighted, summed, times 255.5 and truncated to uint8."""
    channels = images.reshape(len(images), 3, 1024).astype(np.float32) * np.float32(1 / 255)  # (n, 3, 1024)
    weights = np.array(GREY_WEIGHTS, dtype=np.float32)
    level = channels[:, 0] * weights[0] + channels[:, 1] * weights[1] + channels[:, 2] * weights[2]  # (n, 1024)
    return (level * np.float32(255.5)).astype(np.uint8)


def pathfinder_index(folder: Path) -> list[tuple[Path, int, str, int]]:
    """(metadata file, line, image path relative to `folder`, label) of every image a Pathfinder folder's metadata
    lists, metadata files in the numeric order of their names."""
    files = sorted((folder / "metadata").glob("*.npy"), key=lambda path: (len(path.stem), path.stem))
    entries = []
    for metadata in files:
        for number, line in _lines(metadata):
            fields = line.decode("ascii", errors="replace").split(" ")
            if len(fields) < 4 or fields[3] not in ("0", "1"):
                label = repr(fields[3]) if len(fields) >= 4 else f"{len(fields)} fields"
                raise DataError(f"{metadata}, line {number}: {label}; accepted: space-separated fields, the image's "
                                "folder, its file, then the label 0 or 1 as the fourth.")
            entries.append((metadata, number, f"{fields[0]}/{fields[1]}", int(fields[3])))
    return entries


def read_png(path: Path, size: int, named_by: str) -> np.ndarray:
    """A Pathfinder PNG's grey levels, (size * size,) uint8 row by row; DataError when it is not one."""
    from PIL import Image  # imported here: Pathfinder's PNGs are the only images read from files

    try:
        with Image.open(path) as image:
            image.load()
            mode, pixels = image.mode, np.asarray(image)
    except (OSError, SyntaxError, ValueError) as error:
        raise DataError(f"{path} (named by {named_by}): not a readable PNG ({str(error)[:80]}); accepted: a "
                        f"{size}x{size} grey-scale PNG.") from None
    if mode != "L" or pixels.shape != (size, size):
        raise DataError(f"{path} (named by {named_by}): a {mode} image of {pixels.shape[:2]}; accepted: a "
                        f"{size}x{size} grey-scale (L) PNG.")
    return pixels.reshape(-1)
