"""Pathfinder: are the two marker dots of a grey-scale image joined by one dashed curve?

The Pathfinder task of Linsley et al. 2018 ("Learning long-range spatial dependencies with horizontal
gated recurrent units") as Long Range Arena uses it (Tay et al. 2021, "Long Range Arena: A Benchmark for
Efficient Transformers": Pathfinder at 32x32, Path-X at 128x128), regenerated here with torch. An image
of image_size x image_size pixels (seq_len = image_size**2 + 1) holds two marker dots and dashed curved
paths; label 1 ("same") when the markers lie on one path, 0 ("different") when on two. The image is
flattened row by row into grey-level tokens, followed by a query token `?` where the label is scored.

Paths: a path is a curve of path_length points one unit apart, whose heading turns by at most max_turn
degrees from one step to the next, rounded to pixels with floor(x + 0.5); its dashes leave every
dash_period-th point dark, from a random phase, but never its two end points. Paths, and markers, lie >= 3
apart (Chebyshev); every picture holds all its distractors (redrawn where they lack room).

Both classes are the same picture, and the marked ends have the same shape around them (Linsley et al.'s negatives
mark the ends of two different paths): every picture holds two copies of one path of L points, placed apart, and
num_distractors distractor paths (L drawn uniformly from min_path_length to max_path_length, then kept with its shape
only where it has a place to break, so longer paths are commoner; a distractor's points drawn from
min_distractor_length to max_distractor_length). One copy, either at random, is broken: BREAK_POINTS = 2 consecutive
points are left out, so its loose ends lie beyond the flood radius, at a place drawn among those farther than 4 pixels
from the copy's ends and at least 2 from the straight segment between them, where its two parts stay 3 apart. "same"
marks the intact copy's ends, "different" the broken copy's. So the markers lie as far apart, the paths leave them the
same way, and a 9x9 window around each marker or a scan of the straight line between them sees the same in both
classes. The shortcut probes (tests/experiments/test_shortcut_probes.py, linear and gradient-boosted, 2 x 1,000
examples) read pixel statistics, those local cues and end cues (how near each marker paths end or thin out): 0.56 and
0.50 at quick, 0.55 and 0.52 at standard. The end cues carry what the linear probe reads: with 4,000 examples a side
it reads 0.56 at quick, the end cues alone 0.58. Short paths give the break away. In the 16x16 image quick had before
(copies of 14-16 points, no distractor), a break's loose ends lay within a path's length of the markers in a
"different" picture and on the other copy in a "same" one: the probes read 0.74 and 0.77, the end cues alone 0.78. A
20x20 image with copies of 20-26 points and a distractor read 0.65 (2,000 a side). Four arms wired in pairs at a
junction kept the probes near chance at 16x16, but a rule that reads the junction's wiring and on which sides of it the
markers lie, following no arm, was right 85% of the time. A generator that marked two half paths' starts read 0.999.

Connectivity (what the label means): lit pixels at most FLOOD_RADIUS = 2 apart on both axes are
neighbours (a 5x5 neighbourhood). That bridges a dash's one-point gap and never a break or the gap between two
paths, so a flood fill over lit pixels from one marker reaches the other exactly when the label is "same".

Token ids: 0 "different", 1 "same" (the answers: num_classes = 2, chance_accuracy = 0.5), then the grey levels
g0..g<grey_levels-1> (ids 2..grey_levels+1): g0 background, g1..g<grey_levels-2> path pixels (drawn uniformly
per pixel, so they carry no path identity), g<grey_levels-1> the two markers; then `?`; vocab_size =
grey_levels + 3. Every batch is exactly half positive (an odd batch has one more of a class drawn at random),
and so is the test set (test_size is even).

Distances: only the final `?` is scored; its distance is seq_len - 1 minus the row-major position of the marker
pixel that comes first in row-major order (the first marker). Metadata: `distance` (the same), `path_length` (L, the
marked copy's points, broken or not).

Profiles: (measured accuracies: docs/calibration.md) quick, 24x24 (577 tokens): copies of 28-34 points, two
distractors of 8-14, max_turn 30, dash_period 4, 3 grey levels; model dim 64, depth 2, 4 heads; 3,000 steps of 64 at
lr 1e-3 after 100 warm-up steps (on the 16x16 image at 3e-3 dense stayed at chance: 3,000 steps causal, 1,400
bidirectional, 1,800 with sinusoidal positions; at 1e-3, on a 12,000-step schedule, its validation accuracy reached
0.53 by step 3,000). Its distractors are shorter than the copies, unlike Linsley et al.'s, so that two fit beside
them (about 1 picture in 4.5 does); their ends are loose ends away from the markers in both classes. standard, 32x32
(1,025 tokens, LRA's Pathfinder): paths and distractors of 24-36 points, 2 distractors, 8 grey levels; dim 128, depth
4; 5,000 steps of 32 at lr 5e-4. long, 128x128 (16,385 tokens, LRA's Path-X): paths and distractors of 48-96 points,
10 distractors, 8 grey levels, 200 eval examples; dim 128, depth 4; 5,000 steps of 8 at lr 5e-4.

Purpose: can attention follow a curve across the image? The evidence is spread along a path, not held in one token,
and a pixel's neighbours above and below lie image_size tokens apart in the sequence.

Cost: one scored position per sequence of image_size**2 + 1 tokens; drawing a batch is O(batch * (num_distractors
+ 2) * image_size**2 log image_size) (an FFT correlation places each path), times the redraws (a quick picture fits
about 1 time in 4.5, a standard one 2 in 5): about 1.1 s for the 2,432 examples of the quick test set on one core,
0.4 s for the 1,000 at standard, 1.2 s for the 200 of long. A size where fewer than 10 of 2,000 pictures fit is refused
when the task is built, after about 0.3 s of drawing; the geometry is in `pathfinder_geometry.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from common.options import option, require
from experiments.tasks import pathfinder_geometry as geometry
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.images import save_images
from experiments.tasks.registry import register_task

# The i-th point of a path lies at most i pixels from its start:
MIN_PATH_LENGTH = 2 * (geometry.BREAK_CLEARANCE + 1) + geometry.BREAK_POINTS
DISTRACTOR_TRIES = 8  # shapes tried for each distractor before its picture is redrawn
# A size is refused when fewer than FIT_LEAST of FIT_DRAWS pictures drawn with seed 0 fit (1 in 6 does at quick, 1 in
# 21 with a distractor, 1 in 2,200 with two, 1 in 60 at the docstring's 12x12); above that, MAX_ROUNDS redraw rounds,
# each for the examples still without a picture, leave (1 - 1/200)^6000 = 9e-14 of them without one.
FIT_LEAST, FIT_DRAWS, MAX_ROUNDS = 10, 2000, 6000
_FITS: dict[object, int] = {}  # Options -> how many of their first FIT_DRAWS pictures fit (counted up to FIT_LEAST)

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 4, "heads": 4}


@register_task("pathfinder")
class Pathfinder(Task):
    """Say whether the two marker pixels of a flattened image lie on one dashed path ("same") or two.

    Worked example: the test set of `create_task("pathfinder", seq_len=145, min_path_length=14,
    max_path_length=14, num_distractors=0, max_turn=45, test_size=2)`, a 12x12 image (g2 marks a marker, g1 a path
    pixel; pixels as (row, column)), shown row by row, the query `?` last. It holds two copies of one 14-point path,
    7 columns apart. The left one is intact: from the marker at (0, 1) through (4, 2), (6, 4) and (9, 3) to the
    marker at (11, 2), every dark point a dash's one-point gap. The right one leaves out its two points between
    (4, 10) and (7, 10), 3 rows apart. Radius-2 neighbours join the left copy end to end, so the label is "same" (a
    "different" example marks the right copy's ends, (0, 8) and (11, 9)).

        input:    g0 g2 g0 g0 g0 g0 g0 g0 g1 g0 g0 g0
                  g0 g0 g0 g0 g0 g0 g0 g0 g0 g1 g0 g0
                  g0 g0 g1 g0 g0 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g1 g0 g0 g0 g0 g0 g0 g1 g0 g0
                  g0 g0 g1 g0 g0 g0 g0 g0 g0 g1 g1 g0
                  g0 g0 g0 g0 g1 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g0 g0 g1 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g0 g1 g0 g0 g0 g0 g0 g0 g1 g0
                  g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g1 g0
                  g0 g0 g0 g1 g0 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g1 g0 g0 g0 g0 g0 g0 g1 g0 g0
                  g0 g0 g2 g0 g0 g0 g0 g0 g0 g1 g0 g0 ?
        label:    same (id 1) at position 144, the `?`; every other position IGNORE
        distance: 144 - 1 = 143 (back to the first marker pixel, (0, 1)); metadata path_length 14
        task.label_text(batch, 0) == "144: ? -> same"
    """

    capacity_option = "num_distractors"  # more paths to tell the connecting one from
    suite_position = 6
    not_discriminative = {"quick": "dense stays at chance after its 3,000 steps (docs/calibration.csv; ln 2 loss), "
                                   "as it did on the 16x16 image quick had before, and so does GRU; no more CPU time "
                                   "goes to it: it is to be measured at the standard profile on a GPU (make "
                                   "calibration TASK=pathfinder PROFILE=standard DEVICE=cuda); it runs when named"}

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(577, "tokens per example: a square image flattened row by row, then the query; "
                                   "a square + 1 (577 = 24x24 + 1)")
        min_path_length: int = option(28, "fewest points of the marked shape's copies, markers included (a path "
                                           "of n points spans at most n - 1 pixels)")
        max_path_length: int = option(34, "most points of the marked shape's copies, markers included")
        num_distractors: int = option(2, "paths besides the two copies of the marked shape that every image holds")
        min_distractor_length: int = option(8, "fewest points of a distractor path (Linsley et al.'s are as long as "
                                                "the marked path; quick's are shorter, so that two fit in 24x24)")
        max_distractor_length: int = option(14, "most points of a distractor path")
        max_turn: float = option(30.0, "largest change of heading, in degrees, from one step of a path to the next")
        dash_period: int = option(4, "every dash_period-th point of a path is left dark (the dashes)")
        grey_levels: int = option(3, "quantised grey levels: 0 background, 1..grey_levels-2 paths, the top one "
                                     "the markers")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set, half of them positive (an even number)")

        def __post_init__(self) -> None:
            side = math.isqrt(max(self.seq_len - 1, 0))
            require(self.seq_len >= 26 and side * side == self.seq_len - 1, "seq_len", self.seq_len,
                    "a square + 1 of at least 5 * 5 + 1 = 26 (the image's pixels, then the query), e.g. 1025 "
                    "for 32x32")
            require(self.min_path_length >= MIN_PATH_LENGTH, "min_path_length", self.min_path_length,
                    f"an integer >= {MIN_PATH_LENGTH}, so that a copy can break farther than "
                    f"{geometry.BREAK_CLEARANCE} pixels from both its ends")
            require(self.max_path_length >= self.min_path_length, "max_path_length", self.max_path_length,
                    f"an integer >= min_path_length = {self.min_path_length}")
            require(self.num_distractors >= 0, "num_distractors", self.num_distractors, "an integer >= 0")
            require(self.min_distractor_length >= 2, "min_distractor_length", self.min_distractor_length,
                    "an integer >= 2")
            require(self.max_distractor_length >= self.min_distractor_length, "max_distractor_length",
                    self.max_distractor_length, f"an integer >= min_distractor_length = {self.min_distractor_length}")
            require(0 <= self.max_turn <= 180, "max_turn", self.max_turn, "a number of degrees from 0 to 180")
            require(self.dash_period >= 2, "dash_period", self.dash_period, "an integer >= 2")
            require(self.grey_levels >= 3, "grey_levels", self.grey_levels, "an integer >= 3")
            require(self.test_size >= 2 and self.test_size % 2 == 0, "test_size", self.test_size,
                    "a positive even number")

    profiles = {
        # 24x24 (the options' defaults): copies of 28-34 points, two distractors of 8-14.
        "quick": Profile(options={}, model=_QUICK_MODEL, train={"steps": 3000, "batch_size": 64, "lr": 1e-3,
                                                               "warmup_steps": 100, "eval_every": 250}),
        "standard": Profile(options={"seq_len": 1025, "min_path_length": 24, "max_path_length": 36,
                                     "num_distractors": 2, "min_distractor_length": 24, "max_distractor_length": 36,
                                     "grey_levels": 8, "test_size": 1000},
                            model=_LARGER_MODEL,
                            train={"steps": 5000, "batch_size": 32, "lr": 5e-4, "eval_every": 500}),
        # 128x128, LRA's Path-X size (16,385 tokens): paths of 48-96 points among 10 distractors.
        "long": Profile(options={"seq_len": 16385, "min_path_length": 48, "max_path_length": 96,
                                 "num_distractors": 10, "min_distractor_length": 48, "max_distractor_length": 96,
                                 "grey_levels": 8, "test_size": 200},
                        model=_LARGER_MODEL,
                        train={"steps": 5000, "batch_size": 8, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.image_size = math.isqrt(options.seq_len - 1)
        self.points = max(options.max_path_length, options.max_distractor_length)  # a path's points, padded
        self.vocabulary = ["different", "same", *(f"g{level}" for level in range(options.grey_levels)), "?"]
        self.num_classes = 2
        self.chance_accuracy = 0.5
        fits = self._fits()  # here, so that a run refuses a size before it trains, in one sentence
        if fits < FIT_LEAST:
            raise ValueError(f"Pathfinder placed {2 + options.num_distractors} paths of up to "
                             f"{self.points} points {geometry.SEPARATION} pixels apart, one copy with a "
                             f"place to break, in {fits} of {FIT_DRAWS} {self.image_size}x{self.image_size} images; "
                             f"accepted: sizes where at least {FIT_LEAST} fit (fewer or shorter paths, or a larger "
                             "image).")

    def _draw_world(self, count: int, generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
        """One picture per example and the two ways to mark it: `valid` (count,) says whether it fits.

        The picture holds two copies of one path of L points, placed apart, one of them (either, at random)
        broken (`_break`), and the distractors. "same" marks the intact copy's ends, "different" the broken
        copy's: the same picture either way, and the marked ends have the same shape around them.
        """
        options, size = self.options, self.image_size
        copy = torch.randint(options.min_path_length, options.max_path_length + 1, (count, 1), generator=generator,
                             device=device)  # (count, 1) both copies' points
        distractor = torch.randint(options.min_distractor_length, options.max_distractor_length + 1,
                                   (count, options.num_distractors), generator=generator, device=device)
        lengths = torch.cat([copy, copy, distractor], 1)  # (count, paths): the two copies, the distractors
        present = torch.arange(self.points, device=device) < lengths[..., None]  # (count, paths, points)
        rows = torch.arange(count, device=device)
        shape = geometry.curves(count, self.points, options.max_turn, generator, device)  # (count, points, 2)
        start, valid = geometry.break_place(shape, lengths[:, 0], generator)
        marker_distance = (shape[rows, lengths[:, 0] - 1] - shape[:, 0]).abs().amax(-1)  # (count,) Chebyshev
        valid &= marker_distance >= geometry.SEPARATION

        empty = torch.zeros(count, size, size, device=device)
        first, placed = geometry.place(shape, present[:, 0], empty, generator)
        valid &= placed
        occupied = geometry.paint(first, present[:, 0], size)  # (count, S, S)
        second, placed = geometry.place(shape, present[:, 1], geometry.near(occupied), generator)
        valid &= placed
        occupied = (occupied + geometry.paint(second, present[:, 1], size)).clamp(max=1)
        distractors, fitted = self._distractors(occupied, present, generator)  # (count, distractors, points, 2)
        valid &= fitted  # a picture without room for all its distractors is redrawn

        swap = torch.randint(2, (count, 1, 1), generator=generator, device=device).bool()
        intact, broken = torch.where(swap, second, first), torch.where(swap, first, second)  # (count, points, 2)
        index = torch.arange(self.points, device=device)
        removed = torch.zeros_like(present)  # (count, paths, points)
        removed[:, 1] = (index >= start[:, None]) & (index < start[:, None] + geometry.BREAK_POINTS)
        ends = lengths[:, 0] - 1
        return {
            "points": torch.cat([intact[:, None], broken[:, None], distractors], 1),
            "present": present, "removed": removed, "valid": valid, "lengths": lengths,
            "positive_markers": torch.stack([intact[:, 0], intact[rows, ends]], 1),
            "negative_markers": torch.stack([broken[:, 0], broken[rows, ends]], 1),
        }

    def _distractors(self, occupied: torch.Tensor, present: torch.Tensor,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Distractor paths clear of the `occupied` pixels (count, S, S) and of one another, with the lengths
        in `present` (count, paths, points), slots 2 onwards: their points (count, num_distractors, points, 2)
        and whether each example found room for all of them after DISTRACTOR_TRIES shapes each (count,)."""
        (count, size, _), device, points = occupied.shape, occupied.device, self.points
        distractors = []
        fitted = torch.ones(count, dtype=torch.bool, device=device)
        for slot in range(2, present.shape[1]):
            blocked = geometry.near(occupied)  # (count, S, S)
            path = torch.zeros(count, points, 2, dtype=torch.long, device=device)
            placed = torch.zeros(count, dtype=torch.bool, device=device)
            for _ in range(DISTRACTOR_TRIES):
                retry = (~placed).nonzero()[:, 0]  # the examples still without room for this distractor
                if len(retry) == 0:
                    break
                shape = geometry.curves(len(retry), points, self.options.max_turn, generator, device)
                path[retry], placed[retry] = geometry.place(shape, present[retry, slot], blocked[retry], generator)
            fitted &= placed
            occupied = (occupied + geometry.paint(path, present[:, slot] & placed[:, None], size)).clamp(max=1)
            distractors.append(path)
        if not distractors:
            return torch.zeros(count, 0, points, 2, dtype=torch.long, device=device), fitted
        return torch.stack(distractors, 1), fitted

    def save_images(self, batch: Batch, folder: str | Path, count: int) -> list[Path]:
        """The first `count` examples of `batch` as PNG files in `folder` (`experiments.tasks.images`)."""
        return save_images(self, batch, folder, count)

    def _fits(self) -> int:
        """Pictures that fit among the first FIT_DRAWS drawn with seed 0 on the CPU, counted once per options and
        only until FIT_LEAST have (so a roomy size stops after a draw or two)."""
        if self.options not in _FITS:
            generator, fits, drawn = torch.Generator().manual_seed(0), 0, 0
            while fits < FIT_LEAST and drawn < FIT_DRAWS:
                fits += int(self._draw_world(FIT_DRAWS // 10, generator, torch.device("cpu"))["valid"].sum())
                drawn += FIT_DRAWS // 10
            _FITS[self.options] = fits
        return _FITS[self.options]

    def _pictures(self, batch_size: int, generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
        """`_draw_world`'s tensors for batch_size pictures that fit, by rejection sampling, vectorised: each round
        draws a picture for every example still without one and keeps those that fit."""
        chosen: dict[str, torch.Tensor] = {}
        pending = torch.arange(batch_size, device=device)
        for _ in range(MAX_ROUNDS):
            worlds = self._draw_world(len(pending), generator, device)
            accepted = worlds.pop("valid")  # (pending,)
            for name, values in worlds.items():
                if name not in chosen:
                    chosen[name] = torch.zeros((batch_size, *values.shape[1:]), dtype=values.dtype, device=device)
                chosen[name][pending[accepted]] = values[accepted]
            pending = pending[~accepted]
            if len(pending) == 0:
                return chosen
        raise ValueError(f"Pathfinder found no picture for {len(pending)} of {batch_size} examples in {MAX_ROUNDS} "
                         f"rounds ({self._fits()} of {FIT_DRAWS} fit at this size); accepted: a roomier size.")

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        options, size = self.options, self.image_size
        cells = size * size
        order = torch.randperm(batch_size, generator=generator, device=device)
        offset = torch.randint(2, (1,), generator=generator, device=device)
        label = (order + offset) % 2  # (batch,) exactly half positive (an odd batch: one more of a random class)
        chosen = self._pictures(batch_size, generator, device)
        positive = label.bool()
        points = chosen["points"]  # (batch, paths, points, 2): the same kind of picture in both classes
        present = chosen["present"]
        # Dashes: each path leaves every dash_period-th point dark, from a random phase, but for its ends.
        phase = torch.randint(options.dash_period, present.shape[:2], generator=generator, device=device)
        index = torch.arange(self.points, device=device)  # (points,)
        ends = (index == 0) | (index == chosen["lengths"][..., None] - 1)  # (batch, paths, points)
        # A path's two end points stay lit, so a marker never relights a dark point and both classes light
        # as many pixels.
        lit_point = present & ~chosen["removed"] & (ends | ((index + phase[..., None]) % options.dash_period
                                                            != options.dash_period - 1))
        flat = torch.where(lit_point, points[..., 0] * size + points[..., 1], cells).flatten(1)  # (batch, paths*pts)
        lit = torch.zeros(batch_size, cells + 1, dtype=torch.bool, device=device).scatter_(1, flat, True)[:, :cells]
        levels = torch.randint(1, options.grey_levels - 1, (batch_size, cells), generator=generator, device=device)
        image = torch.where(lit, levels, 0)  # (batch, cells)
        markers = torch.where(positive[:, None, None], chosen["positive_markers"], chosen["negative_markers"])
        markers = markers[..., 0] * size + markers[..., 1]  # (batch, 2) flat positions
        image.scatter_(1, markers, options.grey_levels - 1)
        query = self.vocab_size - 1
        inputs = torch.cat([image + self.num_classes, torch.full((batch_size, 1), query, device=device)], 1)
        targets = torch.full_like(inputs, IGNORE)
        targets[:, -1] = label
        first = markers.amin(1)  # (batch,)
        distance = torch.full_like(inputs, -1)
        distance[:, -1] = self.seq_len - 1 - first
        path_length = chosen["lengths"][:, 0].clone()  # (batch,) the marked copy's points, broken or not
        return Batch(inputs, targets, distance, {"distance": distance[:, -1].clone(), "path_length": path_length})

