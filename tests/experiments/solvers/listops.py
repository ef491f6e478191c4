"""ListOps: a recursive evaluator of the left-padded expression before the final query `=`."""

import statistics

SMALL = {"seq_len": 40, "min_length": 5, "max_depth": 3, "max_args": 4, "test_size": 64}
WORKED = {"seq_len": 24, "min_length": 12, "max_depth": 2, "max_args": 5, "operators": ("MIN", "MAX", "MED", "SM"),
          "test_size": 1}

OPERATIONS = {
    "[MIN": min,
    "[MAX": max,
    "[MED": lambda args: int(statistics.median(args)),  # LRA's int(np.median(args)): an even count truncates
    "[SM": lambda args: sum(args) % 10,
}


def evaluate(names, position):
    """(value, position after it) of the expression starting at `position` of the decoded `names`."""
    name = names[position]
    if name.isdigit():
        return int(name), position + 1
    arguments, position = [], position + 1
    while names[position] != "]":
        argument, position = evaluate(names, position)
        arguments.append(argument)
    assert len(arguments) >= 2, names
    return OPERATIONS[name](arguments), position + 1


def solve(task, tokens):
    names = task.decode(tokens)
    query = len(names) - 1
    assert names[query] == "=", names
    first = next(position for position, name in enumerate(names) if name != "_")
    value, end = evaluate(names, first)
    assert end == query, names  # one expression fills the positions between the padding and the query
    return {query: (value, query - first)}
