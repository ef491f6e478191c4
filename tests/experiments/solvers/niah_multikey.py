"""RULER's needle tasks (niah_multikey, niah_multivalue, niah_multiquery): collect each key's needles in the context
in order, then answer the r-th marker after an asked key with that key's r-th value."""

SMALL = {"seq_len": 21, "num_needle_values": 2, "num_keys": 12, "num_values": 12, "test_size": 64}
WORKED = {"seq_len": 12, "num_keys": 6, "num_values": 6, "test_size": 1}


def solve(task, tokens):
    names = task.decode(tokens)
    per_key, queries = task.options.num_needle_values, task.options.num_queries
    context = len(names) - queries * (1 + per_key)
    needles = {}  # key -> [(value id, its position)] in the order they appear
    for position in range(context - 1):
        if names[position].startswith("k") and names[position + 1].startswith("v"):
            needles.setdefault(names[position], []).append((tokens[position + 1], position + 1))
    assert all(name.startswith("d") for name in names[:context] if name[0] not in "kv"), names
    answers, asked = {}, set()
    for query in range(context, len(names), 1 + per_key):
        key = names[query]
        assert key.startswith("k") and key not in asked and len(needles[key]) == per_key, (key, needles)
        asked.add(key)
        for rank, (value, source) in enumerate(needles[key]):
            marker = query + 1 + rank
            assert names[marker] == "?", names
            answers[marker] = (value, marker - source)
    return answers
