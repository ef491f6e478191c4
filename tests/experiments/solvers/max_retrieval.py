"""Max retrieval: the query at the end, answered by the class of the one item of highest priority."""

SMALL = {"seq_len": 9, "num_priorities": 3, "num_classes": 2, "eval_lengths": (5, 21), "test_size": 64}
WORKED = {"seq_len": 7, "num_priorities": 4, "num_classes": 3, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    query = len(tokens) - 1
    assert names[query] == "?" and "?" not in names[:query], names
    items = [tuple(int(part) for part in name[1:].split("c")) for name in names[:query]]  # (priority, class)
    top = max(priority for priority, _ in items)
    (position,) = [position for position, (priority, _) in enumerate(items) if priority == top]  # one maximum
    return {query: (task.vocabulary.index(f"c{items[position][1]}"), query - position)}
