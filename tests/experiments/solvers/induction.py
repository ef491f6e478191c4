"""Induction: the final trigger, answered by the token after the trigger's only earlier occurrence."""

SMALL = {"seq_len": 24, "num_tokens": 5, "eval_lengths": (40,), "test_size": 64}
WORKED = {"seq_len": 12, "num_tokens": 4, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    triggers = [position for position, name in enumerate(names) if name == "*"]
    final = len(tokens) - 1
    assert len(triggers) == 2 and triggers[1] == final and triggers[0] + 1 < final, names
    source = triggers[0] + 1
    return {final: (tokens[source], final - source)}
