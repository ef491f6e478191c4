"""Passkey: the one answer-id token before the final query."""

SMALL = {"seq_len": 33, "num_keys": 4, "num_distractors": 3, "num_buckets": 4, "test_size": 64}
WORKED = {"seq_len": 12, "num_buckets": 1, "test_size": 1}


def solve(task, tokens):
    keys = [position for position, token in enumerate(tokens) if token < task.num_classes]
    assert len(keys) == 1, tokens
    query = len(tokens) - 1
    assert task.decode([tokens[query]]) == ["?"]
    return {query: (tokens[keys[0]], query - keys[0])}
