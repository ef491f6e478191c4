"""In-context recall, MAD's form (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures",
section 3 and `generate_in_context_recall_instance` of athms/mad-lab, multi_query=True as its benchmark runs it).

The sequence is seq_len / 2 key-value pairs k v k v ...: each key drawn uniformly, with replacement, from the
key vocabulary; within an example each key keeps one value, drawn uniformly (two keys may share a value). Wherever
a key comes back, the target at the key is the value it had before (a model reads the key and says its value,
the next token); a key's first appearance is not scored. The last pair repeats a key shown earlier (drawn
uniformly among them), so every example has a scored position. The noisy form (`noisy_in_context_recall`) puts
two noise tokens in place of a pair with probability frac_noise (never in the last pair, nor in one pair drawn
before it, so a key is always there to repeat).

Token ids: values 0..num_values-1 (the answers), then keys, then noise tokens; as in MAD, vocab_size counts them
all, the noise tokens are noise_vocab_size of them, and of the rest keys take the first half (rounded down).
distance: the key's position - the position of its value where the key last came before, >= 1.
chance_accuracy = 1 / num_values: a model that has learned the format but cannot recall.

Deviations from MAD: the inputs hold all seq_len tokens (MAD drops the last value, whose target is the one
scored there); the forced pair is drawn among the pairs before the last (MAD's may fall on the last and force
none); and those every task of the suite shares (`experiments.tasks.mad`).

Purpose: recall of a value by its key from context, the MQAR skill, with keys repeating at every distance.
Cost: a little under seq_len / 2 scored positions per sequence; a batch is O(batch * seq_len * log seq_len) (a sort
finds each key's last appearance).

Profiles: quick seq_len 64, vocabulary 16 (8 keys, 8 values), fresh examples every batch (dim 64, depth 2, heads
4; 1000 steps of 64, lr 1e-3); mad MAD's baseline: seq_len 128, vocabulary 16, 12,800 training examples, the
shared mad model and budget. MAD's ladder: vocab_size 32, 64, 128; seq_len 256, 512, 1024; train_examples 6,400
down to 800.

Calibration: the quick profile's figures, dense and local, are in docs/calibration.md; the mad profile is not
measured yet (`make calibration TASK=in_context_recall PROFILE=mad`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks import mad
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Task
from experiments.tasks.registry import register_task

RECALL_DEVIATIONS = ("the inputs hold all seq_len tokens (MAD drops the last value)",
                     "the pair kept free of noise is drawn before the last (MAD's may fall on the last)",
                     mad.NEXT_TOKEN_DEVIATION, *mad.SHARED_DEVIATIONS)
LADDER = {"vocab_size": (32, 64, 128), "seq_len": (256, 512, 1024), "train_examples": (6400, 3200, 1600, 800)}


def check_sizes(options, reserved: int) -> None:
    """The checks every recall task makes: an even seq_len that holds two pairs, keys and values left in the
    vocabulary once `reserved` (special and noise) tokens are set aside, and the example counts."""
    require(options.seq_len >= 4 and options.seq_len % 2 == 0, "seq_len", options.seq_len,
            "an even integer >= 4, room for two key-value pairs")
    require(options.vocab_size >= reserved + 4, "vocab_size", options.vocab_size,
            f"an integer >= {reserved + 4}, at least two keys and two values besides {reserved} other tokens")
    mad.check_counts(options)


@register_task("in_context_recall")
class InContextRecall(Task):
    """Say the value a key had before, wherever the key comes back among key-value pairs (MAD's in-context recall).

    Worked example: the test set of `create_task("in_context_recall", seq_len=12, test_size=1)`.

        input:    k2 v0 k1 v3 k2 v0 k4 v4 k1 v3 k4 v4
        label:    v0 at 4, v3 at 8, v4 at 10 (ids 0, 3, 4); every other position IGNORE
        distance: 4 - 1 = 3, 8 - 3 = 5, 10 - 7 = 3 (back to the value where the key last came)
        task.label_text(batch, 0) == "4: k2 -> v0; 8: k1 -> v3; 10: k4 -> v4"
    """

    needs_causal = True  # the value follows its key: a model that sees the next token reads the answer
    mad_ladder = LADDER
    paper = f"{mad.PAPER} generate_in_context_recall_instance, multi_query"
    deviations = RECALL_DEVIATIONS

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: seq_len / 2 key-value pairs")
        vocab_size: int = option(16, "tokens in all (MAD's count): keys the first half, values the rest")
        train_examples: int = option(0, mad.TRAIN_EXAMPLES_HELP)
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")

        def __post_init__(self) -> None:
            check_sizes(self, reserved=0)

    profiles = {
        "quick": mad.QUICK_PROFILE,
        "mad": mad.profile({"seq_len": 128, "vocab_size": 16}),
    }

    def __init__(self, options, profile: str) -> None:
        super().__init__(options, profile)
        self.noise_vocab_size: int = getattr(options, "noise_vocab_size", 0)
        self.frac_noise: float = getattr(options, "frac_noise", 0.0)
        self.num_keys, self.num_values, self.vocabulary = mad.keys_and_values(
            options.vocab_size - self.noise_vocab_size, [f"n{noise}" for noise in range(self.noise_vocab_size)])
        self.num_classes = self.num_values
        self.chance_accuracy = 1 / self.num_values

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        pairs, rows = self.seq_len // 2, torch.arange(batch_size, device=device)

        def uniform(high: int, *shape: int) -> torch.Tensor:
            return torch.randint(high, shape, generator=generator, device=device)

        noise = torch.rand(batch_size, pairs, generator=generator, device=device) < self.frac_noise  # (batch, pairs)
        noise[rows, uniform(pairs - 1, batch_size)] = False  # a pair before the last, so a key to repeat
        noise[:, -1] = False
        keys = uniform(self.num_keys, batch_size, pairs)  # (batch, pairs)
        shown = torch.zeros(batch_size, self.num_keys, device=device).scatter_add_(
            1, keys[:, :-1], (~noise[:, :-1]).float())  # (batch, keys): how often each key came before the last pair
        keys[:, -1] = torch.multinomial(shown.clamp(max=1), 1, generator=generator)[:, 0]
        values = uniform(self.num_values, batch_size, self.num_keys).gather(1, keys)  # (batch, pairs): one per key
        previous, _ = mad.previous_occurrence(torch.where(noise, -1, keys))  # (batch, pairs): -1 where the key is new

        first_key, first_noise = self.num_values, self.num_values + self.num_keys
        inputs = torch.empty(batch_size, self.seq_len, dtype=torch.long, device=device)  # (batch, seq)
        inputs[:, 0::2], inputs[:, 1::2] = first_key + keys, values
        if self.frac_noise > 0:
            noise_tokens = first_noise + uniform(self.noise_vocab_size, batch_size, self.seq_len)  # (batch, seq)
            inputs = torch.where(noise.repeat_interleave(2, dim=1), noise_tokens, inputs)
        scored = previous >= 0  # (batch, pairs); noise pairs have none
        key_position = 2 * torch.arange(pairs, device=device)  # (pairs,)
        targets = torch.full_like(inputs, IGNORE)
        targets[:, 0::2] = torch.where(scored, values, IGNORE)
        distance = torch.full_like(inputs, -1)
        distance[:, 0::2] = torch.where(scored, key_position - (2 * previous + 1), -1)
        return Batch(inputs, targets, distance)
