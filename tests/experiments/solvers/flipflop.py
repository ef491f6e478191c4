"""Flip-flop: replay the instruction stream, remembering the last written bit and where it sits."""

SMALL = {"seq_len": 40, "ignore_prob": 0.5, "test_size": 64}
WORKED = {"seq_len": 24, "ignore_prob": 0.5, "test_size": 1}


def solve(task, tokens):
    words = task.decode(tokens)
    assert len(words) % 2 == 0 and words[0] == "w" and words[-2] == "r", words
    answers = {}
    written = None  # (bit, position of the bit) of the latest write
    for position in range(0, len(words), 2):
        instruction, bit = words[position], words[position + 1]
        assert instruction in ("w", "r", "i") and bit in ("0", "1"), (position, words)
        if instruction == "w":
            written = (bit, position + 1)
        elif instruction == "r":
            assert bit == written[0], f"the read at {position} shows {bit}, not the written {written[0]}"
            answers[position] = (int(written[0]), position - written[1])
    return answers
