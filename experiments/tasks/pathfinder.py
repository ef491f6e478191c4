"""Pathfinder: are the two marker dots of a grey-scale image joined by one dashed curve?

The Pathfinder task of Linsley et al. 2018 ("Learning long-range spatial dependencies with horizontal
gated recurrent units") as Long Range Arena uses it (Tay et al. 2021, "Long Range Arena: A Benchmark for
Efficient Transformers": Pathfinder at 32x32, Path-X at 128x128), regenerated here with torch. An image
of image_size x image_size pixels (seq_len = image_size**2 + 1) holds two marker dots and dashed curved
paths; label 1 ("same") when the markers lie on one path, 0 ("different") when on two. The image is
flattened row by row into grey-level tokens, followed by a query token `?` where the label is scored.

Paths: a path is a curve of path_length points one unit apart, whose heading turns by at most max_turn
degrees from one step to the next, rounded to pixels with floor(x + 0.5); its dashes leave every
dash_period-th point dark, from a random phase, but never its two end points. Both classes are drawn
from the same kind of picture, as in Linsley et al. 2018, and differ only in where the markers sit.
Every picture holds a long path P of L points (L uniform in min_path_length..max_path_length), two half
paths H1 and H2 of ceil(L / 2) points each, and num_distractors distractor paths (lengths uniform in
min_path_length..max_path_length). "same": the markers sit at P's two ends. "different": at the starts
of H1 and H2, where H2 starts at H1's start plus P's span (end minus start) under one of the 8
symmetries of the pixel grid (turns by multiples of 90 degrees, mirror images). So the markers lie as
far apart on each axis in both classes, each marks the end of a path, and the marked paths light as
many pixels as the unmarked ones. Local cues still tell the classes apart (`known_shortcut`, pinned by the
shortcut probes' test): where the path pixels next to each marker head (a positive's path leaves each marker
towards the other) and whether pixels lie on the segment between the markers, even to a logistic regression:
0.999 at quick, 0.775 at standard (boosted trees 0.995, 0.843); broken or shifted copies of the marked path as
negatives moved the cue to the break's loose ends; a copy whose second half is reflected in the line through its
ends kills both cues (0.50 at standard) but puts its halves on opposite sides of that line, where a positive's short
smooth path bulges to one side: the probe's same-side cue reads 0.78 (boosted 0.83). Defeating them needs paths
long against the markers' distance; until then the task is out of the default suite. Every picture holds
all its distractors (redrawn where they lack room); paths, and markers, lie >= 3 apart (Chebyshev).

Connectivity (what the label means): lit pixels at most FLOOD_RADIUS = 2 apart on both axes are
neighbours (a 5x5 neighbourhood). That bridges a dash's one-point gap and never joins two paths, so a
flood fill over lit pixels from one marker reaches the other exactly when the label is "same".

Token ids: 0 "different", 1 "same" (the answers: num_classes = 2, chance_accuracy = 0.5), then the
grey levels g0..g<grey_levels-1> (ids 2..grey_levels+1): g0 background, g1..g<grey_levels-2> path
pixels (drawn uniformly per pixel, so they carry no path identity), g<grey_levels-1> the two markers;
then `?`; vocab_size = grey_levels + 3. Every batch is exactly half positive (an odd batch has one more
of a class drawn at random), and so is the test set (test_size is even).

Distances: only the final `?` is scored; its distance is seq_len - 1 minus the row-major position of the
marker pixel that comes first in row-major order (the first marker). Metadata: `distance` (the same),
`path_length` (L, the points of the long path P: a positive's path between the markers; a negative's
markers lie on half paths of ceil(L / 2) points; a path of n points spans at most n - 1 pixels).
`save_images(task, batch, folder, count)` writes the first `count` examples as PNG files.

Profiles: (measured accuracies: docs/calibration.md) quick, 10x10 (seq_len 101): paths of 5 points (markers 3-4
pixels apart), one distractor, max_turn 20, dash_period 4, 3 grey levels; model dim 64, depth 2, 4 heads; 3,000
steps of 64 at lr 3e-3 after 100 warm-up steps (a small version that dense learns on a CPU in minutes; paths of 4
points would leave more lit pixels near a positive's markers than near a negative's, a shortcut). standard, 32x32
(1,025 tokens, LRA's Pathfinder): paths of 10-20 points, 4 distractors, max_turn 30, 8 grey levels; dim 128, depth
4; 5,000 steps of 32 at lr 5e-4. long, 128x128 (16,385 tokens, LRA's Path-X): paths of 48-96 points, 10
distractors, max_turn 30, 8 grey levels, 200 eval examples; dim 128, depth 4; 5,000 steps of 8 at lr 5e-4.

Purpose: can attention follow a curve across the image? The evidence is spread along a path, not held
in one token, and a pixel's neighbours above and below lie image_size tokens apart in the sequence.
Cost: one scored position per sequence of image_size**2 + 1 tokens; drawing a batch is O(batch *
(num_distractors + 3) * image_size**2 log image_size) (one FFT correlation per path places it clear of
the others): about 1 s for the 1,000 examples of the standard test set on one core, about 6 s for the 200
of the long one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.registry import register_task

FLOOD_RADIUS = 2  # pixels within this Chebyshev distance are neighbours: a one-point dash gap is bridged
SEPARATION = FLOOD_RADIUS + 1  # the least Chebyshev distance between pixels of two different paths
NEGATIVE_TRIES = 32  # (grid symmetry, shape) pairs tried at once for the negative world's second path
DISTRACTOR_TRIES = 8  # shapes tried for each distractor before its picture is redrawn
# Redraw rounds for examples whose paths touch or leave the image, before giving up. Each round redraws only the
# examples still without a valid picture, so a batch that fits in fewer rounds draws the same data whatever this
# is. At 50, the quick image with two distractors (the benchmark's count x2) failed its 1000-example test set:
# a draw is valid there about 1 time in 7 (0.145 of 20,000), so 50 rounds leave 1 example in 2,500 without a
# picture, and 200 rounds 1 in 4 * 10^13.
MAX_ROUNDS = 200

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 4, "heads": 4}


def _pixels(points: torch.Tensor) -> torch.Tensor:
    """Round float (row, column) points to pixels; floor(x + 0.5), so points one unit apart land on pixels
    at most one apart on each axis (round-half-to-even could put them two apart)."""
    return torch.floor(points + 0.5).long()


@register_task("pathfinder")
class Pathfinder(Task):
    """Say whether the two marker pixels of a flattened image lie on one dashed path ("same") or two.

    Worked example: the test set of `create_task("pathfinder", seq_len=26, min_path_length=4,
    max_path_length=4, num_distractors=0, test_size=2)`, a 5x5 image (g2 marks a marker, g1 a path pixel;
    pixels as (row, column)). The long path P runs down column 4 from the marker at (0, 4) through (1, 4)
    and a dark dash point at (2, 4) to the marker at (3, 4); the half paths, of 2 points, run from (0, 1) to
    (0, 0) and from (3, 1) to (4, 0). Radius-2 neighbours join (0, 4), (1, 4) and (3, 4), so the label is
    "same" (a "different" example marks the half paths' starts (0, 1) and (3, 1) instead).

        image:    g1 g1 g0 g0 g2
                  g0 g0 g0 g0 g1
                  g0 g0 g0 g0 g0
                  g0 g1 g0 g0 g2
                  g1 g0 g0 g0 g0
        input:    g1 g1 g0 g0 g2 | g0 g0 g0 g0 g1 | g0 g0 g0 g0 g0 | g0 g1 g0 g0 g2 | g1 g0 g0 g0 g0 | ?
        label:    same (id 1) at position 25, the `?`; every other position IGNORE
        distance: 25 - 4 = 21 (back to the first marker pixel); metadata path_length 4
        task.label_text(batch, 0) == "25: ? -> same"
    """

    capacity_option = "num_distractors"  # more paths to tell the connecting one from
    suite_position = 6
    known_shortcut = ("local cues that trace no path (where the path pixels next to each marker head, and whether "
                      "pixels lie on the straight segment between the markers) tell same from different, even "
                      "linearly: 0.999 at quick, 0.775 at standard")

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(101, "tokens per example: a square image flattened row by row, then the query; "
                                   "a square + 1 (101 = 10x10 + 1)")
        min_path_length: int = option(5, "fewest points of a path, markers included (a path of n points spans "
                                          "at most n - 1 pixels)")
        max_path_length: int = option(5, "most points of a path, markers included")
        num_distractors: int = option(1, "paths besides the three that every image holds (P, H1 and H2)")
        max_turn: float = option(20.0, "largest change of heading, in degrees, from one step of a path to the next")
        dash_period: int = option(4, "every dash_period-th point of a path is left dark (the dashes)")
        grey_levels: int = option(3, "quantised grey levels: 0 background, 1..grey_levels-2 paths, the top one "
                                     "the markers")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set, half of them positive (an even number)")

        def __post_init__(self) -> None:
            side = math.isqrt(max(self.seq_len - 1, 0))
            require(self.seq_len >= 26 and side * side == self.seq_len - 1, "seq_len", self.seq_len,
                    "a square + 1 of at least 5 * 5 + 1 = 26 (the image's pixels, then the query), e.g. 1025 "
                    "for 32x32")
            require(self.min_path_length >= 4, "min_path_length", self.min_path_length,
                    "an integer >= 4, so that a path can hold two markers 3 pixels apart")
            require(self.max_path_length >= self.min_path_length, "max_path_length", self.max_path_length,
                    f"an integer >= min_path_length = {self.min_path_length}")
            require(self.num_distractors >= 0, "num_distractors", self.num_distractors, "an integer >= 0")
            require(0 <= self.max_turn <= 180, "max_turn", self.max_turn, "a number of degrees from 0 to 180")
            require(self.dash_period >= 2, "dash_period", self.dash_period, "an integer >= 2")
            require(self.grey_levels >= 3, "grey_levels", self.grey_levels, "an integer >= 3")
            require(self.test_size >= 2 and self.test_size % 2 == 0, "test_size", self.test_size,
                    "a positive even number")

    profiles = {
        # 10x10: paths of 5 points (markers 3-4 pixels apart) and one distractor, so that dense learns it on a
        # CPU in minutes; shorter paths would let lit-pixel counts near the markers tell the classes apart.
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 3000, "batch_size": 64, "lr": 3e-3, "warmup_steps": 100,
                                "eval_every": 250}),
        # 32x32, LRA's Pathfinder size: longer, curvier paths among 4 distractors, 8 grey levels.
        "standard": Profile(options={"seq_len": 1025, "min_path_length": 10, "max_path_length": 20,
                                     "num_distractors": 4, "max_turn": 30.0, "grey_levels": 8,
                                     "test_size": 1000},
                            model=_LARGER_MODEL,
                            train={"steps": 5000, "batch_size": 32, "lr": 5e-4, "eval_every": 500}),
        # 128x128, LRA's Path-X size (16,385 tokens): paths of 48-96 points among 10 distractors.
        "long": Profile(options={"seq_len": 16385, "min_path_length": 48, "max_path_length": 96,
                                 "num_distractors": 10, "max_turn": 30.0, "grey_levels": 8, "test_size": 200},
                        model=_LARGER_MODEL,
                        train={"steps": 5000, "batch_size": 8, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.image_size = math.isqrt(options.seq_len - 1)
        self.vocabulary = ["different", "same", *(f"g{level}" for level in range(options.grey_levels)), "?"]
        self.num_classes = 2
        self.chance_accuracy = 0.5

    # ----------------------------------------------------------------------------------------------
    # Geometry: every path is a curve of unit steps whose heading turns by at most max_turn per step,
    # drawn relative to its first point and rounded to pixels; a world is the set of paths one image shows.

    def _curves(self, shape: tuple[int, ...], generator: torch.Generator, device: torch.device) -> torch.Tensor:
        """Curves of max_path_length points from (0, 0) in a uniform random direction, unit steps whose
        heading turns by at most max_turn each: (*shape, points, 2) float (row, column)."""
        options = self.options
        steps = options.max_path_length - 1
        heading = 2 * math.pi * torch.rand((*shape, 1), generator=generator, device=device)
        turns = (2 * torch.rand((*shape, steps), generator=generator, device=device) - 1)
        turns[..., 0] = 0  # the first step goes along `heading`
        headings = heading + math.radians(options.max_turn) * turns.cumsum(-1)  # (*shape, steps)
        moves = torch.stack([torch.sin(headings), torch.cos(headings)], -1)  # (*shape, steps, 2)
        return torch.cat([torch.zeros_like(moves[..., :1, :]), moves.cumsum(-2)], -2)  # (*shape, points, 2)

    def _near(self, occupied: torch.Tensor) -> torch.Tensor:
        """(n, S, S) float: 1 within FLOOD_RADIUS (Chebyshev) of an occupied pixel of `occupied` (n, S, S)."""
        size, reach = self.image_size, FLOOD_RADIUS
        # A square max filter as a pass along columns then along rows, each the max of shifted copies
        # (faster than max_pool2d on the CPU).
        padded = F.pad(occupied, (0, 0, reach, reach))  # (n, S + 2r, S)
        rows = torch.stack([padded[:, shift : shift + size] for shift in range(2 * reach + 1)]).amax(0)
        padded = F.pad(rows, (reach, reach))  # (n, S, S + 2r)
        return torch.stack([padded[:, :, shift : shift + size] for shift in range(2 * reach + 1)]).amax(0)

    def _paint(self, points: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """(n, S, S) float: 1 at the present points (n, points, 2) that lie inside the image."""
        size = self.image_size
        inside = present & ((points >= 0) & (points < size)).all(-1)  # (n, points)
        flat = torch.where(inside, points[..., 0] * size + points[..., 1], size * size)  # (n, points)
        canvas = torch.zeros(points.shape[0], size * size + 1, device=points.device).scatter_(1, flat, 1.0)
        return canvas[:, :-1].view(-1, size, size)

    def _place(self, curve: torch.Tensor, present: torch.Tensor, blocked: torch.Tensor,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Translate each curve (n, points, 2) to a uniformly drawn place where all its present points lie
        inside the image and on no pixel of `blocked` (n, S, S); returns the points and whether a place exists.

        The number of blocked pixels a curve would cover, for every translation at once, is the cross-
        correlation of `blocked` with the curve's pixels, computed with FFTs; a translation that keeps the
        curve inside never wraps around, so the circular correlation is exact there.
        """
        size = self.image_size
        big = self.options.max_path_length  # farther than any point, so absent points never set the bounding box
        low = torch.where(present[..., None], curve, big).amin(1)  # (n, 2)
        high = torch.where(present[..., None], curve, -big).amax(1)  # (n, 2)
        extent = high - low  # (n, 2)
        shape = self._paint(curve - low[:, None, :], present)  # (n, S, S) the curve moved to the top-left corner
        covered = torch.fft.irfft2(torch.fft.rfft2(blocked) * torch.fft.rfft2(shape).conj(), s=(size, size))
        index = torch.arange(size, device=curve.device)
        allowed = ((covered < 0.5) & (index[None, :, None] <= size - 1 - extent[:, 0, None, None])
                   & (index[None, None, :] <= size - 1 - extent[:, 1, None, None]))  # (n, S, S) top-left corners
        scores = torch.where(allowed, torch.rand(allowed.shape, generator=generator, device=curve.device), -1.0)
        corner = scores.flatten(1).argmax(1)  # (n,)
        corner = torch.stack([corner // size, corner % size], 1)  # (n, 2)
        return curve - low[:, None, :] + corner[:, None, :], allowed.flatten(1).any(1)

    def _draw_world(self, count: int, generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
        """One picture per example and the two ways to mark it: `valid` (count,) says whether it fits.

        The picture holds a long path P of L points, two half paths H1 and H2 of ceil(L / 2) points and
        the distractors. H2 starts where P's end would be after one of the 8 symmetries of the pixel grid
        (turns by multiples of 90 degrees, mirror images) were P moved to start at H1's start (of
        NEGATIVE_TRIES symmetries and H2 shapes, a fitting pair at random). "same" marks P's two ends,
        "different" the starts of H1 and H2: the same picture either way, the markers as far apart on
        each axis, and as many lit pixels on the marked paths as off them.
        """
        options, size = self.options, self.image_size
        paths = 3 + options.num_distractors  # P, H1, H2, the distractors
        lengths = torch.randint(options.min_path_length, options.max_path_length + 1, (count, paths),
                                generator=generator, device=device)  # (count, paths)
        lengths[:, 1:3] = (lengths[:, :1] + 1) // 2
        present = torch.arange(options.max_path_length, device=device) < lengths[..., None]  # (count, paths, pts)
        rows = torch.arange(count, device=device)

        # P anywhere in the image, then H1 anywhere clear of it.
        empty = torch.zeros(count, size, size, device=device)
        long, valid = self._place(_pixels(self._curves((count,), generator, device)), present[:, 0], empty, generator)
        start, end = long[:, 0], long[rows, lengths[:, 0] - 1]  # (count, 2) each: the positive's markers
        valid &= (end - start).abs().amax(-1) >= SEPARATION  # the markers lie SEPARATION apart or more
        occupied = self._paint(long, present[:, 0])  # (count, S, S)
        first, placed = self._place(_pixels(self._curves((count,), generator, device)), present[:, 1],
                                    self._near(occupied), generator)  # (count, points, 2): H1
        valid &= placed
        occupied = (occupied + self._paint(first, present[:, 1])).clamp(max=1)
        near = self._near(occupied)  # (count, S, S)

        # H2 starts at H1's start plus P's span turned by a grid symmetry, and keeps clear of P and H1.
        swap = torch.randint(2, (count, NEGATIVE_TRIES, 1), generator=generator, device=device).bool()
        signs = 2 * torch.randint(2, (count, NEGATIVE_TRIES, 2), generator=generator, device=device) - 1
        offset = (end - start)[:, None, :]  # (count, 1, 2)
        anchors = first[:, None, 0, :] + signs * torch.where(swap, offset.flip(-1), offset)  # (count, tries, 2)
        shapes = _pixels(self._curves((count, NEGATIVE_TRIES), generator, device))  # (count, tries, points, 2)
        candidates = shapes + anchors[:, :, None, :]  # (count, tries, points, 2)
        inside = ((candidates >= 0) & (candidates < size)).all(-1)  # (count, tries, points)
        flat = (candidates[..., 0] * size + candidates[..., 1]).clamp(0, size * size - 1).flatten(1)
        clear = (near.flatten(1).gather(1, flat) < 0.5).view(inside.shape)  # (count, tries, points)
        fits = ((inside & clear) | ~present[:, 2, None, :]).all(-1)  # (count, tries)
        scores = torch.where(fits, torch.rand(fits.shape, generator=generator, device=device), -1.0)
        pick = scores.argmax(1)  # (count,) a fitting try at random
        valid &= fits.any(1)
        second = candidates[rows, pick]  # (count, points, 2): H2

        occupied = (occupied + self._paint(second, present[:, 2])).clamp(max=1)
        distractors, fitted = self._distractors(occupied, present, generator)  # (count, distractors, points, 2)
        valid &= fitted  # a picture without room for all its distractors is redrawn
        return {
            "points": torch.cat([long[:, None], first[:, None], second[:, None], distractors], 1),
            "present": present, "valid": valid, "lengths": lengths,
            "positive_markers": torch.stack([start, end], 1),
            "negative_markers": torch.stack([first[:, 0], second[:, 0]], 1),
        }

    def _distractors(self, occupied: torch.Tensor, present: torch.Tensor,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Distractor paths clear of the `occupied` pixels (count, S, S) and of one another, with the lengths
        in `present` (count, paths, points), slots 3 onwards: their points (count, num_distractors, points, 2)
        and whether each example found room for all of them after DISTRACTOR_TRIES shapes each (count,)."""
        count, device = occupied.shape[0], occupied.device
        distractors = []
        fitted = torch.ones(count, dtype=torch.bool, device=device)
        for slot in range(3, present.shape[1]):
            blocked = self._near(occupied)  # (count, S, S)
            points = torch.zeros(count, self.options.max_path_length, 2, dtype=torch.long, device=device)
            placed = torch.zeros(count, dtype=torch.bool, device=device)
            for _ in range(DISTRACTOR_TRIES):
                retry = (~placed).nonzero()[:, 0]  # the examples still without room for this distractor
                if len(retry) == 0:
                    break
                shape = _pixels(self._curves((len(retry),), generator, device))  # (retry, points, 2)
                points[retry], placed[retry] = self._place(shape, present[retry, slot], blocked[retry], generator)
            fitted &= placed
            occupied = (occupied + self._paint(points, present[:, slot] & placed[:, None])).clamp(max=1)
            distractors.append(points)
        if not distractors:
            return torch.zeros(count, 0, self.options.max_path_length, 2, dtype=torch.long, device=device), fitted
        return torch.stack(distractors, 1), fitted

    def save_images(self, batch: Batch, folder: str | Path, count: int) -> list[Path]:
        """The first `count` examples of `batch` as PNG files in `folder`: see `save_images` below."""
        return save_images(self, batch, folder, count)

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        options, size = self.options, self.image_size
        cells = size * size
        order = torch.randperm(batch_size, generator=generator, device=device)
        offset = torch.randint(2, (1,), generator=generator, device=device)
        label = (order + offset) % 2  # (batch,) exactly half positive (an odd batch: one more of a random class)
        # Rejection sampling, vectorised: each round draws a geometry for every example still without a
        # valid one and keeps the valid ones.
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
                break
        else:
            raise ValueError(f"Pathfinder could not place {3 + options.num_distractors} paths of up to "
                             f"{options.max_path_length} points {SEPARATION} pixels apart in a {size}x{size} image; "
                             f"accepted: fewer or shorter paths, or a larger image.")
        positive = label.bool()
        points = chosen["points"]  # (batch, paths, points, 2): the same kind of picture in both classes
        present = chosen["present"]
        # Dashes: each path leaves every dash_period-th point dark, from a random phase, but for its ends.
        phase = torch.randint(options.dash_period, present.shape[:2], generator=generator, device=device)
        index = torch.arange(options.max_path_length, device=device)  # (points,)
        ends = (index == 0) | (index == chosen["lengths"][..., None] - 1)  # (batch, paths, points)
        # A path's two end points stay lit, so a marker never relights a dark point and both classes light
        # as many pixels.
        lit_point = present & (ends | ((index + phase[..., None]) % options.dash_period != options.dash_period - 1))
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
        path_length = chosen["lengths"][:, 0].clone()  # (batch,) C1's, which C2 shares
        return Batch(inputs, targets, distance, {"distance": distance[:, -1].clone(), "path_length": path_length})


def save_images(task: Pathfinder, batch: Batch, folder: str | Path, count: int) -> list[Path]:
    """Write the first `count` examples of `batch` (at most all of them) as grey-scale PNG files in `folder`.

    Each pixel becomes a square of 512 // image_size pixels (nearest neighbour, at least 1), so every
    size comes out about 512 pixels wide; grey level g is drawn at brightness g / (grey_levels - 1), so
    the markers are white. Files are named `pathfinder_<size>x<size>_<index>_<label>.png`, label "same"
    or "different". Returns the paths written, in example order.
    """
    from matplotlib import image as mpimg  # imported here, as drawing batches needs no plotting

    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count got {count!r}; accepted: an integer >= 1.")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    size = task.image_size
    scale = max(1, 512 // size)
    written = []
    for index in range(min(count, batch.inputs.shape[0])):
        levels = (batch.inputs[index, :-1] - task.num_classes).view(size, size).double().cpu()  # (S, S)
        picture = (levels / (task.options.grey_levels - 1)).repeat_interleave(scale, 0).repeat_interleave(scale, 1)
        label = task.vocabulary[int(batch.targets[index, -1])]
        path = folder / f"{task.name}_{size}x{size}_{index:03d}_{label}.png"
        mpimg.imsave(path, picture.numpy(), cmap="gray", vmin=0.0, vmax=1.0)
        written.append(path)
    return written
