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
only where it has a place to break, so longer paths are commoner: at quick 14, 15 and 16 points make 17%, 35% and 48%
of the test set). One copy, either at random, is broken: BREAK_POINTS = 2 consecutive points are left out, so its
loose ends lie beyond the flood radius, at a place drawn among those farther than 4 pixels from the copy's ends and
at least 2 from the straight segment between them, where its two parts stay 3 apart. "same" marks the intact copy's
ends, "different" the broken copy's. So the markers lie as far apart, the paths leave them the same way, and a 9x9
window around each marker or a scan of the straight line between them sees the same in both classes: the shortcut
probes (tests/experiments/test_shortcut_probes.py, linear and gradient-boosted) read those cues at chance (0.52 and
0.50 at quick, 2 x 1,000 examples). At standard, whose paths of 24-36 points also hide the break, every cue reads
chance (0.53 and 0.52, 2 x 400). At quick, where paths end gives the label away (`known_shortcut`): a break's loose
ends lie within a path's length of a marker in a "different" picture, on the other copy in a "same" one, and with end
cues (how near each marker paths end or thin out) the probes read 0.77 and 0.76 (the end cues alone 0.76 and 0.78);
14-16 points in 16x16 leave no room to hide it. A generator that marked two half paths' starts read 0.999.

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

Profiles: (measured accuracies: docs/calibration.md) quick, 16x16 (seq_len 257): paths of 14-16 points, no distractor
(the other copy is one), max_turn 45, dash_period 4, 3 grey levels; model dim 64, depth 2, 4 heads; 3,000 steps of 64
at lr 3e-3 after 100 warm-up steps (shorter paths leave no place to break away from the ends and the markers' line).
standard, 32x32 (1,025 tokens, LRA's Pathfinder): paths of 24-36 points, 2 distractors, max_turn 30, 8 grey levels;
dim 128, depth 4; 5,000 steps of 32 at lr 5e-4. long, 128x128 (16,385 tokens, LRA's Path-X): paths of 48-96 points,
10 distractors, max_turn 30, 8 grey levels, 200 eval examples; dim 128, depth 4; 5,000 steps of 8 at lr 5e-4.

Purpose: can attention follow a curve across the image? The evidence is spread along a path, not held in one token,
and a pixel's neighbours above and below lie image_size tokens apart in the sequence. Cost: one scored position per
sequence of image_size**2 + 1 tokens; drawing a batch is O(batch * (num_distractors + 2) * image_size**2 log
image_size) (an FFT correlation places each path), times the redraws (a quick picture fits about 1 time in 6, a
standard one 2 in 5): about 0.7 s for the 2,432 examples of the quick test set on one core, 0.9 s for the 1,000 at
standard, 2.4 s for the 200 of long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.images import save_images
from experiments.tasks.registry import register_task

FLOOD_RADIUS = 2  # pixels within this Chebyshev distance are neighbours: a one-point dash gap is bridged
SEPARATION = FLOOD_RADIUS + 1  # the least Chebyshev distance between pixels of two different paths
BREAK_POINTS = 2  # points a broken copy leaves out: its loose ends lie 3 steps apart, beyond FLOOD_RADIUS
# A break lies farther than BREAK_CLEARANCE from its copy's ends (Chebyshev), so a 9x9 window around a marker sees
# the same in both classes, and SEGMENT_CLEARANCE or more from the straight segment between them, measured at
# SEGMENT_SAMPLES points along it, so a reader scanning that straight line finds no gap.
BREAK_CLEARANCE, SEGMENT_CLEARANCE, SEGMENT_SAMPLES = 4, 2, 65
MIN_PATH_LENGTH = 2 * (BREAK_CLEARANCE + 1) + BREAK_POINTS  # the i-th point lies at most i pixels from the start
DISTRACTOR_TRIES = 8  # shapes tried for each distractor before its picture is redrawn
# Redraw rounds before giving up, each for the examples still without a picture (so fewer rounds draw the same data):
# 1 in 6 fits at quick (1 in 10^15 left after 200), 1 in 21 with a distractor (1 in 16,000 left: a test set may fail).
MAX_ROUNDS = 200

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 4, "heads": 4}


def _pixels(points: torch.Tensor) -> torch.Tensor:
    """Round float (row, column) points to pixels; floor(x + 0.5), so points one unit apart land on pixels
    at most one apart on each axis (round-half-to-even could put them two apart)."""
    return torch.floor(points + 0.5).long()


def _nearest(points: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """(n, p): the Chebyshev distance from each of `points` (n, p, 2) to the nearest of `others` (n, q, 2)."""
    return (points[:, :, None] - others[:, None]).abs().amax(-1).amin(-1)


@register_task("pathfinder")
class Pathfinder(Task):
    """Say whether the two marker pixels of a flattened image lie on one dashed path ("same") or two.

    Worked example: the test set of `create_task("pathfinder", seq_len=145, min_path_length=14,
    max_path_length=14, test_size=2)`, a 12x12 image (g2 marks a marker, g1 a path pixel; pixels as (row,
    column)), shown row by row, the query `?` last. It holds two copies of one 14-point path, 6 rows apart. The
    lower one is intact: from the marker at (9, 11) through (8, 8), (6, 6) and (6, 2) to the marker at (9, 0),
    every dark point a dash's one-point gap. The upper one leaves out its points (0, 6) and (0, 5), 5 rows from
    its ends' line. Radius-2 neighbours join the lower copy end to end, so the label is "same" (a "different"
    example marks the upper copy's ends, (3, 11) and (3, 0)).

        input:    g0 g0 g1 g0 g1 g0 g0 g0 g0 g0 g0 g0
                  g0 g1 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0
                  g0 g1 g0 g0 g0 g0 g0 g1 g1 g0 g0 g0
                  g1 g0 g0 g0 g0 g0 g0 g0 g0 g1 g0 g1
                  g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g1 g1 g1 g0 g1 g0 g0 g0 g0 g0
                  g0 g0 g0 g0 g0 g0 g0 g1 g0 g0 g0 g0
                  g0 g1 g0 g0 g0 g0 g0 g1 g0 g0 g0 g0
                  g2 g0 g0 g0 g0 g0 g0 g0 g0 g1 g1 g2
                  g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0
                  g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 g0 ?
        label:    same (id 1) at position 144, the `?`; every other position IGNORE
        distance: 144 - 108 = 36 (back to the first marker pixel, (9, 0)); metadata path_length 14
        task.label_text(batch, 0) == "144: ? -> same"
    """

    capacity_option = "num_distractors"  # more paths to tell the connecting one from
    suite_position = 6
    known_shortcut = {"quick": "a break's loose ends lie nearer the markers on the marked copy (different) than on "
                               "the other (same), so the probe's end cues read 0.77: in a 16x16 image a break lies "
                               "too near its own copy's ends to hide it"}
    not_discriminative = {"quick": "dense stays at chance after its 3,000 steps (docs/calibration.csv; loss ln 2), "
                                   "and at lr 1e-3 its loss starts falling only near the end; it runs when named"}

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(257, "tokens per example: a square image flattened row by row, then the query; "
                                   "a square + 1 (257 = 16x16 + 1)")
        min_path_length: int = option(14, "fewest points of a path, markers included (a path of n points spans "
                                           "at most n - 1 pixels)")
        max_path_length: int = option(16, "most points of a path, markers included")
        num_distractors: int = option(0, "paths besides the two copies of the marked shape that every image holds")
        max_turn: float = option(45.0, "largest change of heading, in degrees, from one step of a path to the next")
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
                    f"an integer >= {MIN_PATH_LENGTH}, so that a copy can break farther than {BREAK_CLEARANCE} "
                    "pixels from both its ends")
            require(self.max_path_length >= self.min_path_length, "max_path_length", self.max_path_length,
                    f"an integer >= min_path_length = {self.min_path_length}")
            require(self.num_distractors >= 0, "num_distractors", self.num_distractors, "an integer >= 0")
            require(0 <= self.max_turn <= 180, "max_turn", self.max_turn, "a number of degrees from 0 to 180")
            require(self.dash_period >= 2, "dash_period", self.dash_period, "an integer >= 2")
            require(self.grey_levels >= 3, "grey_levels", self.grey_levels, "an integer >= 3")
            require(self.test_size >= 2 and self.test_size % 2 == 0, "test_size", self.test_size,
                    "a positive even number")

    profiles = {
        # 16x16 (the options' defaults): paths of 14-16 points, no distractor but the other copy; a CPU's minutes.
        "quick": Profile(options={}, model=_QUICK_MODEL, train={"steps": 3000, "batch_size": 64, "lr": 3e-3,
                                                               "warmup_steps": 100, "eval_every": 250}),
        "standard": Profile(options={"seq_len": 1025, "min_path_length": 24, "max_path_length": 36,
                                     "num_distractors": 2, "max_turn": 30.0, "grey_levels": 8,
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

    def _break(self, curve: torch.Tensor, lengths: torch.Tensor,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Where each curve (n, points, 2) of `lengths` (n,) points may break, and whether it may: (n,) the first
        of the BREAK_POINTS points left out, drawn uniformly among the places that qualify, and (n,) whether any does.

        A place qualifies when the points left out lie farther than BREAK_CLEARANCE from both of the curve's ends
        and SEGMENT_CLEARANCE or more from the straight segment between them, and no point before the break lies
        within SEPARATION of one after it (so the two parts never join).
        """
        count, points = curve.shape[:2]
        rows, index = torch.arange(count, device=curve.device), torch.arange(points, device=curve.device)
        ends = torch.stack([curve[:, 0], curve[rows, lengths - 1]], 1).double()  # (n, 2, 2)
        fraction = torch.linspace(0, 1, SEGMENT_SAMPLES, dtype=torch.double, device=curve.device)[None, :, None]
        segment = ends[:, :1] + fraction * (ends[:, 1:] - ends[:, :1])  # (n, samples, 2)
        clear = ((_nearest(curve.double(), ends) > BREAK_CLEARANCE)
                 & (_nearest(curve.double(), segment) >= SEGMENT_CLEARANCE))  # (n, points) may be left out
        present = index < lengths[:, None]  # (n, points)
        close = ((curve[:, :, None] - curve[:, None]).abs().amax(-1) < SEPARATION)  # (n, points, points)
        close &= present[:, :, None] & present[:, None, :]
        # joined[s - 1, s + BREAK_POINTS]: a point at or before s - 1 lies close to one at or after s + BREAK_POINTS.
        joined = close.long().cumsum(1).flip(2).cumsum(2).flip(2) > 0  # (n, points, points)
        starts = torch.arange(1, points - BREAK_POINTS, device=curve.device)  # (starts,) keeping both ends
        left_out = (index >= starts[:, None]) & (index < starts[:, None] + BREAK_POINTS)  # (starts, points)
        qualifies = ((clear[:, None] | ~left_out).all(-1) & (starts + BREAK_POINTS < lengths[:, None])
                     & ~joined[:, starts - 1, starts + BREAK_POINTS])  # (n, starts)
        scores = torch.where(qualifies, torch.rand(qualifies.shape, generator=generator, device=curve.device), -1.0)
        return starts[scores.argmax(1)], qualifies.any(1)

    def _draw_world(self, count: int, generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
        """One picture per example and the two ways to mark it: `valid` (count,) says whether it fits.

        The picture holds two copies of one path of L points, placed apart, one of them (either, at random)
        broken (`_break`), and the distractors. "same" marks the intact copy's ends, "different" the broken
        copy's: the same picture either way, and the marked ends have the same shape around them.
        """
        options, size = self.options, self.image_size
        paths = 2 + options.num_distractors  # the two copies, the distractors
        lengths = torch.randint(options.min_path_length, options.max_path_length + 1, (count, paths),
                                generator=generator, device=device)  # (count, paths)
        lengths[:, 1] = lengths[:, 0]
        present = torch.arange(options.max_path_length, device=device) < lengths[..., None]  # (count, paths, pts)
        rows = torch.arange(count, device=device)
        shape = _pixels(self._curves((count,), generator, device))  # (count, points, 2)
        start, valid = self._break(shape, lengths[:, 0], generator)
        valid &= (shape[rows, lengths[:, 0] - 1] - shape[:, 0]).abs().amax(-1) >= SEPARATION  # the markers' distance

        empty = torch.zeros(count, size, size, device=device)
        first, placed = self._place(shape, present[:, 0], empty, generator)
        valid &= placed
        occupied = self._paint(first, present[:, 0])  # (count, S, S)
        second, placed = self._place(shape, present[:, 1], self._near(occupied), generator)
        valid &= placed
        occupied = (occupied + self._paint(second, present[:, 1])).clamp(max=1)
        distractors, fitted = self._distractors(occupied, present, generator)  # (count, distractors, points, 2)
        valid &= fitted  # a picture without room for all its distractors is redrawn

        swap = torch.randint(2, (count, 1, 1), generator=generator, device=device).bool()
        intact, broken = torch.where(swap, second, first), torch.where(swap, first, second)  # (count, points, 2)
        index = torch.arange(options.max_path_length, device=device)
        removed = torch.zeros_like(present)  # (count, paths, points)
        removed[:, 1] = (index >= start[:, None]) & (index < start[:, None] + BREAK_POINTS)
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
        count, device = occupied.shape[0], occupied.device
        distractors = []
        fitted = torch.ones(count, dtype=torch.bool, device=device)
        for slot in range(2, present.shape[1]):
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
        """The first `count` examples of `batch` as PNG files in `folder` (`experiments.tasks.images`)."""
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
            raise ValueError(f"Pathfinder could not place {2 + options.num_distractors} paths of up to "
                             f"{options.max_path_length} points {SEPARATION} pixels apart in a {size}x{size} image, "
                             f"one copy with a place to break; accepted: fewer or shorter paths, or a larger image.")
        positive = label.bool()
        points = chosen["points"]  # (batch, paths, points, 2): the same kind of picture in both classes
        present = chosen["present"]
        # Dashes: each path leaves every dash_period-th point dark, from a random phase, but for its ends.
        phase = torch.randint(options.dash_period, present.shape[:2], generator=generator, device=device)
        index = torch.arange(options.max_path_length, device=device)  # (points,)
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

