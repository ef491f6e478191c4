"""Pathfinder's geometry: curves of unit steps on a pixel grid, drawn, painted, placed apart and broken.

Every path is a curve of unit steps whose heading turns by at most max_turn per step, drawn relative to its first
point and rounded to pixels (`pixels`); `experiments.tasks.pathfinder` draws a picture's paths with these and
places them FLOOD_RADIUS + 1 apart. Sizes come from the tensors: S the image's side, points a curve's points.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

FLOOD_RADIUS = 2  # pixels within this Chebyshev distance are neighbours: a one-point dash gap is bridged
SEPARATION = FLOOD_RADIUS + 1  # the least Chebyshev distance between pixels of two different paths
BREAK_POINTS = 2  # points a broken copy leaves out: its loose ends lie 3 steps apart, beyond FLOOD_RADIUS
# A break lies farther than BREAK_CLEARANCE from its copy's ends (Chebyshev), so a 9x9 window around a marker sees
# the same in both classes, and SEGMENT_CLEARANCE or more from the straight segment between them, measured at
# SEGMENT_SAMPLES points along it, so a reader scanning that straight line finds no gap.
BREAK_CLEARANCE, SEGMENT_CLEARANCE, SEGMENT_SAMPLES = 4, 2, 65


def pixels(points: torch.Tensor) -> torch.Tensor:
    """Round float (row, column) points to pixels; floor(x + 0.5), so points one unit apart land on pixels
    at most one apart on each axis (round-half-to-even could put them two apart)."""
    return torch.floor(points + 0.5).long()


def nearest(points: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """(n, p): the Chebyshev distance from each of `points` (n, p, 2) to the nearest of `others` (n, q, 2)."""
    return (points[:, :, None] - others[:, None]).abs().amax(-1).amin(-1)


def curves(count: int, points: int, max_turn: float, generator: torch.Generator,
           device: torch.device) -> torch.Tensor:
    """Curves of `points` points from (0, 0) in a uniform random direction, unit steps whose heading turns by
    at most max_turn degrees each, rounded to pixels (`pixels`): (count, points, 2) long (row, column)."""
    heading = 2 * math.pi * torch.rand((count, 1), generator=generator, device=device)
    turns = (2 * torch.rand((count, points - 1), generator=generator, device=device) - 1)
    turns[:, 0] = 0  # the first step goes along `heading`
    headings = heading + math.radians(max_turn) * turns.cumsum(-1)  # (count, steps)
    moves = torch.stack([torch.sin(headings), torch.cos(headings)], -1)  # (count, steps, 2)
    return pixels(torch.cat([torch.zeros_like(moves[:, :1, :]), moves.cumsum(-2)], -2))  # (count, points, 2)


def near(occupied: torch.Tensor) -> torch.Tensor:
    """(n, S, S) float: 1 within FLOOD_RADIUS (Chebyshev) of an occupied pixel of `occupied` (n, S, S)."""
    size, reach = occupied.shape[-1], FLOOD_RADIUS
    # A square max filter as a pass along columns then along rows, each the max of shifted copies
    # (faster than max_pool2d on the CPU).
    padded = F.pad(occupied, (0, 0, reach, reach))  # (n, S + 2r, S)
    rows = torch.stack([padded[:, shift : shift + size] for shift in range(2 * reach + 1)]).amax(0)
    padded = F.pad(rows, (reach, reach))  # (n, S, S + 2r)
    return torch.stack([padded[:, :, shift : shift + size] for shift in range(2 * reach + 1)]).amax(0)


def paint(points: torch.Tensor, present: torch.Tensor, size: int) -> torch.Tensor:
    """(n, S, S) float, S = size: 1 at the present points (n, points, 2) that lie inside the image."""
    inside = present & ((points >= 0) & (points < size)).all(-1)  # (n, points)
    flat = torch.where(inside, points[..., 0] * size + points[..., 1], size * size)  # (n, points)
    canvas = torch.zeros(points.shape[0], size * size + 1, device=points.device).scatter_(1, flat, 1.0)
    return canvas[:, :-1].view(-1, size, size)


def place(curve: torch.Tensor, present: torch.Tensor, blocked: torch.Tensor,
          generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Translate each curve (n, points, 2) to a uniformly drawn place where all its present points lie
    inside the image and on no pixel of `blocked` (n, S, S); returns the points and whether a place exists.

    The number of blocked pixels a curve would cover, for every translation at once, is the cross-
    correlation of `blocked` with the curve's pixels, computed with FFTs; a translation that keeps the
    curve inside never wraps around, so the circular correlation is exact there.
    """
    size = blocked.shape[-1]
    big = curve.shape[1]  # farther than any point, so absent points never set the bounding box
    low = torch.where(present[..., None], curve, big).amin(1)  # (n, 2)
    high = torch.where(present[..., None], curve, -big).amax(1)  # (n, 2)
    extent = high - low  # (n, 2)
    shape = paint(curve - low[:, None, :], present, size)  # (n, S, S) the curve moved to the top-left corner
    covered = torch.fft.irfft2(torch.fft.rfft2(blocked) * torch.fft.rfft2(shape).conj(), s=(size, size))
    index = torch.arange(size, device=curve.device)
    allowed = ((covered < 0.5) & (index[None, :, None] <= size - 1 - extent[:, 0, None, None])
               & (index[None, None, :] <= size - 1 - extent[:, 1, None, None]))  # (n, S, S) top-left corners
    scores = torch.where(allowed, torch.rand(allowed.shape, generator=generator, device=curve.device), -1.0)
    corner = scores.flatten(1).argmax(1)  # (n,)
    corner = torch.stack([corner // size, corner % size], 1)  # (n, 2)
    return curve - low[:, None, :] + corner[:, None, :], allowed.flatten(1).any(1)


def break_place(curve: torch.Tensor, lengths: torch.Tensor,
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
    clear = ((nearest(curve.double(), ends) > BREAK_CLEARANCE)
             & (nearest(curve.double(), segment) >= SEGMENT_CLEARANCE))  # (n, points) may be left out
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
