"""MQAR: each later return of a prefix key, answered by its value."""

SMALL = {"seq_len": 40, "num_pairs": 5, "num_keys": 7, "num_values": 6, "num_filler": 2, "test_size": 64}
WORKED = {"seq_len": 16, "num_pairs": 3, "num_filler": 2, "test_size": 1}


def solve(task, tokens):
    prefix = 2 * task.options.num_pairs
    value_position = {tokens[position]: position + 1 for position in range(0, prefix, 2)}
    assert len(value_position) == task.options.num_pairs, "keys in the prefix repeat"
    answers = {}
    for position in range(prefix, len(tokens)):
        if tokens[position] in value_position:
            source = value_position.pop(tokens[position])
            answers[position] = (tokens[source], position - source)
    assert not value_position, "a key of the prefix is never queried"
    return answers
