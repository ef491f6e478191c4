"""Compression, MAD's form (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures",
`generate_compression_instance` and the AutoEncoder backbone of athms/mad-lab).

An example is seq_len - 1 tokens drawn uniformly from the data vocabulary, then the compression token `#`. The
model reads the sequence up to `#`, and a decoder must rebuild every token from the model's state at `#` alone
and the position asked for (`Task.bottleneck`): the targets are the tokens themselves, at their own positions.

Token ids: data tokens 0..vocab_size-2 (the answers), then `#`; vocab_size counts both, as in MAD.
distance: seq_len - 1 - the position, how far back from `#` the token to rebuild lies.
chance_accuracy = 1 / (vocab_size - 1).

Deviations from MAD: `#` is not scored (MAD scores it too, a free 1 / seq_len of its accuracy); the decoder is
two GELU layers of the model's width over the state at `#` plus sinusoidal positions, then the model's head,
as MAD's (whose norms are RMSNorm); and those every task of the suite shares (`experiments.tasks.mad`).

Purpose: how much of a sequence a model can pack into the one state it ends on, MAD's probe of a recurrent state's
capacity. In MAD's own figure the Transformer stays at 0.45-0.52 here at width 128: not saturated.
Cost: seq_len - 1 scored positions per sequence; a batch is O(batch * seq_len).

Profiles: quick seq_len 32, vocabulary 16, fresh examples every batch (dim 64, depth 2, heads 4; 1000 steps of
64, lr 1e-3); mad MAD's baseline: seq_len 32, vocabulary 16, 12,800 training examples, the shared mad model and
budget. MAD's ladder: vocab_size 32, 64, 128; seq_len 64, 128, 256; train_examples 6,400 down to 800.

Calibration: the quick profile's figures, dense and local, are in docs/calibration.md; the mad profile is not
measured yet (`make calibration TASK=compression PROFILE=mad`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks import mad
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Task
from experiments.tasks.in_context_recall import LADDER
from experiments.tasks.registry import register_task

BASELINE = {"seq_len": 32, "vocab_size": 16}


@register_task("compression")
class Compression(Task):
    """Rebuild every token from the model's state at the end alone (MAD's compression).

    Worked example: the test set of `create_task("compression", seq_len=6, test_size=1)`.

        input:    t3 t5 t2 t1 t4 #
        label:    t3, t5, t2, t1, t4 at 0-4 (ids 3, 5, 2, 1, 4); `#` IGNORE
        distance: 5, 4, 3, 2, 1 (back from `#`)
        task.label_text(batch, 0) == "0: t3 -> t3; 1: t5 -> t5; 2: t2 -> t2; 3: t1 -> t1; 4: t4 -> t4"
    """

    bottleneck = True
    paper = f"{mad.PAPER} generate_compression_instance and AutoEncoder"
    deviations = ("`#` is not scored (MAD scores it, a free 1 / seq_len)",
                  "the decoder's norms are LayerNorm, not RMSNorm", *mad.SHARED_DEVIATIONS)
    mad_ladder = {"vocab_size": LADDER["vocab_size"], "seq_len": (64, 128, 256),
                  "train_examples": LADDER["train_examples"]}

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(BASELINE["seq_len"], "tokens per example: seq_len - 1 data tokens, then `#`")
        vocab_size: int = option(BASELINE["vocab_size"], "tokens in all (MAD's count): the data tokens and `#`")
        train_examples: int = option(0, mad.TRAIN_EXAMPLES_HELP)
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")

        def __post_init__(self) -> None:
            require(self.seq_len >= 2, "seq_len", self.seq_len, "an integer >= 2, a data token and `#`")
            require(self.vocab_size >= 3, "vocab_size", self.vocab_size, "an integer >= 3, two data tokens and `#`")
            mad.check_counts(self)

    profiles = {
        "quick": mad.QUICK_PROFILE,
        "mad": mad.profile(BASELINE),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = [f"t{token}" for token in range(options.vocab_size - 1)] + ["#"]
        self.num_classes = options.vocab_size - 1
        self.chance_accuracy = 1 / self.num_classes

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        inputs = torch.randint(self.num_classes, (batch_size, self.seq_len), generator=generator, device=device)
        inputs[:, -1] = self.num_classes  # `#`
        targets = inputs.clone()
        targets[:, -1] = IGNORE
        distance = (self.seq_len - 1 - torch.arange(self.seq_len, device=device)).expand_as(inputs).clone()
        distance[:, -1] = -1
        return Batch(inputs, targets, distance)
