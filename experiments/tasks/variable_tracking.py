"""RULER's variable tracking: a chain of assignments hidden among distractors, then every variable holding its value.

After RULER (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your Long-Context Language Models?",
NVIDIA/RULER's `scripts/data/synthetic/variable_tracking.py`, configuration `vt` of `scripts/synthetic.yaml`), with
token ids instead of text. A chain of num_hops hops assigns a number to a variable and passes it on: `x3 = n5`,
`x9 = x3`, `x1 = x9`, ... (RULER's "VAR X3 = 12345", "VAR X9 = VAR X3 "), num_hops + 1 statements of 3 tokens, each
in a distinct random 3-token slot of the context (a leading distractor or two where the context's length is not a
multiple of 3), the statements of a chain in chain order, those of different chains interleaved; the rest of the
context is distractor tokens `d<j>`. num_chains chains are hidden, with distinct variables and numbers. Then the
question: the number of the first chain and one marker `?` per variable of its chain; the r-th marker is answered by
the variable assigned at hop r (the first marker by the variable the number is assigned to). Only the markers are
scored.

Deviations from RULER: tokens, not text (the haystack is distractor tokens where RULER's noise is a repeated
sentence); RULER asks for all the variables in one question and scores a generated answer by string-match recall
(`string_match_all`: the fraction of the chain's variables that appear anywhere in the answer, in any order); here
each variable is one scored marker, asked in chain order, and accuracy is per marker, so a mean over markers is
RULER's recall where a model gives the variables in chain order. RULER's few-shot example before the question is
left out: a trained model learns the format.

Token ids: variables 0..num_variables-1 (the answers: num_classes = num_variables), then the numbers, the
distractors, `=` and `?`; vocab_size = num_variables + num_numbers + num_distractors + 2. distance: marker position
- position of its variable, where the statement assigning it begins.
chance_accuracy = 2 / (num_chains * (num_hops + 1)): what a model reaches that reads which variables the context
holds and how often, but not which follows which. Each variable but the last of a chain appears twice (assigned,
then read), the last once, so counts alone name the last marker's answer among the chains' last variables (1 in
num_chains) and every other marker's among the rest (1 in num_chains * num_hops); averaged over the num_hops + 1
markers that is 2 / (num_chains * (num_hops + 1)), 0.4 for RULER's one chain of 4 hops.

Needle depth and length: the test set is drawn like training batches, and accuracy is reported per distance bucket
(`num_buckets` equal-width buckets over 1..seq_len-1): how deep each hop's statement lies, read from the end;
`eval_lengths` adds other lengths.

Purpose: multi-hop tracing, RULER's proxy for coreference: each hop is a retrieval whose key is the previous hop's
answer, so a model must chain num_hops + 1 look-ups, not make one. Cost: num_hops + 1 scored positions per
sequence; generating a batch is O(batch * (seq_len + num_variables + num_numbers)).

Profiles: quick seq_len 128, 1 chain of 4 hops, 16 variables, 16 numbers, 16 distractors (dim 64, depth 2, heads 4;
1000 steps of 32 examples, lr 1e-3); standard seq_len 1024 (dim 128, depth 2, 2000 steps of 32); long seq_len 4096
(dim 128, depth 2, 3000 steps of 16 at lr 5e-4).

Calibration: in docs/calibration.md. At quick dense learns it well above chance and local, whose window of 32
cannot follow a chain across 128 tokens, stays below chance; standard and long are not measured yet. It is not in
the default suite: `attnlab run --task variable_tracking` or the `ruler` set runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Task
from experiments.tasks.haystack import distinct, distractor_haystack
from experiments.tasks.registry import register_task
from experiments.tasks.ruler_niah import RULER, needle_profiles

STATEMENT = 3  # tokens per assignment: the variable assigned, `=`, then the number or variable it takes


@register_task("variable_tracking")
class VariableTracking(Task):
    """RULER's vt: every variable a chain of 4 assignments passes the asked number to, in chain order.

    Worked example: the test set of `create_task("variable_tracking", seq_len=16, num_hops=2, num_distractors=4,
    test_size=1)`: x3 = n0, x14 = x3, x5 = x14 among distractors, then n0 and a marker per variable.

        input:    x3 = n0 d1 d3 d0 x14 = x3 x5 = x14 | n0 ? ? ?   (| marks the end of the context)
        label:    x3 at 13, x14 at 14, x5 at 15 (ids 3, 14, 5), in chain order; every other position IGNORE
        distance: 13 - 0 = 13, 14 - 6 = 8, 15 - 9 = 6 (back to where each variable is assigned)
        task.label_text(batch, 0) == "13: ? -> x3; 14: ? -> x14; 15: ? -> x5"
    """

    paper = f"{RULER}, vt"
    deviations = ("tokens, not text: each variable and number one token, and distractor tokens for the haystack where "
                  "RULER's noise is a repeated sentence",
                  "one scored marker per variable, asked in chain order, and accuracy per marker, where RULER scores "
                  "a generated answer by string-match recall of every variable in any order",
                  "no few-shot example before the question: a trained model learns the format")

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(128, "tokens per example: the context, then the asked number and its markers")
        num_hops: int = option(4, "assignments that pass the number on, after the one that assigns it (RULER's "
                                  "num_hops): num_hops + 1 variables to name")
        num_chains: int = option(1, "chains hidden in the context, each with its own number; the first is asked "
                                    "(RULER's num_chains)")
        num_variables: int = option(16, "size of the variable vocabulary, the answers (distinct within an example)")
        num_numbers: int = option(16, "size of the number vocabulary (each chain's number is distinct)")
        num_distractors: int = option(16, "size of the distractor vocabulary that fills the context")
        num_buckets: int = option(8, "equal-width distance buckets over 1..seq_len-1 that accuracy is reported in")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
        eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths (length generalisation)")

        @property
        def statements(self) -> int:
            """The assignments in the context: num_hops + 1 per chain."""
            return self.num_chains * (self.num_hops + 1)

        def __post_init__(self) -> None:
            require(self.num_hops >= 1, "num_hops", self.num_hops, "an integer >= 1")
            require(self.num_chains >= 1, "num_chains", self.num_chains, "an integer >= 1")
            room = STATEMENT * self.statements + self.num_hops + 2
            require(self.seq_len >= room, "seq_len", self.seq_len,
                    f"an integer >= {room}, room for {self.statements} assignments of {STATEMENT} tokens and the "
                    f"{self.num_hops + 2} tokens of the question")
            require(self.num_variables >= self.statements, "num_variables", self.num_variables,
                    f"an integer >= {self.statements}, the variables assigned, as they are distinct")
            require(self.num_numbers >= self.num_chains, "num_numbers", self.num_numbers,
                    f"an integer >= num_chains = {self.num_chains}, as each chain's number is distinct")
            require(self.num_distractors >= 1, "num_distractors", self.num_distractors, "an integer >= 1")
            require(self.num_buckets >= 1, "num_buckets", self.num_buckets, "an integer >= 1")
            require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")

    profiles = needle_profiles({})

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = ([f"x{variable}" for variable in range(options.num_variables)]
                           + [f"n{number}" for number in range(options.num_numbers)]
                           + [f"d{distractor}" for distractor in range(options.num_distractors)] + ["=", "?"])
        self.num_classes = options.num_variables
        self.chance_accuracy = 2 / options.statements

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        options, length = self.options, self.seq_len
        chains, hops = options.num_chains, options.num_hops
        context = length - (hops + 2)
        first_number, equals = options.num_variables, self.vocab_size - 2
        shape = (batch_size, chains, hops + 1)
        variable = distinct(batch_size, options.num_variables, options.statements, generator, device).view(shape)
        number = first_number + distinct(batch_size, options.num_numbers, chains, generator, device)  # (batch, chains)
        taken = torch.cat([number[..., None], variable[..., :-1]], -1)  # (batch, chains, hops + 1) what each takes
        slot = distinct(batch_size, context // STATEMENT, options.statements, generator, device).view(shape)
        start = context % STATEMENT + STATEMENT * slot.sort(-1).values  # (batch, chains, hops + 1) in chain order
        inputs = distractor_haystack(batch_size, length, first_number + options.num_numbers, options.num_distractors,
                                     generator, device)  # (batch, seq)
        start = start.flatten(1)  # (batch, statements)
        inputs.scatter_(1, start, variable.flatten(1)).scatter_(1, start + 1, equals)
        inputs.scatter_(1, start + 2, taken.flatten(1))

        marker = context + 1 + torch.arange(hops + 1, device=device)  # (hops + 1,)
        inputs[:, context] = number[:, 0]
        inputs[:, marker] = self.vocab_size - 1
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq)
        targets[:, marker] = variable[:, 0]
        distance = torch.full_like(inputs, -1)  # (batch, seq)
        distance[:, marker] = marker - start[:, : hops + 1]
        return Batch(inputs, targets, distance)
