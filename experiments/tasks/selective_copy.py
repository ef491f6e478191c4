"""Selective copying: a few data tokens scattered among noise, copied out in order after the noise.

The selective copying task of Gu & Dao 2023 ("Mamba: Linear-Time Sequence Modeling with Selective State
Spaces", section 3.1 and appendix E.1: sequence length 4096, 16 tokens to copy, vocabulary 16), whose
generator is the S4 repository's `copying.py` with variable=True; this is that layout, drawn vectorised.
With C = seq_len - num_tokens, the first C positions hold num_tokens data tokens `t<k>` at random
distinct positions (drawn uniformly, kept in order of appearance), every other one of them the noise
token `.`; the last num_tokens positions hold the marker `?`. At the j-th marker (position C + j) the
target is the j-th data token in order of appearance; every other position is IGNORE. Data tokens are
drawn uniformly and independently, so they may repeat.

Token ids: data tokens 0..num_data_tokens-1 (the answers: num_classes = num_data_tokens), then `.`, then
`?`; vocab_size = num_data_tokens + 2. chance_accuracy = 1 / num_data_tokens.

Distances: marker position - position of the data token it copies, >= 1. As the j-th source sits at
least j positions after the first, distance falls (weakly) from the first marker to the last, so the
largest is the first marker's: metadata `distance` holds it and `span` the distance from the first data
token to the last (0 with one token), in training batches and the test set alike.

Purpose: content-aware selection with counting. The data tokens are not at fixed offsets (the plain
copying task's, which a convolution or a position bias solves) and must be told from noise by content,
then put in order. Gu & Dao found that time-invariant models (S4, H3, Hyena) fall short here while
Mamba's input-dependent selection solves it; attention can look a source up by content, and a window
variant only when the source lies within its reach of the marker. Cost: num_tokens scored positions per
sequence; generating a batch is O(batch * seq_len * log seq_len) (the positions come from sorting random
scores).

Profiles: quick seq_len 64, 4 tokens to copy from 8 data tokens (dim 64, depth 2, heads 4; 1000 steps of
64 examples, lr 1e-3); standard seq_len 1024, 16 tokens from 16 (dim 128, depth 2, 4000 steps of 64);
long seq_len 4096, 16 tokens from 16, the paper's length and number of tokens (dim 128, depth 2, 6000
steps of 16). Standard and long are sized like the other tasks' and not yet calibrated. mad is MAD's baseline of
selective copying (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures", athms/mad-lab's
`generate_selective_copying_instance`): seq_len 256, 16 tokens to copy from 14 data tokens (MAD's vocabulary of 16
counts its two special tokens), a fixed set of 12,800 training examples, and the model and budget every task of
MAD's suite shares (`experiments.tasks.mad`). MAD's ladder: num_data_tokens 30, 62, 126 (its vocabularies of 32,
64, 128); seq_len 512, 1024; train_examples 6,400 down to 800; num_tokens 32, 64, 96. Deviations from MAD's
layout: the tokens to copy are asked for by num_tokens markers `?`, where MAD puts one copy token and then
num_tokens blanks (the same noise token as in the content) at which the targets lie; its blanks fall only before
data tokens (np.insert at indices below num_tokens), so its content ends on a data token, where here the data
tokens lie anywhere in the content; and those every task of MAD's suite shares.

Calibration: the measured accuracies of each profile are in docs/calibration.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks import mad
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.registry import register_task

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4}


@register_task("selective_copy")
class SelectiveCopy(Task):
    """Copy out, in order, the data tokens scattered among noise, one per marker at the end.

    Worked example: the test set of `create_task("selective_copy", seq_len=12, num_tokens=3, test_size=1)`.

        input:    t5 t1 . . . . . t5 . ? ? ?
        label:    t5, t1, t5 (ids 5, 1, 5) at the markers 9, 10, 11; every other position IGNORE
        distance: 9 - 0 = 9, 10 - 1 = 9, 11 - 7 = 4 (metadata: distance 9, span 7 - 0 = 7)
        task.label_text(batch, 0) == "9: ? -> t5; 10: ? -> t1; 11: ? -> t5"
    """

    capacity_option = "num_tokens"  # more tokens to hold and put in order (the Mamba paper's 16 at long)
    suite_position = 2
    paper = (f"Gu & Dao 2023, \"Mamba\", section 3.1 (S4's copying.py, variable=True); its profile mad follows "
             f"{mad.PAPER} generate_selective_copying_instance")
    deviations = ("at profile mad, markers `?` ask for the tokens where MAD has one copy token and then blanks",
                  "at profile mad, the data tokens lie anywhere in the content, where MAD's content ends on one",
                  *(f"at profile mad, {deviation}" for deviation in mad.SHARED_DEVIATIONS))
    mad_ladder = {"num_data_tokens": (30, 62, 126), "seq_len": (512, 1024), "train_examples": (6400, 3200, 1600, 800),
                  "num_tokens": (32, 64, 96)}

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: the data tokens among noise, then one marker per data token")
        num_tokens: int = option(4, "data tokens to copy, each asked for by one marker at the end")
        num_data_tokens: int = option(8, "size of the data vocabulary, the answers; chance is 1/num_data_tokens")
        train_examples: int = option(0, mad.TRAIN_EXAMPLES_HELP)
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
        eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths (length generalisation)")

        def __post_init__(self) -> None:
            require(self.num_tokens >= 1, "num_tokens", self.num_tokens, "an integer >= 1")
            require(self.num_data_tokens >= 2, "num_data_tokens", self.num_data_tokens, "an integer >= 2")
            require(self.seq_len >= 2 * self.num_tokens, "seq_len", self.seq_len,
                    f"an integer >= 2 * num_tokens = {2 * self.num_tokens}, room for the data tokens and a marker "
                    f"for each")
            mad.check_counts(self)

    profiles = {
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 1000, "batch_size": 64, "lr": 1e-3, "eval_every": 100}),
        "standard": Profile(options={"seq_len": 1024, "num_tokens": 16, "num_data_tokens": 16, "test_size": 512},
                            model=_LARGER_MODEL,
                            train={"steps": 4000, "batch_size": 64, "lr": 1e-3, "eval_every": 250}),
        "long": Profile(options={"seq_len": 4096, "num_tokens": 16, "num_data_tokens": 16, "test_size": 256},
                        model=_LARGER_MODEL,
                        train={"steps": 6000, "batch_size": 16, "lr": 5e-4, "eval_every": 500}),
        "mad": mad.profile({"seq_len": 256, "num_tokens": 16, "num_data_tokens": 14}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = [f"t{token}" for token in range(options.num_data_tokens)] + [".", "?"]
        self.num_classes = options.num_data_tokens
        self.chance_accuracy = 1 / options.num_data_tokens

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        options, length = self.options, self.seq_len
        copies, content = options.num_tokens, self.seq_len - options.num_tokens
        noise, marker = options.num_data_tokens, options.num_data_tokens + 1

        # Distinct source positions in order of appearance: the first num_tokens of a random permutation
        # of the content positions, sorted.
        scores = torch.rand(batch_size, content, generator=generator, device=device)  # (batch, content)
        source = scores.argsort(dim=1)[:, :copies].sort(dim=1).values  # (batch, copies)
        data = torch.randint(options.num_data_tokens, (batch_size, copies), generator=generator,
                             device=device)  # (batch, copies)
        query = torch.arange(content, length, device=device).expand(batch_size, copies)  # (batch, copies)

        inputs = torch.full((batch_size, length), noise, dtype=torch.long, device=device)  # (batch, seq)
        inputs.scatter_(1, source, data)
        inputs[:, content:] = marker
        targets = torch.full_like(inputs, IGNORE).scatter_(1, query, data)  # (batch, seq)
        distance = torch.full_like(inputs, -1).scatter_(1, query, query - source)  # (batch, seq)
        metadata = {"distance": content - source[:, 0], "span": source[:, -1] - source[:, 0]}
        return Batch(inputs, targets, distance, metadata)
