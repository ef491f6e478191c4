"""Flip-flop language modelling: recall the last written bit past many ignored ones.

After Liu, Ash, Goel, Krishnamurthy & Zhang 2023 ("Exposing Attention Glitches with Flip-Flop Language
Modeling"). A sequence is seq_len / 2 instruction-bit pairs: `w b` writes bit b, `i b` is to be ignored
(b is random), `r b` reads: b must equal the last written bit. Pair 0 is always a write and the last
pair always a read, as in the paper; every pair between is an ignore with probability ignore_prob and a
write or a read with probability (1 - ignore_prob) / 2 each (the paper's FFL(p_i)). Written and ignored
bits are uniform.

Layout: the instruction of pair k at position 2k, its bit at 2k + 1. The model predicts a class at every
position from the inputs up to it (causal), so a read is scored at the position of its `r` token, 2k:
there the target is the last written bit, which the model must say before seeing it; the input at
2k + 1 holds that same bit, as in the paper's sequence, so later positions see it like any other token.
(In the paper's language-modelling terms: the prediction at 2k of the token at 2k + 1.) Every other
position is IGNORE.

Token ids: "0" and "1" first (the answers: num_classes = 2), then "w" = 2, "r" = 3, "i" = 4;
vocab_size = 5. chance_accuracy = 0.5.
distance: the read's position 2k - the position 2j + 1 of the last write's bit, so 2(k - j) - 1 >= 1.
Metadata per example: `reads` (its number of scored reads) and `distance` (the largest of their
distances).

Held-out sets: the test set is in-distribution (ignore_prob). Two splits are reported separately, as in
the paper: `dense` (dense_ignore_prob = 0.1: mostly writes and reads, short distances) and `sparse`
(sparse_ignore_prob = 0.98: long runs of ignores, the last write often far back, where the paper finds
Transformers' rare "attention glitches"); each split holds `split_size` examples (test_size unless set), read once at
the end, so a split large enough to count rare errors costs no interim evaluation. `eval_lengths` adds
in-distribution sets at other lengths.

Purpose: a precise, long-range, recency-sensitive lookup: attend to the latest write and only it, past
distractor bits of the same two values. A window that misses the last write (and any read since) can
only guess. Cost: about seq_len * (1 - ignore_prob) / 4 scored reads per sequence (about 4 in the quick
profile); generating a batch is O(batch * seq_len).

Profiles: quick, seq_len 64, model dim 64, depth 2, 4 heads, 1000 steps of 64 examples at lr 3e-3;
standard, the paper's seq_len 512, also evaluated at 1024, dim 128, 4000 steps of 32; long, seq_len
4096, also evaluated at 8192, dim 128, 6000 steps of 16 at lr 5e-4.

Calibration: the measured accuracies of each profile are in docs/calibration.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.registry import register_task

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
# Standard and long evaluate at twice their training length, where a learned position table's rows were never
# trained: no absolute positions, as in induction, so the causal mask and the variant's own position terms
# carry position at every length.
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4, "positions": "none"}

_WRITE, _READ, _IGNORE_INSTRUCTION = 2, 3, 4  # token ids of the instructions "w", "r", "i"


@register_task("flipflop")
class FlipFlop(Task):
    """Say the last written bit at every read of a write / read / ignore instruction stream.

    Worked example: the test set of `create_task("flipflop", seq_len=24, ignore_prob=0.5, test_size=1)`.

        input:    w 1 i 0 w 0 w 0 i 1 w 0 i 0 i 0 r 0 w 1 i 0 r 1
        label:    0 at 16 and 1 at 22, the `r` positions (ids 0, 1); every other position IGNORE
        distance: 16 - 11 = 5, 22 - 19 = 3 (back to the bit of the last write: pair 5's, then pair 9's)
        task.label_text(batch, 0) == "16: r -> 0; 22: r -> 1"
    """

    eval_splits = ("dense", "sparse")
    needs_causal = True  # the input after each scored `r` is the bit to be said there
    suite_position = 4

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: seq_len / 2 instruction-bit pairs (an even number)")
        ignore_prob: float = option(0.8, "probability that an instruction between the first write and the last "
                                         "read is `i` (training and test set); `w` and `r` share the rest equally")
        dense_ignore_prob: float = option(0.1, "ignore probability of the `dense` eval split")
        sparse_ignore_prob: float = option(0.98, "ignore probability of the `sparse` eval split")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set (and the validation set)")
        split_size: int = option(0, "examples in each of the dense and sparse splits, read once at the end (0: "
                                    "test_size); about 7,700 give the sparse split 10^4 reads")
        eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths (length generalisation)")

        def __post_init__(self) -> None:
            require(self.seq_len >= 4 and self.seq_len % 2 == 0, "seq_len", self.seq_len,
                    "an even integer >= 4, room for the first write and the last read")
            for name in ("ignore_prob", "dense_ignore_prob", "sparse_ignore_prob"):
                value = getattr(self, name)
                require(math.isfinite(value) and 0 <= value <= 1, name, value, "a probability from 0 to 1")
            require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")
            require(self.split_size >= 0, "split_size", self.split_size, "an integer >= 0 (0: test_size)")

    profiles = {
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 1000, "batch_size": 64, "lr": 3e-3, "eval_every": 100}),
        "standard": Profile(options={"seq_len": 512, "test_size": 512, "eval_lengths": (1024,)},
                            model=_LARGER_MODEL,
                            train={"steps": 4000, "batch_size": 32, "lr": 1e-3, "eval_every": 250}),
        "long": Profile(options={"seq_len": 4096, "test_size": 256, "eval_lengths": (8192,)},
                        model=_LARGER_MODEL,
                        train={"steps": 6000, "batch_size": 16, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = ["0", "1", "w", "r", "i"]
        self.num_classes = 2
        self.chance_accuracy = 0.5

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        return self._flip_flop(self.options.ignore_prob, batch_size, generator, device)

    @property
    def split_size(self) -> int:
        return self.options.split_size or self.test_size

    def sample_split(self, split: str, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        if split not in self.eval_splits:
            raise ValueError(f"Flip-flop has no eval split {split!r}; accepted: {', '.join(self.eval_splits)}.")
        ignore_prob = self.options.dense_ignore_prob if split == "dense" else self.options.sparse_ignore_prob
        return self._flip_flop(ignore_prob, batch_size, generator, device)

    def _flip_flop(self, ignore_prob: float, batch_size: int, generator: torch.Generator,
                   device: torch.device) -> Batch:
        """Examples whose inner instructions are `i` with probability `ignore_prob`, else `w` or `r` evenly."""
        pairs = self.seq_len // 2
        uniform = torch.rand(batch_size, pairs, generator=generator, device=device, dtype=torch.float64)
        move_prob = (1 - ignore_prob) / 2
        instruction = torch.full((batch_size, pairs), _IGNORE_INSTRUCTION, device=device)  # (batch, pairs)
        instruction[uniform < 2 * move_prob] = _READ
        instruction[uniform < move_prob] = _WRITE
        instruction[:, 0] = _WRITE
        instruction[:, -1] = _READ
        bits = torch.randint(2, (batch_size, pairs), generator=generator, device=device)  # (batch, pairs)
        pair = torch.arange(pairs, device=device)  # (pairs,)
        writing = instruction == _WRITE
        last_write = torch.where(writing, pair, 0).cummax(dim=1).values  # (batch, pairs): latest write at or before
        reading = instruction == _READ
        bits = torch.where(reading, bits.gather(1, last_write), bits)  # a read's bit is the last written one

        inputs = torch.empty(batch_size, self.seq_len, dtype=torch.long, device=device)  # (batch, seq)
        inputs[:, 0::2] = instruction
        inputs[:, 1::2] = bits
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq): scored at each `r`
        targets[:, 0::2] = torch.where(reading, bits, IGNORE)
        read_distance = torch.where(reading, 2 * pair - (2 * last_write + 1), -1)  # (batch, pairs)
        distance = torch.full_like(inputs, -1)  # (batch, seq)
        distance[:, 0::2] = read_distance
        metadata = {"reads": reading.sum(dim=1), "distance": read_distance.max(dim=1).values}
        return Batch(inputs, targets, distance, metadata)
