"""LRA's pixel tasks on real images: CIFAR-10 in grey levels (Image), and Pathfinder's and Path-X's PNGs.

An image is flattened row by row into its grey levels 0-255 as tokens, then a query: token ids 0..num_classes-1 are
the answers, grey level g is id g + num_classes, the query `?` is last; no padding (an image fills its sequence);
seq_len = pixels + 1, the query scored, its distance the pixel count (one bucket).

Image (`lra_image`, LRA Table 1's Image, Transformer 42.44): CIFAR-10's python version,
cifar-10-batches-py/data_batch_1..5 and test_batch; colour turned to grey as LRA's pipeline does
(tf.image.rgb_to_grayscale on uint8: `lra_files.grey`); 32x32 = 1,024 pixels. LRA trains on TFDS's train[:90%] and
validates on train[90%:]: here the first 90% of data_batch_1..5 in file order (45,000) train and the last 10%
(5,000) validate (TFDS orders the same images otherwise); test_batch (10,000) tests. Classes: airplane,
automobile, bird, cat, deer, dog, frog, horse, ship, truck.

Pathfinder (`lra_pathfinder`, LRA Table 1's Pathfinder, Transformer 71.40) and Path-X (`lra_pathx`, Table 1's
Path-X: every model failed): lra_release/pathfinder{32,64,128,256}/<difficulty>/, difficulty easy
(curv_baseline), intermediate (curv_contour_length_9) or hard (curv_contour_length_14, the default); the images
metadata/*.npy lists (a text file despite its name: `imgs/0 sample_0.png 0 1 ...`, the folder, the file and as
fourth field the label, 1 when the two dots are joined by a path: "same"). An empty PNG is skipped, as LRA's
pipeline skips it (pathfinder32/curv_baseline/imgs/0/sample_172.png is one); a PNG that cannot be read, or is not
grey-scale of the folder's size, is refused naming it and the metadata line. Splits by a fixed rule on the image's
path (`lra_files.split_of`: crc32 mod 10 is 0 for test, 1 for validation): about 80/10/10, as LRA's
[:80%]/[80%:90%]/[90%:] of TFDS's order.

Worked example (Pathfinder at image_size 2, were there such PNGs): pixels 0 255 / 17 0, label 1 ->
    input: g0 g255 g17 g0 ?        label 1 ("same") at position 4; distance 4 (metadata length 4)

Profiles: quick, the small bidirectional model, 400 steps of 32, 512 examples of each held-out split (Path-X:
depth 1, 50 steps of 4, 64 examples). lra, LRA's published transformer_base configs (`image/configs/...`): Image
1 layer of width 128, 8 heads of width 8, MLP 128, learned positions, 35,000 steps of 256 (200 epochs of 45,000),
lr 5e-4 with 175 warm-up steps and cosine decay to 0; Pathfinder 4 layers of width 32, 4 heads of width 4, MLP 32,
sinusoidal positions, 62,400 steps of 512 (200 epochs of 160,000), lr 1e-3, 312 warm-up steps, cosine to 0;
Path-X 1 layer of width 32, 2 heads of width 8, MLP 32, learned positions, 500,000 steps of 64, lr 1e-3, 2,500
warm-up steps, cosine to 0, gradient norm clipped to 1; no weight decay; bidirectional; the whole test split.
Evaluation every tenth of the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from common.options import OptionError, option
from experiments.tasks.lra_base import DataOptions, DataTask, data_profiles, pack_images
from experiments.tasks.lra_files import (
    CIFAR_BATCHES,
    RELEASE_SOURCE,
    DataError,
    MissingData,
    grey,
    pathfinder_index,
    read_cifar_batch,
    read_png,
    release_file,
    split_of,
)
from experiments.tasks.registry import register_task

CIFAR = "cifar-10-batches-py"
CIFAR_SOURCE = ("CIFAR-10's python version, https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, unpacked into the "
                "data folder")
CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
PATHFINDER_ANSWERS = ("different", "same")  # the generated pathfinder task's: label 1 when the dots are joined
DIFFICULTY = {"easy": "curv_baseline", "intermediate": "curv_contour_length_9", "hard": "curv_contour_length_14"}
_IMAGE_BUDGET = {"weight_decay": 0.0, "min_lr_ratio": 0.0, "grad_clip": 0.0}  # LRA's: cosine to 0 (Path-X clips)
_QUICK_TRAIN = {"steps": 400, "batch_size": 32, "lr": 1e-3, "eval_every": 200}  # images: batches of 32


class ImageTask(DataTask):
    """A task over grey-scale images: the answers, the 256 grey levels g0..g255, then the query `?`."""

    answers: tuple[str, ...]

    def __init__(self, options: DataOptions, profile: str) -> None:
        self.vocabulary = [*self.answers, *(f"g{level}" for level in range(256)), "?"]
        self.num_classes = len(self.answers)
        self.value_offset, self.query = self.num_classes, len(self.vocabulary) - 1
        self.pad = self.query  # never shown: an image fills its sequence
        side = getattr(options, "image_size", 32)
        if options.seq_len != side**2 + 1:
            raise OptionError(f"Task {self.name!r} option 'seq_len' got {options.seq_len}; accepted: {side**2 + 1}, "
                              f"the {side}x{side} pixels and the query.")
        super().__init__(options, profile)

    def report_buckets(self) -> list[tuple[int, int]]:
        """One bucket: every example's distance is its pixel count."""
        return [(self.width, self.width)]

    def show(self, values: list[int]) -> str:
        side = round(len(values) ** 0.5)
        return f"<{side}x{side} grey image, mean level {sum(values) / max(1, len(values)):.1f}>"


@register_task("lra_image")
class RealImage(ImageTask):
    """CIFAR-10 in LRA's grey levels, 1,024 pixels as tokens (LRA's Image): which of ten classes?"""

    data_source = f"{CIFAR}/data_batch_1..5 and test_batch, from {CIFAR_SOURCE}"
    answers = CIFAR_CLASSES

    profiles = data_profiles(options={"seq_len": 1025}, quick_train=_QUICK_TRAIN,
                             model={"dim": 128, "depth": 1, "heads": 8, "head_dim": 8, "mlp_ratio": 1,
                                    "positions": "learned"},
                             train={"steps": 35000, "batch_size": 256, "lr": 5e-4, "warmup_steps": 175,
                                    **_IMAGE_BUDGET, "eval_every": 3500})

    def sources(self, root: Path) -> tuple[list[Path], dict]:
        paths = [root / CIFAR / name for name in CIFAR_BATCHES]
        missing = next((path for path in paths if not path.is_file()), None)
        if missing is not None:
            raise MissingData(f"Task {self.name!r} found no {missing}; it comes with {CIFAR_SOURCE}.")
        return paths, {}

    def cache_name(self) -> str:
        return "cifar10"

    def encode(self, root: Path) -> dict[str, np.ndarray]:
        batches = [read_cifar_batch(root / CIFAR / name) for name in CIFAR_BATCHES]
        images = grey(np.concatenate([images for images, _ in batches[:-1]]))  # (50,000, 1,024)
        labels = np.concatenate([labels for _, labels in batches[:-1]])
        train = len(images) * 9 // 10  # TFDS's train[:90%]
        return {**pack_images("train", images[:train], labels[:train]),
                **pack_images("validation", images[train:], labels[train:]),
                **pack_images("test", grey(batches[-1][0]), batches[-1][1])}


@register_task("lra_pathfinder")
class RealPathfinder(ImageTask):
    """Pathfinder's PNGs from LRA's release (LRA's Pathfinder at 32x32): are the two dots joined by a path?"""

    data_source = f"lra_release/pathfinder32/curv_contour_length_14/ (other sizes, difficulties), from {RELEASE_SOURCE}"
    answers = PATHFINDER_ANSWERS

    @dataclass(frozen=True)
    class Options(DataOptions):
        image_size: Literal[32, 64, 128, 256] = option(32, "the release's folder pathfinder<image_size> read (128: "
                                                           "Path-X)")
        difficulty: Literal["easy", "intermediate", "hard"] = option(
            "hard", "curv_baseline, curv_contour_length_9 or curv_contour_length_14 (LRA's Table 1)")
        seq_len: int = option(0, "tokens per example: image_size**2 pixels and the query; 0: that")

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.seq_len == 0:  # frozen: filled once, while being constructed
                object.__setattr__(self, "seq_len", self.image_size**2 + 1)

    profiles = data_profiles(quick_train=_QUICK_TRAIN,
                             model={"dim": 32, "depth": 4, "heads": 4, "head_dim": 4, "mlp_ratio": 1,
                                    "positions": "sinusoidal"},
                             train={"steps": 62400, "batch_size": 512, "lr": 1e-3, "warmup_steps": 312,
                                    **_IMAGE_BUDGET, "eval_every": 6240})

    def folder(self, root: Path) -> Path:
        """The release's folder of this size and difficulty (the one holding metadata/ and imgs/)."""
        relative = f"pathfinder{self.options.image_size}/{DIFFICULTY[self.options.difficulty]}/metadata"
        return release_file(root, relative, self.name).parent

    def sources(self, root: Path) -> tuple[list[Path], dict]:
        folder = self.folder(root)
        entries = pathfinder_index(folder)
        for metadata, number, image, _ in entries:
            if not (folder / image).is_file():
                raise DataError(f"{metadata}, line {number}: names {folder / image}, which is not there; accepted: "
                                "the metadata of the images the folder holds.")
        return sorted({metadata for metadata, *_ in entries} | {folder / image for _, _, image, _ in entries}), {}

    def cache_name(self) -> str:
        return f"pathfinder{self.options.image_size}-{self.options.difficulty}"

    def encode(self, root: Path) -> dict[str, np.ndarray]:
        folder, pixels = self.folder(root), self.options.image_size**2
        entries = [entry for entry in pathfinder_index(folder) if (folder / entry[2]).stat().st_size > 0]
        arrays = {}
        for split in ("train", "validation", "test"):
            mine = [entry for entry in entries if split_of(entry[2]) == split]
            images = np.empty((len(mine), pixels), dtype=np.uint8)
            for row, (metadata, number, image, _) in enumerate(mine):
                images[row] = read_png(folder / image, self.options.image_size, f"{metadata}, line {number}")
            arrays.update(pack_images(split, images, np.array([label for *_, label in mine], dtype=np.int64)))
        return arrays


@register_task("lra_pathx")
class RealPathX(RealPathfinder):
    """Path-X: Pathfinder's 128x128 PNGs from LRA's release (16,384 pixels): are the two dots joined by a path?"""

    data_source = f"lra_release/pathfinder128/curv_contour_length_14/, from {RELEASE_SOURCE}"

    @dataclass(frozen=True)
    class Options(RealPathfinder.Options):
        image_size: Literal[32, 64, 128, 256] = option(128, "the release's folder pathfinder<image_size> read "
                                                            "(Path-X: 128)")

    profiles = data_profiles(quick={"test_size": 64}, quick_model={"dim": 32, "depth": 1, "heads": 2},
                             quick_train={"steps": 50, "batch_size": 4, "lr": 1e-3, "eval_every": 50},
                             model={"dim": 32, "depth": 1, "heads": 2, "head_dim": 8, "mlp_ratio": 1,
                                    "positions": "learned"},
                             train={"steps": 500000, "batch_size": 64, "lr": 1e-3, "warmup_steps": 2500,
                                    **_IMAGE_BUDGET, "grad_clip": 1.0, "eval_every": 50000})
