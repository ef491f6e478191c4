"""Memorization: each `>`, answered by the table's value for the key just before it."""

SMALL = {"seq_len": 20, "vocab_size": 11, "test_size": 64}
WORKED = {"seq_len": 8, "vocab_size": 16, "test_size": 1}


def solve(task, tokens):
    table = task.table.tolist()  # the task's fixed table (key -> value): what a model must store
    assert len(set(table)) == len(table) == task.num_keys, "two keys share a value"
    names = task.decode(tokens)
    assert names[1::2] == [">"] * (len(tokens) // 2) and all(name.startswith("k") for name in names[0::2]), names
    return {position: (table[tokens[position - 1] - task.num_values], 1) for position in range(1, len(tokens), 2)}
