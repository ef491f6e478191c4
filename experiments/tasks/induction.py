"""Induction: a trigger token seen once, then again at the end, where the token that followed it is asked for.

The induction-head test of Olsson et al. 2022 ("In-context Learning and Induction Heads"), in the
synthetic associative-recall form of H3 (Fu et al. 2023), Hyena (Poli et al. 2023) and Zoology (Arora
et al. 2023): a sequence of tokens `t<k>` drawn uniformly from a vocabulary; the trigger `*` appears
once at a random position, followed by the answer; the final position holds `*` again and its target is
the answer, the token that followed the first `*`. Only the final position is scored. The answer is a
random token of the vocabulary like any other, so it can only be read off by finding the earlier `*`
and copying what came next: a previous-token head feeding an induction head, two layers of attention.

Token ids: tokens 0..num_tokens-1 (the answers: num_classes = num_tokens), then `*`; vocab_size =
num_tokens + 1. chance_accuracy = 1 / num_tokens.

Distances: final position - position of the answer. The first trigger's position is uniform over
0..seq_len-3, so the distance is uniform over 1..seq_len-2, in training and eval alike; metadata
`distance` holds it.

Length generalisation: `eval_lengths` evaluates the same task at other lengths (`task.at_length(L)`),
where the trigger is again uniform over the whole sequence, so at L > seq_len most answers lie farther
back than any seen in training and every position past seq_len is new. The quick profile trains at 32
and evaluates at 64 and 128 too. Its model has `"positions": "none"`: a learned position table has
untrained rows past seq_len (a failure by construction, honest but uninformative), and sinusoidal
positions past seq_len are vectors the model never saw; without absolute positions the causal mask and
the variant's own position terms (ALiBi, RoPE, a window) carry all position information, which is what a
length-generalisation comparison between variants should measure. Learned positions did not help in
distribution either: trained at 64 (1000 steps of 64, lr 1e-3), dense reached 0.641 with them and 0.566
without. Training at 32 rather than 64 is for the budget: with one scored position per sequence, dense
trained at 64 was still at 0.62-0.75 after 1000 steps (lr 1e-3 to 3e-3), so its longer-length accuracy
would mix under-training with failure to extrapolate; at 32 it is exact in distribution.

Purpose: the two-step circuit behind in-context learning, and whether it holds at lengths not trained
on. Cost: one scored position per sequence; generating a batch is O(batch * seq_len).

Profiles: quick seq_len 32, 16 tokens, eval lengths 64 and 128 (dim 64, depth 2, heads 4, no absolute
positions; 1000 steps of 128 examples, lr 3e-3); standard seq_len 512, 32 tokens, eval lengths 1024 and
2048 (dim 128, depth 2, 4000 steps of 64); long seq_len 4096, 64 tokens, eval length 8192 (dim 128, depth
2, 6000 steps of 16). Standard and long are sized like the other tasks' and not yet calibrated.

Calibration: the measured accuracies of each profile are in docs/calibration.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.registry import register_task

# No absolute positions: see "Length generalisation" above.
_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4, "positions": "none"}
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4, "positions": "none"}


@register_task("induction")
class Induction(Task):
    """Answer the final trigger with the token that followed its only earlier occurrence.

    Worked example: the test set of `create_task("induction", seq_len=12, num_tokens=4, test_size=1)`.

        input:    t1 t0 t3 t0 * t3 t1 t1 t1 t3 t0 *
        label:    t3 (id 3) at position 11, the final `*`: the token after the `*` at 4; every other position IGNORE
        distance: 11 - 5 = 6
        task.label_text(batch, 0) == "11: * -> t3"
    """

    suite_position = 3

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(32, "tokens per example: the trigger and its answer among random tokens, then the "
                                  "trigger again")
        num_tokens: int = option(16, "size of the token vocabulary, the answers; chance is 1/num_tokens")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
        eval_lengths: tuple[int, ...] = option((64, 128), "also evaluate at these sequence lengths "
                                                           "(length generalisation)")

        def __post_init__(self) -> None:
            require(self.num_tokens >= 2, "num_tokens", self.num_tokens, "an integer >= 2")
            require(self.seq_len >= 3, "seq_len", self.seq_len,
                    "an integer >= 3, room for the trigger, its answer and the final trigger")
            require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")

    profiles = {
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 1000, "batch_size": 128, "lr": 3e-3, "eval_every": 100}),
        "standard": Profile(options={"seq_len": 512, "num_tokens": 32, "eval_lengths": (1024, 2048),
                                     "test_size": 512},
                            model=_LARGER_MODEL,
                            train={"steps": 4000, "batch_size": 64, "lr": 1e-3, "eval_every": 250}),
        "long": Profile(options={"seq_len": 4096, "num_tokens": 64, "eval_lengths": (8192,), "test_size": 256},
                        model=_LARGER_MODEL,
                        train={"steps": 6000, "batch_size": 16, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = [f"t{token}" for token in range(options.num_tokens)] + ["*"]
        self.num_classes = options.num_tokens
        self.chance_accuracy = 1 / options.num_tokens

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        length, trigger = self.seq_len, self.options.num_tokens
        inputs = torch.randint(self.options.num_tokens, (batch_size, length), generator=generator,
                               device=device)  # (batch, seq)
        # The first trigger, uniform over 0..seq_len-3: its answer comes before the final trigger.
        first = torch.randint(length - 2, (batch_size, 1), generator=generator, device=device)  # (batch, 1)
        inputs.scatter_(1, first, trigger)
        inputs[:, -1] = trigger
        answer = inputs.gather(1, first + 1)  # (batch, 1): the token after the first trigger
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq)
        targets[:, -1:] = answer
        distance = length - 2 - first  # (batch, 1): from the answer at first + 1 to the end
        distances = torch.full_like(inputs, -1)  # (batch, seq)
        distances[:, -1:] = distance
        return Batch(inputs, targets, distances, {"distance": distance[:, 0]})
