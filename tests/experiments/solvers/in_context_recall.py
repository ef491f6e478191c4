"""In-context recall: each key that comes back, answered by the value it had before."""

SMALL = {"seq_len": 24, "vocab_size": 10, "test_size": 64}
WORKED = {"seq_len": 12, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    last_value = {}  # key -> the position of its value where it last came
    answers = {}
    for position in range(0, len(tokens), 2):
        if names[position].startswith("n"):
            assert names[position + 1].startswith("n"), names  # noise comes in pairs
            continue
        assert names[position].startswith("k") and names[position + 1].startswith("v"), names
        key = tokens[position]
        if key in last_value:
            source = last_value[key]
            assert tokens[source] == tokens[position + 1], "a key changed its value"
            answers[position] = (tokens[source], position - source)
        last_value[key] = position + 1
    assert len(tokens) - 2 in answers, "the last pair does not repeat a key"
    return answers
