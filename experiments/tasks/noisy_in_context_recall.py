"""Noisy in-context recall, MAD's form (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid
Architectures", `generate_noisy_in_context_recall_instance` of athms/mad-lab, multi_query=True).

In-context recall (`experiments.tasks.in_context_recall`, whose sampler this is) where each pair but the last,
and one pair drawn before it, is with probability frac_noise two tokens drawn uniformly from a noise vocabulary
instead: the model must recall across the noise and learn to ignore it. Noise positions are never scored.

Token ids: values 0..num_values-1 (the answers), then keys, then the noise_vocab_size noise tokens; vocab_size
counts them all, as in MAD (its ladder's 48, 80 and 144 are 32, 64 and 128 plus 16 noise tokens).
distance: the key's position - the position of its value where the key last came before, >= 1.
chance_accuracy = 1 / num_values.

Deviations from MAD: in-context recall's (the inputs hold all seq_len tokens; the forced pair lies before the
last) and those every task of the suite shares (`experiments.tasks.mad`).

Purpose: recall whose context is diluted by tokens that carry nothing, which a model that mixes every token into
one state must learn to keep out. Cost: as in-context recall's, fewer positions scored.

Profiles: quick seq_len 64, vocabulary 32 of which 16 noise tokens, frac_noise 0.2, fresh examples every batch
(dim 64, depth 2, heads 4; 1000 steps of 64, lr 1e-3); mad MAD's baseline: seq_len 128, vocabulary 32 with 16
noise tokens, frac_noise 0.2, 12,800 training examples, the shared mad model and budget. MAD's ladder:
vocab_size 48, 80, 144; seq_len 256, 512, 1024; train_examples 6,400 down to 800; frac_noise 0.4, 0.6, 0.8.

Calibration: the quick profile's figures, dense and local, are in docs/calibration.md; the mad profile is not
measured yet (`make calibration TASK=noisy_in_context_recall PROFILE=mad`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from common.options import option, require
from experiments.tasks import mad
from experiments.tasks.base import QUICK_EVAL_SIZE
from experiments.tasks.in_context_recall import LADDER, InContextRecall, check_sizes
from experiments.tasks.registry import register_task

BASELINE = {"vocab_size": 32, "noise_vocab_size": 16, "frac_noise": 0.2}


@register_task("noisy_in_context_recall")
class NoisyInContextRecall(InContextRecall):
    """Say the value a key had before, among key-value pairs and pairs of noise (MAD's noisy in-context recall).

    Worked example: the test set of `create_task("noisy_in_context_recall", seq_len=16, frac_noise=0.5,
    test_size=1)`.

        input:    k4 v4 k4 v4 k7 v4 k3 v0 k4 v4 k7 v4 n8 n4 k4 v4
        label:    v4 at 2, 8, 10 and 14 (id 4); every other position IGNORE, the noise pair n8 n4 too
        distance: 2 - 1 = 1, 8 - 3 = 5, 10 - 5 = 5, 14 - 9 = 5 (back to the value where the key last came)
        task.label_text(batch, 0) == "2: k4 -> v4; 8: k4 -> v4; 10: k7 -> v4; 14: k4 -> v4"
    """

    paper = f"{mad.PAPER} generate_noisy_in_context_recall_instance, multi_query"
    mad_ladder = {"vocab_size": (48, 80, 144), **{name: LADDER[name] for name in ("seq_len", "train_examples")},
                  "frac_noise": (0.4, 0.6, 0.8)}

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: seq_len / 2 pairs, each a key and its value or two noise tokens")
        vocab_size: int = option(BASELINE["vocab_size"], "tokens in all (MAD's count): the noise tokens, and of the "
                                                         "rest keys the first half, values the others")
        noise_vocab_size: int = option(BASELINE["noise_vocab_size"], "noise tokens, drawn uniformly for a noise pair")
        frac_noise: float = option(BASELINE["frac_noise"], "probability that a pair is noise (never the last pair, "
                                                           "nor one pair drawn before it)")
        train_examples: int = option(0, mad.TRAIN_EXAMPLES_HELP)
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")

        def __post_init__(self) -> None:
            require(self.noise_vocab_size >= 1, "noise_vocab_size", self.noise_vocab_size, "an integer >= 1")
            require(math.isfinite(self.frac_noise) and 0 <= self.frac_noise < 1, "frac_noise", self.frac_noise,
                    "a number from 0 up to (not including) 1")
            check_sizes(self, reserved=self.noise_vocab_size)

    profiles = {
        "quick": mad.QUICK_PROFILE,
        "mad": mad.profile({"seq_len": 128, **BASELINE}),
    }
