"""Selective copying: each marker at the end, answered by the data token of the same rank among the noise."""

SMALL = {"seq_len": 30, "num_tokens": 5, "num_data_tokens": 4, "test_size": 64}
WORKED = {"seq_len": 12, "num_tokens": 3, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    markers = [position for position, name in enumerate(names) if name == "?"]
    sources = [position for position, name in enumerate(names) if name not in (".", "?")]
    assert markers == list(range(len(tokens) - len(markers), len(tokens))), "markers are not all at the end"
    assert len(sources) == len(markers) and all(source < markers[0] for source in sources), names
    return {marker: (tokens[source], marker - source) for marker, source in zip(markers, sources, strict=True)}
