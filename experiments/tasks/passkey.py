"""Passkey retrieval: a key token hidden among distractors, asked for by a query token at the end.

The passkey test of Mohtashami & Jaggi 2023 ("Landmark Attention: Random-Access Infinite Context Length
for Transformers"), with token ids instead of text. Position seq_len - 1 holds the query token `?`;
the key `K<k>` sits at position seq_len - 1 - distance; every other position holds a distractor
`d<j>` drawn uniformly. Only the last position is scored, and its target is the key.

Token ids: keys 0..num_keys-1 (the answers: num_classes = num_keys), then the distractors, then `?`;
vocab_size = num_keys + num_distractors + 1. chance_accuracy = 1 / num_keys.

Distances: training batches draw them uniformly from 1..seq_len-1. The test set fills `num_buckets`
equal-width buckets over 1..seq_len-1 with test_size / num_buckets examples each (distance uniform
within its bucket): the buckets of `distance_buckets(seq_len - 1, num_buckets)`, where distance d
lies in bucket floor((d - 1) * num_buckets / (seq_len - 1)). Metadata carries `distance` and `bucket`
per example, in training batches too.

Purpose: can attention reach one token at any distance? Per-bucket accuracy shows where a variant stops
(a window of w cannot see past w in one layer; a position bias may fade with distance). Cost: one
scored position per sequence, so each step is seq_len tokens of compute for one token of signal;
generating a batch is O(batch * seq_len).

Profiles: quick seq_len 128, 16 keys, 16 distractors (dim 64, depth 2, heads 4; 800 steps of 32
examples, lr 1e-3); standard seq_len 1024 (dim 128, depth 2, 2000 steps of 32); long seq_len 4096 (dim 128,
depth 2, 3000 steps of 16 at lr 5e-4).

Calibration: the measured accuracies of each profile are in docs/calibration.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task, distance_buckets
from experiments.tasks.haystack import distractor_haystack
from experiments.tasks.registry import register_task

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4}


@register_task("passkey")
class Passkey(Task):
    """Retrieve the one key token hidden at a chosen distance before the final query token.

    Worked example: the test set of `create_task("passkey", seq_len=12, num_buckets=1, test_size=1)`.

        input:    d11 d9 d2 d6 K2 d5 d1 d7 d8 d7 d12 ?
        label:    K2 (id 2) at position 11, the `?`; every other position IGNORE
        distance: 11 - 4 = 7
        task.label_text(batch, 0) == "11: ? -> K2"
    """

    suite_position = 0
    depends_on_order = False  # the one key among the distractors is the answer, wherever it sits

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(128, "tokens per example, the query included; distances run 1..seq_len-1")
        num_keys: int = option(16, "size of the key vocabulary, the answers; chance is 1/num_keys")
        num_distractors: int = option(16, "size of the distractor vocabulary that fills the sequence")
        num_buckets: int = option(8, "equal-width distance buckets over 1..seq_len-1, filled evenly by the test set")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set, a multiple of num_buckets")
        eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths (length generalisation)")

        def __post_init__(self) -> None:
            require(self.num_keys >= 2, "num_keys", self.num_keys, "an integer >= 2")
            require(self.num_distractors >= 1, "num_distractors", self.num_distractors, "an integer >= 1")
            require(self.num_buckets >= 1, "num_buckets", self.num_buckets, "an integer >= 1")
            require(self.seq_len >= self.num_buckets + 1, "seq_len", self.seq_len,
                    f"an integer >= num_buckets + 1 = {self.num_buckets + 1}, so that every distance bucket "
                    f"holds a distance")
            require(self.test_size >= 1 and self.test_size % self.num_buckets == 0, "test_size", self.test_size,
                    f"a positive multiple of num_buckets = {self.num_buckets}")

    profiles = {
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 800, "batch_size": 32, "lr": 1e-3, "eval_every": 100}),
        "standard": Profile(options={"seq_len": 1024, "test_size": 512}, model=_LARGER_MODEL,
                            train={"steps": 2000, "batch_size": 32, "lr": 1e-3, "eval_every": 250}),
        "long": Profile(options={"seq_len": 4096, "test_size": 512}, model=_LARGER_MODEL,
                        train={"steps": 3000, "batch_size": 16, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = ([f"K{key}" for key in range(options.num_keys)]
                           + [f"d{distractor}" for distractor in range(options.num_distractors)] + ["?"])
        self.num_classes = options.num_keys
        self.chance_accuracy = 1 / options.num_keys

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        distance = torch.randint(1, self.seq_len, (batch_size,), generator=generator, device=device)  # (batch,)
        return self._hide_keys(distance, generator)

    def _buckets(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """(num_buckets, 2) long: each test distance bucket's [lo, hi], from `distance_buckets`."""
        return torch.tensor(distance_buckets(self.seq_len - 1, self.options.num_buckets), device=device)

    def sample_test(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        buckets = self.options.num_buckets
        bucket = torch.arange(buckets, device=device).repeat_interleave(batch_size // buckets)  # (batch,)
        lo, hi = self._buckets(device)[bucket].unbind(-1)  # (batch,) each
        uniform = torch.rand(batch_size, generator=generator, device=device, dtype=torch.float64)  # (batch,)
        distance = lo + (uniform * (hi - lo + 1)).long()  # (batch,) uniform in [lo, hi]
        return self._hide_keys(distance, generator)

    def _hide_keys(self, distance: torch.Tensor, generator: torch.Generator) -> Batch:
        """Examples whose key sits `distance` (batch,) positions before the final query token."""
        (batch_size,), device, length = distance.shape, distance.device, self.seq_len
        num_keys = self.options.num_keys
        inputs = distractor_haystack(batch_size, length, num_keys, self.options.num_distractors, generator,
                                     device)  # (batch, seq)
        key = torch.randint(num_keys, (batch_size,), generator=generator, device=device)  # (batch,)
        inputs[:, -1] = self.vocab_size - 1  # the query token
        inputs.scatter_(1, (length - 1 - distance)[:, None], key[:, None])
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq)
        targets[:, -1] = key
        distances = torch.full_like(inputs, -1)  # (batch, seq)
        distances[:, -1] = distance
        lowest = self._buckets(device)[:, 0].contiguous()  # (num_buckets,)
        bucket = torch.searchsorted(lowest, distance, right=True) - 1  # (batch,)
        return Batch(inputs, targets, distances, {"distance": distance, "bucket": bucket})
