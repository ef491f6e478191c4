"""Fuzzy in-context recall: each key run that comes back, answered token by token by the value run it had before."""

SMALL = {"seq_len": 30, "vocab_size": 9, "max_key_tokens": 2, "max_value_tokens": 2, "test_size": 64}
WORKED = {"seq_len": 24, "test_size": 1}


def runs(names):
    """(key tokens' positions, value tokens' positions) of each pair after the padding, in order."""
    start = next(position for position, name in enumerate(names) if name != "_")
    assert all(name == "_" for name in names[:start]) and "_" not in names[start:], names
    pairs, position = [], start
    while position < len(names):
        key = [position + offset for offset in range(len(names) - position) if names[position].startswith("k")
               and all(name.startswith("k") for name in names[position:position + offset + 1])]
        value_start = key[-1] + 1
        value = [p for p in range(value_start, len(names)) if all(n.startswith("v") for n in names[value_start:p + 1])]
        assert key and value, names
        pairs.append((key, value))
        position = value[-1] + 1
    return pairs


def solve(task, tokens):
    names = task.decode(tokens)
    last_value = {}  # key tokens -> the first position of its value where it last came
    answers = {}
    for key, value in runs(names):
        key_tokens = tuple(tokens[p] for p in key)
        assert len(set(key_tokens)) == len(key_tokens) and len(key) <= task.options.max_key_tokens, names
        assert len(value) <= task.options.max_value_tokens, names
        if key_tokens in last_value:
            source = last_value[key_tokens]
            back = value[0] - source - 1
            for offset, position in enumerate(value):
                assert tokens[source + offset] == tokens[position], "a key changed its value"
                answers[position - 1] = (tokens[position], back)
        last_value[key_tokens] = value[0]
    return answers
