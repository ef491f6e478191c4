"""Pathfinder: decode the pixels back to an image and flood-fill from the first marker."""

SMALL = {"seq_len": 197, "min_path_length": 12, "max_path_length": 15, "num_distractors": 0, "grey_levels": 5,
         "test_size": 64}
WORKED = {"seq_len": 145, "min_path_length": 14, "max_path_length": 14, "num_distractors": 0, "max_turn": 45.0,
          "test_size": 2}
RADIUS = 2  # the documented neighbourhood: lit pixels at most 2 apart on both axes are connected


def image(task, tokens):
    """The grey level of each pixel, as rows, from the token names `g<level>`; checks the query is last."""
    names = task.decode(tokens)
    assert names[-1] == "?" and all(name.startswith("g") for name in names[:-1]), names
    levels = [int(name[1:]) for name in names[:-1]]
    side = round(len(levels) ** 0.5)
    assert side * side == len(levels)
    return [levels[row * side : (row + 1) * side] for row in range(side)]


def markers(task, pixels):
    """The (row, column) of the two marker pixels (the top grey level), in row-major order."""
    top = task.options.grey_levels - 1
    found = [(row, column) for row, line in enumerate(pixels) for column, level in enumerate(line) if level == top]
    assert len(found) == 2, found
    return found


def reachable(pixels, source, radius=RADIUS):
    """Every lit pixel (level > 0) joined to `source` by lit pixels at most `radius` apart on both axes."""
    side = len(pixels)
    seen, frontier = {source}, [source]
    while frontier:
        row, column = frontier.pop()
        for other_row in range(max(0, row - radius), min(side, row + radius + 1)):
            for other_column in range(max(0, column - radius), min(side, column + radius + 1)):
                pixel = (other_row, other_column)
                if pixels[other_row][other_column] > 0 and pixel not in seen:
                    seen.add(pixel)
                    frontier.append(pixel)
    return seen


def solve(task, tokens):
    pixels = image(task, tokens)
    first, second = markers(task, pixels)
    query = len(tokens) - 1
    same = second in reachable(pixels, first)
    return {query: (1 if same else 0, query - (first[0] * len(pixels) + first[1]))}
