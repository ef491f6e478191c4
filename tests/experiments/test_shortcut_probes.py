"""Shortcut probes: statistics a model could read without attending to a task's evidence do not predict its
labels (better than the stated bound), and the same probe does find a label planted in a fraction of the rows.

Every test runs both probes of `shortcut_probe.PROBES`, a logistic regression and gradient-boosted trees,
fitted on training batches (seed 1) and scored on others (seed 2). Sequence tasks: the bag of tokens seen up
to the scored position, the position, and the last tokens (`shortcut_probe.sequence_rows`); ListOps adds its
root operator (`listops_rows`). Pathfinder: pixel statistics, local cues and end cues that need no tracing
(`pathfinder_rows`).
A probe may beat its baseline (chance, or for a copying task the most frequent answer so far) by at most
MARGINS[probe]: 0.10 for every probe, and the linear probe keeps the 0.05 it has always been held to.
"""

import numpy as np
import pytest
import torch
from shortcut_probe import PROBES, leak_label, sequence_rows

from experiments import tasks
from experiments.tasks import pathfinder_geometry

# What a probe may gain over its baseline: sampling noise of ~1,000 held-out rows (a 95% half-width of 0.03 at
# p = 0.5), plus a little; the boosted probe, which reads thresholds and interactions, is allowed 0.10.
MARGINS = {"linear": 0.05, "boosted": 0.10}
LEAK_FRACTION = 0.4  # the control plants the label in this fraction of rows: a shortcut far above any bound here
FAR = 4  # a lit pixel more than FAR pixels (Chebyshev) from both markers counts as far from them


def most_frequent_answer_accuracy(task, rows):
    """Accuracy of guessing, at each row, the answer token seen most often up to it (ties shared evenly).

    In a copying task (selective_copy, induction, flipflop) the answer is one of the tokens in context, so
    this guess beats 1 / num_classes by construction, as in the published tasks: for the quick profiles
    0.40 for selective_copy (4 data tokens of 8), 0.15 for induction, 0.68 for flipflop (reads repeat the
    last written bit, so the commoner bit so far is usually the current one). A probe must not beat it.
    """
    features, labels = rows
    counts = features[:, : task.num_classes]  # sequence_rows puts the answer tokens' counts first
    best = counts == counts.max(1, keepdims=True)
    return float((best[np.arange(len(labels)), labels] / best.sum(1)).mean())


def sequence_bound(task, rows, probe):
    """The accuracy a sequence probe may reach: its baseline plus MARGINS[probe]. The baseline is chance where
    the answer is not copied from the context (passkey's bag holds no answer token; ListOps computes its
    answer), else the most frequent answer so far where that beats chance."""
    if SEQUENCE_TASKS[task.name][3] == "chance":
        return task.chance_accuracy + MARGINS[probe]
    return max(task.chance_accuracy, most_frequent_answer_accuracy(task, rows)) + MARGINS[probe]


# name: (last tokens seen, examples per profile, bag of every token, of none, of the non-answer tokens only or of all
# but the keys, baseline).
# Passkey's bag leaves out the key vocabulary: the key is the only key token, so counting it is reading the
# evidence itself, which any pooling model does by design. mqar's standard profile (256 classes over a
# 1,549-wide row) is left out: fitting its probe alone would take minutes.
SEQUENCE_TASKS = {
    "passkey": (2, {"quick": 1500, "standard": 500}, "non-answer", "chance"),
    "mqar": (2, {"quick": 150}, "all", "most frequent"),
    "selective_copy": (2, {"quick": 400, "standard": 100}, "all", "most frequent"),
    "induction": (2, {"quick": 1500, "standard": 500}, "all", "most frequent"),
    "flipflop": (4, {"quick": 300, "standard": 60}, "all", "most frequent"),
    "listops": (2, {"quick": 1500, "standard": 1500}, "all", "chance"),  # standard: 400 leave a 9 too rare to split
    "niah_multikey": (2, {"quick": 500}, "all", "most frequent"),
    "niah_multivalue": (2, {"quick": 150}, "all", "most frequent"),
    "niah_multiquery": (2, {"quick": 150}, "all", "most frequent"),
    "variable_tracking": (2, {"quick": 120}, "all", "most frequent"),
    "in_context_recall": (2, {"quick": 150}, "all", "most frequent"),
    "noisy_in_context_recall": (2, {"quick": 200}, "all", "most frequent"),
    "fuzzy_in_context_recall": (2, {"quick": 400}, "all", "most frequent"),
    # Memorization has no dependency to shortcut: its evidence is the key just before each `>` and its answer the
    # table's value, which a probe that sees the key learns as a model does (the bag names the last key among few:
    # linear 0.25 at quick). Like passkey's, its bag leaves out the keys; its row reads the `>` and the position.
    "memorization": (1, {"quick": 100}, "non-key", "chance"),
    "compression": (2, {"quick": 50}, "all", "most frequent"),  # read at `#`, where the model reads
    # Max retrieval's item tokens each name a priority and a class together, so their bag is the evidence itself (as
    # passkey's key is): its rows count the classes and the priority levels apart instead (`max_retrieval_rows`).
    "max_retrieval": (2, {"quick": 600}, "none", "most frequent"),
}
SEQUENCE_CASES = [(name, profile) for name, (_, sizes, *_) in SEQUENCE_TASKS.items() for profile in sizes]
PROBE_CASES = [(*case, probe) for case in SEQUENCE_CASES for probe in PROBES]


def listops_rows(task, batch, context):
    """`sequence_rows` plus the one-hot root operator, the expression's first token: the operator and the bag
    of digits together decide MIN, MAX, MED and SM of a flat expression, and a tree of shallow ones leans the
    same way (a redesigned generator must keep them from giving the answer away)."""
    features, labels = sequence_rows(task, batch, context)
    first = batch.inputs.shape[1] - 1 - batch.distance[:, -1]  # (batch,) the expression's first position
    root = batch.inputs[torch.arange(len(first)), first]  # (batch,) an operator id
    operators = range(task.num_classes, task.num_classes + 4)  # [MIN [MAX [MED [SM
    root_one_hot = torch.stack([root == operator for operator in operators], 1).double()  # (batch, 4)
    return np.concatenate([features, root_one_hot.numpy()], 1), labels


def max_retrieval_rows(task, batch, context):
    """`sequence_rows` without the bag of items, plus what needs no class bound to its priority: how many items hold
    each class (first, where the most frequent answer's baseline reads the answers' counts) and each priority level,
    and how far back the maximum item sits (its position)."""
    features, labels = sequence_rows(task, batch, context, bag_tokens=[])
    kept = batch.distance[:, -1] >= context  # the rows sequence_rows keeps, one per example
    items = batch.inputs[kept, :-1] - task.num_classes  # (rows, items): priority * num_classes + class
    counts = [torch.nn.functional.one_hot(values, size).sum(1).double().numpy()
              for values, size in ((items % task.num_classes, task.num_classes),
                                   (items // task.num_classes, task.options.num_priorities))]
    position = batch.distance[kept, -1:].double().numpy()
    return np.concatenate([*counts, features, position], 1), labels


SPECIAL_ROWS = {"listops": listops_rows, "max_retrieval": max_retrieval_rows}  # tasks whose rows add features


def draw_rows(task, rows_of, size):
    return [rows_of(task, task.batch(size, tasks.train_generator(seed), "cpu")) for seed in (1, 2)]


def probe_set(name, profile):
    """(task, training rows, held-out rows) of task `name` at `profile`, drawn as its entry in SEQUENCE_TASKS says."""
    context, sizes, bag, _ = SEQUENCE_TASKS[name]
    task = tasks.create_task(name, profile=profile)
    tokens = {"all": None, "none": [], "non-answer": range(task.num_classes, task.vocab_size),
              "non-key": [token for token in range(task.vocab_size)
                          if not task.num_classes <= token < task.num_classes + getattr(task, "num_keys", 0)]}[bag]

    def rows_of(task, batch):
        if task.name in SPECIAL_ROWS:
            return SPECIAL_ROWS[task.name](task, batch, context)
        return sequence_rows(task, batch, context, tokens)

    return (task, *draw_rows(task, rows_of, sizes[profile]))


@pytest.fixture(scope="module")
def sequence_probe_sets():
    """(task, training rows, held-out rows) per (name, profile), drawn once."""
    return {(name, profile): probe_set(name, profile) for name, profile in SEQUENCE_CASES}


@pytest.mark.parametrize("name, profile, probe", PROBE_CASES)
def test_bag_position_and_last_tokens_predict_no_better_than_the_bound(sequence_probe_sets, name, profile, probe):
    task, training, held_out = sequence_probe_sets[name, profile]
    assert len(held_out[1]) >= 400  # enough held-out rows for the margin to exceed the noise
    accuracy = PROBES[probe](training, held_out)
    assert accuracy <= sequence_bound(task, held_out, probe), (accuracy, sequence_bound(task, held_out, probe))


@pytest.mark.parametrize("name, profile, probe", PROBE_CASES)
def test_the_sequence_probe_finds_a_label_planted_in_some_rows(sequence_probe_sets, name, profile, probe):
    task, training, held_out = sequence_probe_sets[name, profile]
    leaked = PROBES[probe](leak_label(training, task.num_classes, LEAK_FRACTION),
                           leak_label(held_out, task.num_classes, LEAK_FRACTION, seed=1))
    assert leaked > sequence_bound(task, held_out, probe), leaked


def pathfinder_rows(task, batch):
    """(features, labels): statistics of the lit pixels around the two markers, none of which traces a path.

    Pixel statistics: lit pixels; lit pixels more than FAR from both markers; the farthest lit pixel's distance
    to its nearest marker; lit pixels within 1 and 2 of each marker (its neighbours); the markers' rows and columns,
    their distance apart on each axis, Chebyshev and Euclidean; the count of each grey level (the bag of
    tokens); lit pixels in each row and in each column. Local cues (`local_cues`): which way the path pixels
    next to each marker head, on which side of the line between the markers they lie, and whether pixels lie on
    the straight segment between the markers.
    """
    size = task.image_size
    image = (batch.inputs[:, :-1] - task.num_classes).view(-1, size, size)  # (batch, S, S) grey levels
    lit = image > 0
    path = lit & (image < task.options.grey_levels - 1)  # the lit pixels but the markers
    marker = (image.flatten(1) == task.options.grey_levels - 1).nonzero()[:, 1].view(-1, 2)  # (batch, 2) flat
    row, column = marker // size, marker % size  # (batch, 2) each
    grid = torch.arange(size)
    apart = [torch.maximum((grid[None, :, None] - row[:, m, None, None]).abs(),
                           (grid[None, None, :] - column[:, m, None, None]).abs()) for m in (0, 1)]  # (batch, S, S)
    nearest = torch.minimum(*apart)
    rows_apart, columns_apart = (row[:, 0] - row[:, 1]).abs(), (column[:, 0] - column[:, 1]).abs()
    features = [lit.sum((1, 2)), (lit & (nearest > FAR)).sum((1, 2)), torch.where(lit, nearest, 0).amax((1, 2)),
                *[(lit & (distance <= radius)).sum((1, 2)) for distance in apart for radius in (1, 2)],
                row[:, 0], row[:, 1], column[:, 0], column[:, 1], rows_apart, columns_apart,
                torch.maximum(rows_apart, columns_apart), torch.hypot(rows_apart.double(), columns_apart.double()),
                *torch.nn.functional.one_hot(image.flatten(1), task.options.grey_levels).sum(1).T,
                *lit.sum(2).T, *lit.sum(1).T,
                *local_cues(path, torch.stack([row, column], -1)), *end_cues(path, apart)]
    return torch.stack([feature.double() for feature in features], 1).numpy(), batch.targets[:, -1].numpy()


def local_cues(path: torch.Tensor, markers: torch.Tensor) -> list[torch.Tensor]:
    """What a reader sees near the markers without following a path, from the path pixels (batch, S, S) and the
    markers' (row, column) (batch, 2, 2): per marker and radius 1 to 3, the path pixels within that radius, where
    they lie on average along the line to the other marker (positive: towards it) and across it (to its left or
    right, seen from the first marker), and for each radius whether both markers' pixels lie on the same side
    (a path that bulges to one side between the markers, as short smooth paths do, leaves both on that side);
    and the path pixels within 1 of each of SEGMENT_POINTS points evenly spaced on the segment between the
    markers."""
    size = path.shape[-1]
    grid = torch.stack(torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij"), -1).double()  # (S, S, 2)
    markers = markers.double()
    unit = markers[:, 1] - markers[:, 0]
    unit = unit / unit.norm(dim=-1, keepdim=True)  # (batch, 2) from the first marker to the second
    across_unit = torch.stack([-unit[:, 1], unit[:, 0]], -1)
    cues, sides = [], []
    for m in (0, 1):
        offset = grid[None] - markers[:, m, None, None]  # (batch, S, S, 2)
        along = (offset * ((1 - 2 * m) * unit)[:, None, None]).sum(-1)
        across = (offset * across_unit[:, None, None]).sum(-1)
        for radius in (1, 2, 3):
            near = path & (offset.abs().amax(-1) <= radius)
            count = near.sum((1, 2))
            side = (near * across).sum((1, 2)) / count.clamp(min=1)
            cues += [count, (near * along).sum((1, 2)) / count.clamp(min=1), side]
            sides.append(torch.sign(side))
    cues += [sides[radius] * sides[3 + radius] for radius in range(3)]
    for fraction in torch.linspace(0, 1, SEGMENT_POINTS + 2)[1:-1]:
        point = markers[:, 0] + fraction * (markers[:, 1] - markers[:, 0])  # (batch, 2)
        cues.append((path & ((grid[None] - point[:, None, None]).abs().amax(-1) <= 1)).sum((1, 2)))
    return cues


def end_cues(path: torch.Tensor, apart: list[torch.Tensor]) -> list[torch.Tensor]:
    """Where paths end or thin out, seen from the markers without following a path, from the path pixels (batch, S,
    S) and each marker's Chebyshev distance to every pixel (two of (batch, S, S)): a path pixel with at most k other
    path pixels within the flood radius (a 5x5 box; k = 1, 2, 3) is an end, or the edge of a break, or a sparse
    stretch; per marker and k, the distance to the nearest such pixel and how many lie within END_RADII of it, and
    per k how many there are in the image."""
    reach = pathfinder_geometry.FLOOD_RADIUS
    box = torch.ones(1, 1, 2 * reach + 1, 2 * reach + 1, dtype=torch.double)
    neighbours = torch.nn.functional.conv2d(path[:, None].double(), box, padding=reach)[:, 0] - path.double()
    cues = []
    for k in (1, 2, 3):
        thin = path & (neighbours <= k)
        cues.append(thin.sum((1, 2)))
        for distance in apart:
            cues.append(torch.where(thin, distance, path.shape[-1]).amin((1, 2)))
            cues += [(thin & (distance <= radius)).sum((1, 2)) for radius in END_RADII]
    return cues


SEGMENT_POINTS = 9
END_RADII = (4, 6, 8, 10)
PATHFINDER_SIZES = {"quick": 1000, "standard": 1000}
PATHFINDER_BOUND = 0.60  # chance 0.5 + 0.10; the old generator's far-pixel rule alone scored 0.97 at quick size
PATHFINDER_CASES = [(profile, probe) for profile in PATHFINDER_SIZES for probe in PROBES]


def test_local_cues_tell_a_path_that_bulges_to_one_side_from_one_that_crosses_between_the_markers():
    # Markers at (4, 1) and (4, 7); a C bulges above the line joining them at both ends, an S leaves the first
    # marker above it and reaches the second from below. The same-side cues (the three before the segment's)
    # read +1 and -1.
    markers = torch.tensor([[[4, 1], [4, 7]]] * 2)
    path = torch.zeros(2, 9, 9, dtype=torch.bool)
    for row, column in [(3, 1), (2, 2), (2, 3), (2, 4), (2, 5), (2, 6), (3, 7)]:
        path[0, row, column] = True
    for row, column in [(3, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (5, 7)]:
        path[1, row, column] = True
    same_side = torch.stack(local_cues(path, markers)[-SEGMENT_POINTS - 3 : -SEGMENT_POINTS], 1)
    assert same_side.tolist() == [[1.0] * 3, [-1.0] * 3]


@pytest.fixture(scope="module")
def pathfinder_probe_sets():
    return {profile: draw_rows(tasks.create_task("pathfinder", profile=profile), pathfinder_rows, size)
            for profile, size in PATHFINDER_SIZES.items()}


@pytest.mark.parametrize("profile, probe", PATHFINDER_CASES)
def test_pathfinder_features_that_trace_no_path_predict_same_or_different_at_most_0_60(pathfinder_probe_sets,
                                                                                      profile, probe):
    training, held_out = pathfinder_probe_sets[profile]
    accuracy = PROBES[probe](training, held_out)
    assert accuracy <= PATHFINDER_BOUND, accuracy


# The 16x16 image quick had before: copies of 14-16 points, no distractor. There a break lies too near its copy's
# ends to hide, and the end cues (the last features of a row) read it; the other features stay at chance.
SHORT_PATHS = {"seq_len": 257, "min_path_length": 14, "max_path_length": 16, "num_distractors": 0, "max_turn": 45.0}


def test_the_end_cues_alone_read_the_break_where_paths_are_short_and_the_other_features_do_not():
    training, held_out = draw_rows(tasks.create_task("pathfinder", **SHORT_PATHS), pathfinder_rows, 1000)
    ends = len(end_cues(torch.zeros(1, 4, 4, dtype=torch.bool), [torch.zeros(1, 4, 4)] * 2))
    rest = PROBES["boosted"]((training[0][:, :-ends], training[1]), (held_out[0][:, :-ends], held_out[1]))
    alone = PROBES["boosted"]((training[0][:, -ends:], training[1]), (held_out[0][:, -ends:], held_out[1]))
    assert rest <= PATHFINDER_BOUND < alone, (rest, alone)


@pytest.mark.parametrize("profile, probe", PATHFINDER_CASES)
def test_the_pathfinder_probe_finds_a_label_planted_in_some_rows(pathfinder_probe_sets, profile, probe):
    training, held_out = pathfinder_probe_sets[profile]
    leaked = PROBES[probe](leak_label(training, 2, LEAK_FRACTION), leak_label(held_out, 2, LEAK_FRACTION, seed=1))
    assert leaked > PATHFINDER_BOUND, leaked
