"""Compression: every token before `#`, answered by itself, as far back from `#` as it lies."""

SMALL = {"seq_len": 10, "vocab_size": 5, "test_size": 64}
WORKED = {"seq_len": 6, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    assert names[-1] == "#" and "#" not in names[:-1], names
    return {position: (token, len(tokens) - 1 - position) for position, token in enumerate(tokens[:-1])}
