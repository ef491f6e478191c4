"""Variable tracking: follow the asked number through the assignments in context order, collecting every variable
that takes it; the r-th marker is answered by the r-th."""

SMALL = {"seq_len": 40, "num_hops": 3, "num_chains": 2, "num_variables": 9, "num_numbers": 3, "num_distractors": 3,
         "test_size": 64}
WORKED = {"seq_len": 16, "num_hops": 2, "num_distractors": 4, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    first_marker = names.index("?")
    markers = list(range(first_marker, len(names)))
    assert all(names[marker] == "?" for marker in markers), names
    holding, chain = {names[first_marker - 1]}, []  # what holds the asked number; (variable id, position) in order
    for position in range(first_marker - 3):
        if names[position + 1] == "=":
            variable, taken = names[position], names[position + 2]
            assert variable.startswith("x") and variable not in holding, names
            if taken in holding:
                holding.add(variable)
                chain.append((tokens[position], position))
    assert len(chain) == len(markers), (chain, names)
    return {marker: (variable, marker - source) for marker, (variable, source) in zip(markers, chain, strict=True)}
