"""Multi-query associative recall (MQAR), after Zoology (Arora et al. 2023, "Zoology: Measuring and
Improving Recall in Efficient Language Models").

A prefix of num_pairs key-value pairs, interleaved k v k v ...; then the rest of the sequence, where
every key of the prefix comes back once, in random order, among filler tokens. At a key's return (a
query position) the target is the value it was paired with; every other position is IGNORE.

The layout follows Zoology's `multiquery_ar`: keys are distinct and values are distinct within an
example; with space = (seq_len - 2 * num_pairs) // 2, query j (asking for the j-th key) sits at
position 2 * num_pairs + 2 * gap_j, the gaps distinct in 0..space-1 and drawn with probability
proportional to (gap + 1) ** (gap_power - 1) (Zoology's power_a: 0.01 puts most queries soon after the
prefix, 1.0 is uniform). One difference: non-query positions hold tokens of a separate filler
vocabulary, where Zoology draws them from the whole vocabulary (so a filler there can repeat a key
without being scored).

Token ids: values 0..num_values-1 (the answers: num_classes = num_values), then the keys, then the
filler; vocab_size = num_values + num_keys + num_filler.
distance: query position - position of the key's VALUE in the prefix (the token to copy), >= 1.
chance_accuracy = 1 / num_pairs: guessing uniformly among the num_pairs values in the prefix, what a
model that has learned the format but cannot recall reaches (1 / num_values would flatter it).

Purpose: content-based recall of many facts at once, the gap Zoology found between attention and
efficient (gated convolution, recurrent) models; a dense 2-layer Transformer solves it via induction
heads. Cost: num_pairs scored positions per sequence; generating a batch is O(batch * (seq_len +
num_keys + num_values)).

Profiles: quick seq_len 64, 8 pairs, 16 keys, 16 values, 4 filler tokens (dim 64, depth 2, heads 4;
1000 steps of 64 examples, lr 1e-3); standard seq_len 512, 64 pairs, 256 keys and values (dim 128, depth
2, 4000 steps of 64); long seq_len 2048, 256 pairs, 1024 keys and values (dim 128, depth 2, 6000 steps of
32 at lr 5e-4).

Calibration: the measured accuracies of each profile are in docs/calibration.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.haystack import distinct, distractor_haystack
from experiments.tasks.registry import register_task

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4}


@register_task("mqar")
class MultiQueryRecall(Task):
    """Recall the value paired with each key of a key-value prefix when the key comes back later.

    Worked example: the test set of `create_task("mqar", seq_len=16, num_pairs=3, num_filler=2, test_size=1)`.

        input:    k2 v3 k14 v6 k1 v9 | k14 f0 k1 f0 k2 f0 f1 f0 f0 f0   (| marks the end of the prefix)
        label:    v6 at 6, v9 at 8, v3 at 10 (ids 6, 9, 3); every other position IGNORE
        distance: 6 - 3 = 3, 8 - 5 = 3, 10 - 1 = 9 (back to the value in the prefix)
        task.label_text(batch, 0) == "6: k14 -> v6; 8: k1 -> v9; 10: k2 -> v3"
    """

    capacity_option = "num_pairs"  # more pairs to recall at once: Zoology's axis beside the model width
    suite_position = 1

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: the 2 * num_pairs prefix, then the queries among filler")
        num_pairs: int = option(8, "key-value pairs in the prefix; every key is queried once afterwards")
        num_keys: int = option(16, "size of the key vocabulary (the keys of one example are distinct)")
        num_values: int = option(16, "size of the value vocabulary, the answers (values of one example distinct)")
        num_filler: int = option(4, "size of the filler vocabulary around the queries")
        gap_power: float = option(0.01, "query gap g is drawn with weight (g + 1) ** (gap_power - 1) "
                                         "(Zoology's power_a); 1 is uniform")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
        eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths (length generalisation)")

        def __post_init__(self) -> None:
            require(self.num_pairs >= 1, "num_pairs", self.num_pairs, "an integer >= 1")
            require(self.seq_len >= 4 * self.num_pairs, "seq_len", self.seq_len,
                    f"an integer >= 4 * num_pairs = {4 * self.num_pairs}, room for the prefix and a query per key")
            require(self.num_keys >= self.num_pairs, "num_keys", self.num_keys,
                    f"an integer >= num_pairs = {self.num_pairs}, as the keys of one example are distinct")
            require(self.num_values >= self.num_pairs, "num_values", self.num_values,
                    f"an integer >= num_pairs = {self.num_pairs}, as the values of one example are distinct")
            require(self.num_filler >= 1, "num_filler", self.num_filler, "an integer >= 1")
            require(math.isfinite(self.gap_power) and self.gap_power > 0, "gap_power", self.gap_power,
                    "a finite number > 0")
            require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")

    profiles = {
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 1000, "batch_size": 64, "lr": 1e-3, "eval_every": 100}),
        "standard": Profile(options={"seq_len": 512, "num_pairs": 64, "num_keys": 256, "num_values": 256,
                                     "test_size": 512},
                            model=_LARGER_MODEL,
                            train={"steps": 4000, "batch_size": 64, "lr": 1e-3, "eval_every": 250}),
        "long": Profile(options={"seq_len": 2048, "num_pairs": 256, "num_keys": 1024, "num_values": 1024,
                                 "test_size": 256},
                        model=_LARGER_MODEL,
                        train={"steps": 6000, "batch_size": 32, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = ([f"v{value}" for value in range(options.num_values)]
                           + [f"k{key}" for key in range(options.num_keys)]
                           + [f"f{filler}" for filler in range(options.num_filler)])
        self.num_classes = options.num_values
        self.chance_accuracy = 1 / options.num_pairs

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        options, length = self.options, self.seq_len
        pairs, first_key = options.num_pairs, options.num_values
        prefix, space = 2 * pairs, (length - 2 * pairs) // 2

        keys = first_key + distinct(batch_size, options.num_keys, pairs, generator, device)  # (batch, pairs)
        values = distinct(batch_size, options.num_values, pairs, generator, device)  # (batch, pairs)
        weights = torch.arange(1, space + 1, device=device, dtype=torch.float32) ** (options.gap_power - 1)  # (space,)
        gaps = torch.multinomial(weights.expand(batch_size, space), pairs, replacement=False,
                                 generator=generator)  # (batch, pairs)
        query_position = prefix + 2 * gaps  # (batch, pairs): where key j comes back
        value_position = 2 * torch.arange(pairs, device=device) + 1  # (pairs,)

        inputs = distractor_haystack(batch_size, length, first_key + options.num_keys, options.num_filler, generator,
                                     device)  # (batch, seq) filler
        inputs[:, 0:prefix:2] = keys
        inputs[:, 1:prefix:2] = values
        inputs.scatter_(1, query_position, keys)
        targets = torch.full_like(inputs, IGNORE).scatter_(1, query_position, values)  # (batch, seq)
        distance = torch.full_like(inputs, -1).scatter_(1, query_position, query_position - value_position)
        return Batch(inputs, targets, distance)
