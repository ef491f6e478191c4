"""Pathfinder: labels a flood fill agrees with, balanced classes, markers as far apart in both classes,
dashed paths kept apart, images a reader can look at, and one-sentence errors (the shortcut probe is in
test_shortcut_probes.py)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import image as mpimg
from solvers import pathfinder as solver

import variants
from experiments import tasks
from experiments.tasks import pathfinder
from experiments.tasks.images import save_images
from experiments.tasks.pathfinder_geometry import FLOOD_RADIUS


@pytest.fixture(scope="module")
def eval_sets():
    """The 1,000-example test sets at the quick (24x24) and standard (32x32) sizes, built once, with the pictures
    drawn to build each, per call of the vectorised draw (what the time to build one is made of)."""
    sets, draw = {}, pathfinder.Pathfinder._draw_world
    for profile in ("quick", "standard"):
        drawn = []
        pathfinder.Pathfinder._draw_world = lambda self, count, *args, drawn=drawn: drawn.append(count) or draw(
            self, count, *args)
        try:
            task = tasks.create_task("pathfinder", profile=profile, test_size=1000)
            batch = task.test_set("cpu")
        finally:
            pathfinder.Pathfinder._draw_world = draw
        sets[profile] = (task, batch, drawn)
    return sets


def labels(batch):
    return batch.targets[:, -1]


def components(pixels, radius):
    """The flood-fill components of the lit pixels (level > 0) with neighbours at most `radius` apart."""
    lit = {(row, column) for row, line in enumerate(pixels) for column, level in enumerate(line) if level > 0}
    found = []
    while lit:
        component = solver.reachable(pixels, lit.pop(), radius)
        lit -= component
        found.append(component)
    return found


def marker_rows_and_columns(task, batch):
    """(examples, 2) each: the row and column of the two marker pixels, in row-major order."""
    image = batch.inputs[:, :-1] - task.num_classes  # (batch, pixels) grey levels
    marker = (image == task.options.grey_levels - 1).nonzero()[:, 1].view(-1, 2)  # (batch, 2) flat, row-major
    return marker // task.image_size, marker % task.image_size


def marker_distance(task, batch):
    """(examples,) float64: the Euclidean distance between the two markers."""
    rows, columns = marker_rows_and_columns(task, batch)
    return torch.hypot((rows[:, 0] - rows[:, 1]).double(), (columns[:, 0] - columns[:, 1]).double())


def test_vocabulary_numbers_the_answers_first_then_grey_levels_then_the_query():
    task = tasks.create_task("pathfinder", grey_levels=4)
    assert task.vocabulary == ["different", "same", "g0", "g1", "g2", "g3", "?"]
    assert (task.num_classes, task.chance_accuracy, task.image_size, task.seq_len) == (2, 0.5, 24, 577)
    assert [tasks.create_task("pathfinder", profile=profile).image_size for profile in tasks.PROFILES] == [24, 32, 128]


@pytest.mark.parametrize("batch_size", [64, 2, 1001])
def test_every_training_batch_is_half_positive_and_an_odd_one_off_by_one_half(batch_size):
    task = tasks.create_task("pathfinder")
    for seed in range(3):
        positives = int(labels(task.batch(batch_size, tasks.train_generator(seed), "cpu")).sum())
        assert abs(positives - batch_size / 2) <= 0.5, (seed, positives)


def test_the_eval_set_is_exactly_half_positive(eval_sets):
    for task, batch, _ in eval_sets.values():
        assert int(labels(batch).sum()) == task.test_size // 2


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_a_flood_fill_from_one_marker_agrees_with_the_label_on_every_eval_example(eval_sets, profile):
    task, batch, _ = eval_sets[profile]
    assert batch.inputs.shape == (1000, task.seq_len)
    for index, tokens in enumerate(batch.inputs.tolist()):
        ((position, (answer, distance)),) = solver.solve(task, tokens).items()
        assert (position, answer, distance) == (task.seq_len - 1, labels(batch)[index].item(),
                                                batch.distance[index, -1].item()), index


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_paths_keep_apart_so_each_image_has_one_component_per_path_distractors_included(eval_sets, profile):
    task, batch, _ = eval_sets[profile]
    paths = 3 + task.options.num_distractors  # the intact copy, the broken copy's two parts, the distractors
    counts = [len(components(solver.image(task, tokens), FLOOD_RADIUS)) for tokens in batch.inputs[:300].tolist()]
    # No two paths merge, a path never breaks at a dash but the broken copy at its break, and a picture without
    # room for a distractor is redrawn.
    assert counts == [paths] * len(counts)


@pytest.mark.parametrize("profile, least", [("quick", 0.5), ("standard", 0.9)])
def test_paths_are_dashed_so_that_touching_pixels_often_do_not_join_the_markers(eval_sets, profile, least):
    task, batch, _ = eval_sets[profile]
    positives = [tokens for tokens, label in zip(batch.inputs.tolist(), labels(batch).tolist(), strict=True) if label]
    broken = 0
    for tokens in positives[:200]:
        pixels = solver.image(task, tokens)
        first, second = solver.markers(task, pixels)
        assert second in solver.reachable(pixels, first, FLOOD_RADIUS)
        broken += second not in solver.reachable(pixels, first, 1)  # 8-connectivity stops at a dash's gap
    assert broken >= least * 200  # a path's ends are never dark


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_the_broken_copy_is_the_intact_one_moved_with_two_points_left_out_far_from_its_ends_and_their_line(profile):
    task = tasks.create_task("pathfinder", profile=profile)
    worlds = task._draw_world(300, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert worlds["valid"].sum() >= 20
    for index in worlds["valid"].nonzero().flatten().tolist():
        length = worlds["lengths"][index, 0].item()
        intact, broken = worlds["points"][index, :2, :length]  # (length, 2) each
        assert (broken - intact == broken[0] - intact[0]).all() and (broken[0] != intact[0]).any()
        assert worlds["positive_markers"][index].tolist() == intact[[0, -1]].tolist()
        assert worlds["negative_markers"][index].tolist() == broken[[0, -1]].tolist()
        left_out = worlds["removed"][index, 1].nonzero().flatten()
        assert not worlds["removed"][index, [0, *range(2, worlds["removed"].shape[1])]].any()
        assert left_out.tolist() == [left_out[0].item(), left_out[0].item() + 1]
        ends = broken[[0, -1]].double()
        line = ends[0] + torch.linspace(0, 1, 1001, dtype=torch.double)[:, None] * (ends[1] - ends[0])  # (1001, 2)
        for point in broken[left_out].double():
            assert (point - ends).abs().amax(-1).min() > 4  # outside a 9x9 window around either marker
            assert (point - line).abs().amax(-1).min() > 1.5  # outside every 3x3 box centred on the line
        before, after = broken[: left_out[0]], broken[left_out[-1] + 1 :]
        assert (before[:, None] - after[None]).abs().amax(-1).min() >= 3  # the parts never join


def test_path_length_bounds_the_path_of_each_marker(eval_sets):
    task, batch, _ = eval_sets["standard"]
    options = task.options
    path_length = batch.metadata["path_length"]
    assert options.min_path_length <= path_length.min() and path_length.max() <= options.max_path_length
    assert len(set(path_length.tolist())) == options.max_path_length - options.min_path_length + 1
    for tokens, length in zip(batch.inputs[:300].tolist(), path_length[:300].tolist(), strict=True):
        pixels = solver.image(task, tokens)
        for marker in solver.markers(task, pixels):
            path = solver.reachable(pixels, marker)
            span = max(max(abs(row - marker[0]), abs(column - marker[1])) for row, column in path)
            assert len(path) <= length and span <= length - 1  # n points one unit apart span n - 1 pixels


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_markers_lie_at_least_3_pixels_apart_and_as_far_in_both_classes(eval_sets, profile):
    task, batch, _ = eval_sets[profile]
    apart = marker_distance(task, batch)
    positive = labels(batch) == 1
    assert abs(apart[positive].mean() - apart[~positive].mean()) < 0.05 * apart.mean()
    rows, columns = marker_rows_and_columns(task, batch)
    assert (torch.maximum((rows[:, 0] - rows[:, 1]).abs(), (columns[:, 0] - columns[:, 1]).abs()) >= 3).all()


def test_the_eval_sets_of_1000_build_in_a_few_vectorised_rounds(eval_sets):
    # Counted, not timed: a set of 1,000 takes a few dozen draws of at most a few thousand pictures in all (quick: 24
    # draws, 4,617 pictures; standard: 13, 2,755), where one example at a time, or a redraw round per missing one,
    # took minutes.
    for task, _, drawn in eval_sets.values():
        assert len(drawn) <= 40 and sum(drawn) <= 8 * task.test_size, (len(drawn), sum(drawn))


def test_save_images_writes_nearest_neighbour_upscaled_greyscale_pngs(tmp_path, eval_sets):
    task, batch, _ = eval_sets["quick"]
    written = save_images(task, batch, tmp_path / "images", 3)
    assert [path.parent for path in written] == [tmp_path / "images"] * 3
    scale = 512 // task.image_size
    for index, path in enumerate(written):
        assert path.suffix == ".png" and task.vocabulary[labels(batch)[index]] in path.name
        picture = mpimg.imread(path)[..., 0]  # (height, width) red channel of the grey RGBA
        levels = (batch.inputs[index, :-1] - task.num_classes).view(task.image_size, task.image_size).numpy()
        expected = np.kron(levels / (task.options.grey_levels - 1), np.ones((scale, scale)))
        assert picture.shape == expected.shape and np.allclose(picture, expected, atol=1 / 255)


def test_the_sample_images_in_the_fixtures_are_what_the_readme_command_draws(tmp_path):
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "pathfinder"
    drawn = []
    for profile in ("quick", "standard"):
        task = tasks.create_task("pathfinder", profile=profile)
        drawn += save_images(task, task.batch(3, tasks.train_generator(0), "cpu"), tmp_path, 3)
    assert sorted(path.name for path in drawn) == sorted(path.name for path in fixtures.glob("*.png"))
    for path in drawn:
        assert np.array_equal(mpimg.imread(path), mpimg.imread(fixtures / path.name)), path.name


def test_save_images_stops_at_the_batch_size_and_refuses_a_count_below_1(tmp_path):
    task = tasks.create_task("pathfinder")
    batch = task.batch(2, tasks.train_generator(0), "cpu")
    assert len(save_images(task, batch, tmp_path, 5)) == 2
    with pytest.raises(ValueError, match="count got 0; accepted: an integer >= 1."):
        save_images(task, batch, tmp_path, 0)


def test_the_quick_image_draws_its_eval_set_with_five_distractors_besides_the_other_copy():
    # A draw is valid about 1 time in 40 there: with too few redraw rounds an example of 1000 gets no picture.
    task = tasks.create_task("pathfinder", profile="quick", num_distractors=5, test_size=1000)
    batch = task.test_set("cpu")
    assert batch.inputs.shape == (task.test_size, task.seq_len) and labels(batch).sum() == task.test_size // 2


def test_options_no_image_can_hold_are_one_sentence():
    with pytest.raises(ValueError) as error:  # refused when built, so a run refuses it before it trains
        tasks.create_task("pathfinder", seq_len=50, min_path_length=12, max_path_length=14, num_distractors=0)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and "7x7" in message and "14" in message
    assert "in 0 of 2000 7x7 images; accepted: sizes where at least 10 fit" in message


def test_a_size_where_few_pictures_fit_is_refused_at_once_and_one_that_fits_leaves_no_example_without_a_picture(
        monkeypatch):
    # Seven distractors at quick fit under 1 time in 2,000: refused after 2,000 pictures drawn, not after the redraw
    # rounds (up to MAX_ROUNDS of a whole batch each: minutes), counted rather than timed.
    drawn = []
    draw = pathfinder.Pathfinder._draw_world
    monkeypatch.setattr(pathfinder, "_FITS", {})  # counted afresh, whatever ran before in this process
    monkeypatch.setattr(pathfinder.Pathfinder, "_draw_world",
                        lambda self, count, *args: drawn.append(count) or draw(self, count, *args))
    with pytest.raises(ValueError, match=r"^Pathfinder placed 9 paths of up to 34 points 3 pixels apart, one copy "
                                         r"with a place to break, in \d of 2000 24x24 images; accepted: sizes where"):
        tasks.create_task("pathfinder", profile="quick", num_distractors=7)
    assert sum(drawn) == pathfinder.FIT_DRAWS  # the count that decides, and not one redraw round after it
    # At the sparsest size allowed (10 pictures in 2,000), the redraw rounds leave under 1e-12 of the examples bare.
    assert (1 - pathfinder.FIT_LEAST / pathfinder.FIT_DRAWS) ** pathfinder.MAX_ROUNDS < 1e-12


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"seq_len": 256}, ["'seq_len'", "256", "a square + 1", "1025"]),
        ({"seq_len": 17}, ["'seq_len'", "17", "at least"]),
        ({"min_path_length": 11}, ["'min_path_length'", "11", ">= 12", "farther than 4 pixels"]),
        ({"min_path_length": 13, "max_path_length": 12}, ["'max_path_length'", "12", ">= min_path_length = 13"]),
        ({"num_distractors": -1}, ["'num_distractors'", "-1", ">= 0"]),
        ({"min_distractor_length": 1}, ["'min_distractor_length'", "1", ">= 2"]),
        ({"min_distractor_length": 9, "max_distractor_length": 8}, ["'max_distractor_length'", "8",
                                                                     ">= min_distractor_length = 9"]),
        ({"max_turn": 200}, ["'max_turn'", "200.0", "0 to 180"]),
        ({"dash_period": 1}, ["'dash_period'", "1", ">= 2"]),
        ({"grey_levels": 2}, ["'grey_levels'", "2", ">= 3"]),
        ({"test_size": 999}, ["'test_size'", "999", "even"]),
    ],
)
def test_bad_options_get_one_sentence_naming_option_value_and_accepted(options, expected):
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("pathfinder", **options)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and "Task 'pathfinder'" in message
    for fragment in expected:
        assert fragment in message, (fragment, message)
