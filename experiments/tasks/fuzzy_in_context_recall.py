"""Fuzzy in-context recall, MAD's form (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid
Architectures", `generate_fuzzy_in_context_recall_instance` of athms/mad-lab, multi_query=True).

In-context recall where a key is a run of 1 to max_key_tokens key tokens and a value a run of 1 to
max_value_tokens value tokens, each run of distinct tokens (MAD's permutations of its vocabulary), its length drawn
uniformly; the test set's keys are all max_key_tokens long, as MAD prompts them. Pairs follow each other until
fewer than 2 * (max_key_tokens + max_value_tokens) positions are left; then the last pair repeats the pair of one
earlier pair drawn uniformly, and padding `_` fills the sequence's start. Within an example a key keeps the value
it first had. Wherever a key comes back, the model says its value token by token: the targets are the value's
tokens, at the key's last token and at each value token but the last (each target the token that follows).

Token ids: values 0..num_values-1 (the answers), then keys, then `_`; as in MAD, vocab_size counts them all and
keys take the first half (rounded down) of all but `_`.
distance: the pair's first value position - the first value position of its key's last earlier pair - 1, the
same for every token of the value: each target lies that far back from the position that asks for it.
chance_accuracy = 1 / num_values.

Deviations from MAD: the pair repeated at the end is an ordinary earlier pair drawn at random (MAD draws a
probe pair apart and puts it at a random offset, where an ordinary pair would be); the sequence holds pairs
until 2 * (max_key_tokens + max_value_tokens) positions are left, where MAD stops at max_key_tokens +
max_value_tokens + the probe's length, so a little more padding; and those every task of the suite shares
(`experiments.tasks.mad`).

Purpose: recall where neither a key nor a value is one token: a model must hold and match runs of tokens, not
token identities. In MAD's own figure the Transformer stays at 0.08-0.28 here at width 128: not saturated.
Cost: about seq_len / 10 scored positions per sequence in training and seq_len / 30 in the test set (at the mad
profile: keys of 3 tokens seldom repeat); a batch is O(batch * seq_len * (num_keys + log seq_len)).

Profiles: quick seq_len 64, vocabulary 16 (7 keys, 8 values, `_`), keys and values of up to 3 tokens, fresh
examples every batch (dim 64, depth 2, heads 4; 1000 steps of 64, lr 1e-3); mad MAD's baseline: seq_len 128,
vocabulary 16, 12,800 training examples, the shared mad model and budget. MAD's ladder: vocab_size 32, 64, 128;
seq_len 256, 512, 1024; train_examples 6,400 down to 800.

Calibration: the quick profile's figures, dense and local, are in docs/calibration.md; the mad profile is not
measured yet (`make calibration TASK=fuzzy_in_context_recall PROFILE=mad`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks import mad
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Task
from experiments.tasks.in_context_recall import LADDER, check_sizes
from experiments.tasks.registry import register_task


def distinct_runs(vocabulary: int, length: int, shape: tuple[int, ...], generator: torch.Generator,
                  device: torch.device) -> torch.Tensor:
    """shape + (length,) tokens from 0..vocabulary-1, distinct along the last axis, in a uniformly random order."""
    scores = torch.rand(*shape, vocabulary, generator=generator, device=device)
    return scores.argsort(dim=-1)[..., :length]


@register_task("fuzzy_in_context_recall")
class FuzzyInContextRecall(Task):
    """Say, token by token, the value a key of several tokens had before (MAD's fuzzy in-context recall).

    Worked example: the test set of `create_task("fuzzy_in_context_recall", seq_len=24, test_size=1)`, whose keys
    are all 3 tokens long (training keys are 1 to 3).

        input:    _ _ _ _ k5 k2 k3 v1 k0 k1 k6 v6 v1 k2 k6 k4 v0 v7 v3 k0 k1 k6 v6 v1
        label:    v6 at 21, v1 at 22 (ids 6, 1): the value of k0 k1 k6, at its key's last token and its first
                  value token; every other position IGNORE
        distance: 21 - 11 = 22 - 12 = 10 (each target lies that far back from the position that asks for it)
        task.label_text(batch, 0) == "21: k6 -> v6; 22: v6 -> v1"
    """

    needs_causal = True  # each target is the next input
    mad_ladder = LADDER
    paper = f"{mad.PAPER} generate_fuzzy_in_context_recall_instance, multi_query"
    deviations = ("the pair repeated at the end is an earlier pair drawn at random (MAD's probe pair is drawn apart)",
                  "pairs stop 2 * (max_key_tokens + max_value_tokens) before the end, so a little more padding",
                  mad.NEXT_TOKEN_DEVIATION, *mad.SHARED_DEVIATIONS)

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: padding, then pairs of a key run and a value run")
        vocab_size: int = option(16, "tokens in all (MAD's count): `_`, and of the rest keys the first half, "
                                     "values the others")
        max_key_tokens: int = option(3, "a key is 1 to this many distinct key tokens (MAD's k_motif_size); the "
                                        "test set's keys have this many")
        max_value_tokens: int = option(3, "a value is 1 to this many distinct value tokens (MAD's v_motif_size)")
        train_examples: int = option(0, mad.TRAIN_EXAMPLES_HELP)
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")

        def __post_init__(self) -> None:
            check_sizes(self, reserved=1)
            symbols = self.vocab_size - 1
            require(1 <= self.max_key_tokens <= symbols // 2, "max_key_tokens", self.max_key_tokens,
                    f"an integer from 1 to the {symbols // 2} key tokens")
            require(1 <= self.max_value_tokens <= symbols - symbols // 2, "max_value_tokens", self.max_value_tokens,
                    f"an integer from 1 to the {symbols - symbols // 2} value tokens")
            longest = self.max_key_tokens + self.max_value_tokens
            require(self.seq_len > 2 * longest, "seq_len", self.seq_len,
                    f"an integer > 2 * (max_key_tokens + max_value_tokens) = {2 * longest}, room for a pair and "
                    f"its repeat")

    profiles = {
        "quick": mad.QUICK_PROFILE,
        "mad": mad.profile({"seq_len": 128, "vocab_size": 16}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.num_keys, self.num_values, self.vocabulary = mad.keys_and_values(options.vocab_size - 1, ["_"])
        self.num_classes = self.num_values
        self.chance_accuracy = 1 / self.num_values

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        return self._draw(batch_size, generator, device, longest_keys=False)

    def sample_test(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        return self._draw(batch_size, generator, device, longest_keys=True)

    def _draw(self, batch_size: int, generator: torch.Generator, device: torch.device, longest_keys: bool) -> Batch:
        key_tokens, value_tokens = self.options.max_key_tokens, self.options.max_value_tokens
        pairs, longest = self.seq_len // 2, key_tokens + value_tokens
        rows = torch.arange(batch_size, device=device)[:, None]  # (batch, 1)

        def lengths(most: int) -> torch.Tensor:  # (batch, pairs) uniform in 1..most
            return 1 + torch.randint(most, (batch_size, pairs), generator=generator, device=device)

        key_length = torch.full((batch_size, pairs), key_tokens, device=device) if longest_keys else lengths(key_tokens)
        keys = distinct_runs(self.num_keys, key_tokens, (batch_size, pairs), generator, device)  # (batch, pairs, K)
        value_length = lengths(value_tokens)
        values = distinct_runs(self.num_values, value_tokens, (batch_size, pairs), generator, device)
        # A key's identity: its length and tokens, in base num_keys + 1 with num_keys past its end.
        place = torch.arange(key_tokens, device=device)
        padded = torch.where(place < key_length[..., None], keys, self.num_keys)  # (batch, pairs, K)
        key_id = (padded * (self.num_keys + 1) ** place).sum(-1)  # (batch, pairs)
        _, first = mad.previous_occurrence(key_id)  # a key keeps the value it first had
        values, value_length = values[rows, first], value_length.gather(1, first)

        # Pairs while fewer than 2 * longest positions are taken, then one drawn among them, repeated.
        start = (key_length + value_length).cumsum(1) - (key_length + value_length)  # (batch, pairs)
        kept = start < self.seq_len - 2 * longest
        repeated = (torch.rand(batch_size, 1, generator=generator, device=device) * kept.sum(1, keepdim=True)).long()

        def append(tensor: torch.Tensor) -> torch.Tensor:  # (batch, pairs, ...) -> (batch, pairs + 1, ...)
            return torch.cat([tensor, tensor[rows, repeated]], 1)

        key_length, keys, value_length, values, key_id = map(append, (key_length, keys, value_length, values, key_id))
        kept = torch.cat([kept, torch.ones_like(kept[:, :1])], 1)  # (batch, pairs + 1)
        taken = torch.where(kept, key_length + value_length, 0)
        start = self.seq_len - taken.sum(1, keepdim=True) + taken.cumsum(1) - taken  # padding first
        value_start = start + key_length
        previous, _ = mad.previous_occurrence(torch.where(kept, key_id, -1))  # (batch, pairs + 1)

        inputs = torch.full((batch_size, self.seq_len), self.vocab_size - 1, dtype=torch.long, device=device)
        offset = torch.arange(longest, device=device)  # a pair's positions: key tokens, then value tokens
        in_key = offset < key_length[..., None]  # (batch, pairs + 1, longest)
        in_pair = kept[..., None] & (offset < (key_length + value_length)[..., None])
        value_place = (offset - key_length[..., None]).clamp(min=0, max=value_tokens - 1)
        tokens = torch.where(in_key, self.num_values + keys.gather(2, offset.clamp(max=key_tokens - 1).expand_as(
            in_key)), values.gather(2, value_place))  # (batch, pairs + 1, longest)
        positions = start[..., None] + offset
        batch_index = rows[..., None].expand_as(positions)
        inputs[batch_index[in_pair], positions[in_pair]] = tokens[in_pair]

        scored = (previous >= 0)[..., None] & (torch.arange(value_tokens, device=device) < value_length[..., None])
        asking = value_start[..., None] - 1 + torch.arange(value_tokens, device=device)  # (batch, pairs + 1, V)
        back = value_start - value_start.gather(1, previous.clamp(min=0)) - 1  # (batch, pairs + 1)
        at = batch_index[..., :value_tokens][scored], asking[scored]
        targets = torch.full_like(inputs, IGNORE)
        targets[at] = values[scored]
        distance = torch.full_like(inputs, -1)
        distance[at] = back[..., None].expand_as(asking)[scored]
        return Batch(inputs, targets, distance)
