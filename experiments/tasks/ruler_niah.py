"""RULER's needle-in-a-haystack variants: key-value needles hidden in a haystack, every value of the keys asked for.

After RULER (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your Long-Context Language Models?",
NVIDIA/RULER's `scripts/data/synthetic/niah.py` with the configurations of `scripts/synthetic.yaml`), with token ids
instead of text. A needle is two tokens, a key `k<i>` and its value `v<j>` (RULER's "One of the special magic numbers
for {key} is: {value}."). num_needle_keys keys are hidden, each in num_needle_values needles with distinct values,
at distinct random slots of the context: the context is cut into 2-token slots (a leading distractor where its
length is odd), so needles never overlap. The rest of the context is the haystack: distractor tokens `d<j>`
(`haystack` "distractors", RULER's noise and essay haystacks) or other key-value needles with keys and values of
their own (`haystack` "needles", RULER's niah_multikey_2). Then come the questions: num_queries of the hidden keys,
distinct and in random order, each followed by one marker `?` per value; the r-th marker after a key is answered by
the r-th value of that key in the context. Only the markers are scored.

The three registered tasks are RULER's configurations with their published counts as defaults:
    niah_multikey    haystack of needles, 1 key, 1 value, 1 query (niah_multikey_2; niah_multikey_3 is the
                     same with UUIDs for keys and values, which at one token per key and value it equals)
    niah_multivalue  haystack of distractors, 1 key with 4 values, 1 query (niah_multivalue)
    niah_multiquery  haystack of distractors, 4 keys with 1 value each, all 4 asked (niah_multiquery)

Deviations from RULER: tokens, not text: keys and values are single tokens, and the haystack is distractor tokens
where RULER's is Paul Graham's essays (multivalue and multiquery) or a repeated sentence (noise). RULER asks for
every value in one question and scores a generated answer by string-match recall (`string_match_all`: the
fraction of the expected values that appear anywhere in the answer, in any order); here each value is one scored
marker, asked in the order the values appear in the context, and accuracy is per marker, so a mean over markers
is RULER's recall where a model gives values in context order. RULER draws needle depths from 40 evenly spaced
percentages; here slots are uniform over the context. The keys and values of one example are distinct (RULER's
random words and 7-digit numbers almost always are).

Token ids: values 0..num_values-1 (the answers: num_classes = num_values), then the keys, the distractors and
`?`; vocab_size = num_values + num_keys + num_distractors + 1. distance: marker position - position of its value.
chance_accuracy = 1 / (values in the context): guessing among them, what a model that has learned the format but
cannot find the key's needles reaches (the haystack's values included where the haystack is needles).

Needle depth and length: the test set is drawn like training batches, so its needles lie uniformly over the
context, and accuracy is reported per distance bucket (`num_buckets` equal-width buckets over 1..seq_len-1): the
needle's depth read from the end, the nearest bucket the deepest needles; `eval_lengths` adds other lengths.

Purpose: retrieval of every needle of a key, or of several keys, rather than passkey's one token: multivalue asks
for several needles in their order, multiquery for several keys at once, and multikey finds one key among keys
that each look like the answer, so no distractor statistic separates the needle from its haystack. Cost:
num_queries * num_needle_values scored positions per sequence; generating a batch is O(batch * (seq_len +
num_keys + num_values)).

Profiles: quick seq_len 128 (multikey: 64, 32 keys and 32 values, as its haystack's needles all hold distinct
ones), 16 keys, 16 values, 16 distractors (dim 64, depth 2, heads 4; 1000 steps of 32 examples, lr 1e-3); standard
seq_len 1024 (multikey: 512 keys and values; dim 128, depth 2, 2000 steps of 32); long seq_len 4096 (multikey: 2048
keys and values; dim 128, depth 2, 3000 steps of 16 at lr 5e-4).

Calibration: in docs/calibration.md. At quick, dense and local both stay at chance on all three after their
1,000 steps (`not_discriminative`), so none is in the default suite there; standard and long are not measured yet
(`make calibration TASK=ruler PROFILE=standard` writes them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.haystack import distinct, distractor_haystack
from experiments.tasks.registry import register_task

NEEDLE = 2  # tokens per needle: its key, then its value
_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4}
_TRAIN = {"quick": {"steps": 1000, "batch_size": 32, "lr": 1e-3, "eval_every": 100},
          "standard": {"steps": 2000, "batch_size": 32, "lr": 1e-3, "eval_every": 250},
          "long": {"steps": 3000, "batch_size": 16, "lr": 5e-4, "eval_every": 500}}


@dataclass(frozen=True)
class NeedleOptions:
    seq_len: int = option(128, "tokens per example: the context, then each asked key and its markers")
    haystack: Literal["distractors", "needles"] = option(
        "distractors", "what fills the context around the needles: distractor tokens, or needles of other keys "
                       "(RULER's type_haystack noise or essay, and needle)")
    num_needle_keys: int = option(1, "keys hidden in the context (RULER's num_needle_k)")
    num_needle_values: int = option(1, "needles per hidden key, each with its own value (RULER's num_needle_v)")
    num_queries: int = option(1, "hidden keys asked for at the end, each once (RULER's num_needle_q)")
    num_keys: int = option(16, "size of the key vocabulary (the keys of one example are distinct)")
    num_values: int = option(16, "size of the value vocabulary, the answers (the values of one example are distinct)")
    num_distractors: int = option(16, "size of the distractor vocabulary (a needle haystack uses one only before "
                                      "the first needle of an odd-length context)")
    num_buckets: int = option(8, "equal-width distance buckets over 1..seq_len-1 that accuracy is reported in")
    test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
    eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths (length generalisation)")

    @property
    def tail(self) -> int:
        """Tokens after the context: each asked key and its num_needle_values markers."""
        return self.num_queries * (1 + self.num_needle_values)

    @property
    def slots(self) -> int:
        """The context's 2-token slots, each holding a needle or (in a distractor haystack) two distractors."""
        return (self.seq_len - self.tail) // NEEDLE

    @property
    def pairs(self) -> int:
        """The key-value needles in the context: the hidden keys', and in a needle haystack every other slot's."""
        return self.slots if self.haystack == "needles" else self.num_needle_keys * self.num_needle_values

    def __post_init__(self) -> None:
        require(self.num_needle_keys >= 1, "num_needle_keys", self.num_needle_keys, "an integer >= 1")
        require(self.num_needle_values >= 1, "num_needle_values", self.num_needle_values, "an integer >= 1")
        require(1 <= self.num_queries <= self.num_needle_keys, "num_queries", self.num_queries,
                f"an integer from 1 to num_needle_keys = {self.num_needle_keys}, as each hidden key is asked once")
        needles = self.num_needle_keys * self.num_needle_values
        require(self.slots >= needles, "seq_len", self.seq_len,
                f"an integer >= {self.tail + NEEDLE * needles}, room for {needles} needles of {NEEDLE} tokens "
                f"and the {self.tail} tokens of the questions")
        require(self.num_values >= self.pairs, "num_values", self.num_values,
                f"an integer >= {self.pairs}, the needles in the context, as their values are distinct")
        keys = self.num_needle_keys + self.pairs - needles
        require(self.num_keys >= keys, "num_keys", self.num_keys,
                f"an integer >= {keys}, the distinct keys in the context")
        require(self.num_distractors >= 1, "num_distractors", self.num_distractors, "an integer >= 1")
        require(self.num_buckets >= 1, "num_buckets", self.num_buckets, "an integer >= 1")
        require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")


def published(name: str, default: Any) -> Any:
    """NeedleOptions' field `name` with another default: a count of one task's published configuration."""
    (field,) = [field for field in dataclasses.fields(NeedleOptions) if field.name == name]
    return option(default, field.metadata["help"])


def needle_profiles(larger: dict[str, Any]) -> dict[str, Profile]:
    """quick at the Options defaults, standard and long at 1024 and 4096 tokens (with `larger`'s other options)."""
    return {"quick": Profile(options={}, model=_QUICK_MODEL, train=_TRAIN["quick"]),
            **{profile: Profile(options={"seq_len": length, "test_size": 512, **larger.get(profile, {})},
                                model=_LARGER_MODEL, train=_TRAIN[profile])
               for profile, length in (("standard", 1024), ("long", 4096))}}


RULER = "Hsieh et al. 2024, RULER (NVIDIA/RULER, scripts/synthetic.yaml)"
NEEDLE_DEVIATIONS = (
    "tokens, not text: each key and value one token, and distractor tokens for the haystack where RULER's is Paul "
    "Graham's essays or a repeated sentence",
    "one scored marker per value, asked in the order the values appear, and accuracy per marker, where RULER scores "
    "a generated answer by string-match recall of every value in any order",
    "needles at uniformly random 2-token slots, where RULER draws depths from 40 evenly spaced percentages, and the "
    "keys and values of one example distinct, as RULER's random words and 7-digit numbers almost always are",
)


class NeedleInAHaystack(Task):
    """Hidden key-value needles, then keys asked for with one marker per value; registered in three configurations."""

    not_discriminative = {"quick": "dense stays at chance after its 1,000 steps, as local does (docs/calibration.csv): "
                                   "the needle is not learnt at quick's budget; it runs when named"}

    deviations = NEEDLE_DEVIATIONS
    profiles = needle_profiles({})

    def __init__(self, options: NeedleOptions, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = ([f"v{value}" for value in range(options.num_values)]
                           + [f"k{key}" for key in range(options.num_keys)]
                           + [f"d{distractor}" for distractor in range(options.num_distractors)] + ["?"])
        self.num_classes = options.num_values
        self.chance_accuracy = 1 / options.pairs

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        options, length = self.options, self.seq_len
        hidden, per_key, queries = options.num_needle_keys, options.num_needle_values, options.num_queries
        needles, pairs, context = hidden * per_key, options.pairs, length - options.tail
        first_key = options.num_values
        # The needles: the hidden keys' (needle j holds key j // per_key), then the haystack's, one key each.
        keys = first_key + distinct(batch_size, options.num_keys, hidden + pairs - needles, generator, device)
        pair_key = torch.cat([keys[:, :hidden].repeat_interleave(per_key, 1), keys[:, hidden:]], 1)  # (batch, pairs)
        pair_value = distinct(batch_size, options.num_values, pairs, generator, device)  # (batch, pairs)
        slot = distinct(batch_size, options.slots, pairs, generator, device)  # (batch, pairs)
        key_position = context % NEEDLE + NEEDLE * slot  # (batch, pairs): an odd context leaves a distractor first
        inputs = distractor_haystack(batch_size, length, first_key + options.num_keys, options.num_distractors,
                                     generator, device)  # (batch, seq)
        inputs.scatter_(1, key_position, pair_key).scatter_(1, key_position + 1, pair_value)

        # Each hidden key's values in the order they appear, then those of the asked keys in the order asked.
        value_position = (key_position[:, :needles] + 1).view(batch_size, hidden, per_key)
        value_position, order = value_position.sort(-1)  # (batch, hidden, per_key)
        value = pair_value[:, :needles].view(batch_size, hidden, per_key).gather(-1, order)
        asked = distinct(batch_size, hidden, queries, generator, device)  # (batch, queries)
        per_asked = asked[..., None].expand(-1, -1, per_key)  # (batch, queries, per_key)
        answer, source = value.gather(1, per_asked).flatten(1), value_position.gather(1, per_asked).flatten(1)

        query_position = context + (1 + per_key) * torch.arange(queries, device=device)  # (queries,)
        marker = (query_position[:, None] + 1 + torch.arange(per_key, device=device)).flatten()  # (queries*per_key,)
        inputs[:, query_position] = keys[:, :hidden].gather(1, asked)
        inputs[:, marker] = self.vocab_size - 1
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq)
        targets[:, marker] = answer
        distance = torch.full_like(inputs, -1)  # (batch, seq)
        distance[:, marker] = marker - source
        return Batch(inputs, targets, distance)


@register_task("niah_multikey")
class MultiKeyNeedle(NeedleInAHaystack):
    """RULER's niah_multikey_2: the value of the one key asked, in a haystack of needles with other keys.

    Worked example: the test set of `create_task("niah_multikey", seq_len=12, num_keys=6, num_values=6,
    test_size=1)`: five needles, then the question.

        input:    k2 v0 k4 v4 k0 v2 k1 v3 k3 v5 | k0 ?   (| marks the end of the context)
        label:    v2 (id 2) at 11, the `?` after k0; every other position IGNORE
        distance: 11 - 5 = 6 (back to k0's value)
        task.label_text(batch, 0) == "11: ? -> v2"
    """

    paper = f"{RULER}, niah_multikey_2 and niah_multikey_3"
    deviations = (*NEEDLE_DEVIATIONS, "niah_multikey_3 differs from niah_multikey_2 only in writing keys and values "
                                      "as UUIDs, many tokens each; at one token per key and value they are one task")

    @dataclass(frozen=True)
    class Options(NeedleOptions):
        seq_len: int = published("seq_len", 64)
        haystack: Literal["distractors", "needles"] = published("haystack", "needles")
        num_keys: int = published("num_keys", 32)
        num_values: int = published("num_values", 32)
        num_distractors: int = published("num_distractors", 1)

    profiles = needle_profiles({"standard": {"num_keys": 512, "num_values": 512},
                         "long": {"num_keys": 2048, "num_values": 2048}})


@register_task("niah_multivalue")
class MultiValueNeedle(NeedleInAHaystack):
    """RULER's niah_multivalue: the 4 values of the one hidden key, in the order they appear, among distractors.

    Worked example: the test set of `create_task("niah_multivalue", seq_len=16, num_needle_values=2,
    num_distractors=4, test_size=1)`: k11's two needles among distractors, then k11 and a marker per value.

        input:    d1 d1 d3 d3 d1 k11 v5 d2 d1 d2 d1 k11 v12 | k11 ? ?   (| marks the end of the context)
        label:    v5 at 14, v12 at 15 (ids 5, 12), k11's values in the order they appear; elsewhere IGNORE
        distance: 14 - 6 = 8, 15 - 12 = 3
        task.label_text(batch, 0) == "14: ? -> v5; 15: ? -> v12"
    """

    paper = f"{RULER}, niah_multivalue"

    @dataclass(frozen=True)
    class Options(NeedleOptions):
        num_needle_values: int = published("num_needle_values", 4)


@register_task("niah_multiquery")
class MultiQueryNeedle(NeedleInAHaystack):
    """RULER's niah_multiquery: the value of each of the 4 hidden keys, all asked in random order, among distractors.

    Worked example: the test set of `create_task("niah_multiquery", seq_len=16, num_needle_keys=2, num_queries=2,
    num_distractors=4, test_size=1)`: two needles among distractors, then both keys asked, k14 first.

        input:    k13 v10 d0 d0 d3 d2 d2 d0 d0 d3 k14 v11 | k14 ? k13 ?   (| marks the end of the context)
        label:    v11 at 13, v10 at 15 (ids 11, 10); every other position IGNORE
        distance: 13 - 11 = 2, 15 - 1 = 14
        task.label_text(batch, 0) == "13: ? -> v11; 15: ? -> v10"
    """

    paper = f"{RULER}, niah_multiquery"

    @dataclass(frozen=True)
    class Options(NeedleOptions):
        num_needle_keys: int = published("num_needle_keys", 4)
        num_queries: int = published("num_queries", 4)
