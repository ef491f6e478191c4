"""Memorization, MAD's form (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures",
`generate_memorization_instance` and `generate_kv_map` of athms/mad-lab).

A fixed key-value table, drawn once from table_seed and the same in every example, every training batch and the
test set: each key maps to its own value. An example is seq_len / 2 keys drawn uniformly with replacement, each
followed by the insert token `>`; at each `>` the target is the table's value for the key just before it. The
value never appears in the input: the model can only answer from what its weights stored in training.

This measures storage in weights, not a long-range dependency: the evidence is always 1 position back, and a
variant's attention plays no part beyond reading the previous token.

Token ids: values 0..num_values-1 (the answers), then keys, then `>`; as in MAD, vocab_size counts them all and
keys take the first half (rounded down) of all but `>`, so one value is left out of the table when the halves differ.
distance: 1 at every `>` (the key just before).
chance_accuracy = 1 / num_keys: guessing uniformly among the table's values.

Deviations from MAD: the table comes from a torch generator seeded with table_seed, where MAD shuffles with numpy
at its config's seed (so the same sizes give another table); and those every task of the suite shares
(`experiments.tasks.mad`).

Purpose: how many facts a model of a given width stores, MAD's probe of capacity in its MLP and embeddings.
Cost: seq_len / 2 scored positions per sequence; a batch is O(batch * seq_len).

Profiles: quick seq_len 32, vocabulary 64 (31 keys), fresh examples every batch (dim 64, depth 2, heads 4; 1000
steps of 64, lr 1e-3); mad MAD's baseline: seq_len 32, vocabulary 256 (127 keys), 256 training examples, the
shared mad model and budget. MAD's ladder: vocab_size 512, 1024, 2048, 4096, 8192.

Calibration: the quick profile's figures, dense and local, are in docs/calibration.md; the mad profile is not
measured yet (`make calibration TASK=memorization PROFILE=mad`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks import mad
from experiments.tasks.base import IGNORE, MAX_TRAIN_SEED, QUICK_EVAL_SIZE, Batch, Task
from experiments.tasks.registry import register_task


@register_task("memorization")
class Memorization(Task):
    """Say each key's value from a fixed table: storage in weights, not a long-range dependency (MAD's memorization).

    Worked example: the test set of `create_task("memorization", seq_len=8, vocab_size=16, test_size=1)`.

        input:    k5 > k2 > k3 > k5 >
        label:    v5 at 1, v7 at 3, v3 at 5, v5 at 7 (ids 5, 7, 3, 5: the table's values of k5, k2, k3, k5); every
                  other position IGNORE
        distance: 1 at every `>`
        task.label_text(batch, 0) == "1: > -> v5; 3: > -> v7; 5: > -> v3; 7: > -> v5"
    """

    mad_ladder = {"vocab_size": (512, 1024, 2048, 4096, 8192)}
    paper = f"{mad.PAPER} generate_memorization_instance"
    deviations = ("the table comes from torch seeded with table_seed, not numpy at MAD's seed", *mad.SHARED_DEVIATIONS)

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(32, "tokens per example: seq_len / 2 keys, each followed by `>`")
        vocab_size: int = option(64, "tokens in all (MAD's count): `>`, and of the rest keys the first half, "
                                     "values the others")
        table_seed: int = option(0, "seed of the fixed key-value table, the same for every run seed")
        train_examples: int = option(0, mad.TRAIN_EXAMPLES_HELP)
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")

        def __post_init__(self) -> None:
            require(self.seq_len >= 2 and self.seq_len % 2 == 0, "seq_len", self.seq_len,
                    "an even integer >= 2, room for a key and its `>`")
            require(self.vocab_size >= 5, "vocab_size", self.vocab_size,
                    "an integer >= 5, at least two keys and two values besides `>`")
            require(0 <= self.table_seed < MAX_TRAIN_SEED, "table_seed", self.table_seed,
                    "an integer from 0 to 2**31 - 1")
            mad.check_counts(self)

    profiles = {
        "quick": mad.QUICK_PROFILE,
        "mad": mad.profile({"seq_len": 32, "vocab_size": 256}, train_examples=256),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.num_keys, self.num_values, self.vocabulary = mad.keys_and_values(options.vocab_size - 1, [">"])
        self.num_classes = self.num_values
        self.chance_accuracy = 1 / self.num_keys
        table_generator = torch.Generator().manual_seed(options.table_seed)
        self.table = torch.randperm(self.num_values, generator=table_generator)[: self.num_keys]  # key -> value

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        keys = torch.randint(self.num_keys, (batch_size, self.seq_len // 2), generator=generator, device=device)
        inputs = torch.full((batch_size, self.seq_len), self.vocab_size - 1, dtype=torch.long, device=device)
        inputs[:, 0::2] = self.num_values + keys
        targets = torch.full_like(inputs, IGNORE)
        targets[:, 1::2] = self.table.to(device)[keys]
        distance = torch.full_like(inputs, -1)
        distance[:, 1::2] = 1
        return Batch(inputs, targets, distance)
