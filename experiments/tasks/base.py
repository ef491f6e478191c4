"""The base of every task: token sequences whose labels depend on a token far back, and how far.

A task draws a `Batch` of (batch, seq) token ids. Only some positions are scored: there `targets` holds
the answer and `distance` how many positions back the evidence for it lies; everywhere else `targets` is
IGNORE and `distance` is -1, so accuracy can be read per distance. A task numbers its answer tokens
first, so a target is at once a token id and a class index: 0 <= target < num_classes <= vocab_size.

Held-out sets: `test_set` is the in-distribution test set, scored at every evaluation. A task may add
named splits drawn differently (`eval_splits`, e.g. flip-flop's sparse and dense instructions), and a task
with an `eval_lengths` option is also evaluated at those sequence lengths (length generalisation); both
come from `extra_test_sets` and are reported separately, never mixed into the main accuracy.

Seeds: training batches come from a generator the trainer seeds with the run seed, which must lie in
[0, MAX_TRAIN_SEED = 2**31) (`check_train_seed`: `train_generator` and the config apply it). The test set is
drawn on the CPU from `test_seed(name)` = TEST_SEED_OFFSET + crc32(name) mod 2**31, which lies in [2**31, 2**32)
and so is never a training seed, then moved to the device: the same examples on every call and every device.

Validation set: sweeps select hyperparameters on it, so the test set stays an untouched test set. It is
drawn like the test set (`sample_test`, `validation_size` examples, test_size unless a task says otherwise)
from `validation_seed(name)` = VALIDATION_SEED_OFFSET + crc32("validation/" + name) mod 2**31, which lies
in [2**32, 2**32 + 2**31) and so is neither a training seed nor an test seed.

Fixed training set: a task with a `train_examples` option above 0 (MAD's tasks, which train many epochs over a few
thousand examples) draws that many examples once, on the CPU, from `training_set_seed(name)` in [2**32 + 2**31,
2**33), above every other seed, so the same set for every run seed; each training batch then picks its examples
from it, uniformly with replacement, with the run's generator. With 0, every batch holds fresh examples.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

REPORT_BUCKETS = 8  # distance buckets of the accuracy report, for tasks without a num_buckets option
IGNORE = -100  # the target of a position that is not scored (cross_entropy's default ignore_index)
# Examples in a quick profile's test set (and so its validation set): enough that an accuracy's binomial 95%
# half-width, 1.96 * sqrt(p * (1 - p) / m), is at most 0.02 at any p (m >= 2401), rounded up to a multiple of 64.
QUICK_EVAL_SIZE = 2432
PROFILES = ("quick", "standard", "long")
# The profiles of a task that reads its data from files (`Task.data_source`): quick, a CPU-sized check that the
# files train, and lra, the Long Range Arena's published sizes and training budgets (docs/lra.md).
DATA_PROFILES = ("quick", "lra")
# The profile of a task of MAD's synthetic suite (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid
# Architectures"): its baseline task sizes, model and budget. A task sized after MAD alone has quick and mad; a task
# of the suite that attnlab already had (selective copying) has PROFILES and mad.
MAD_PROFILE = "mad"
MAX_TRAIN_SEED = 2**31  # training seeds lie in [0, MAX_TRAIN_SEED)
TEST_SEED_OFFSET = MAX_TRAIN_SEED  # test seeds lie in [TEST_SEED_OFFSET, 2**32), so never meet a training seed
VALIDATION_SEED_OFFSET = 2**32  # validation seeds lie in [2**32, 2**32 + 2**31): above every test seed
TRAINING_SET_SEED_OFFSET = VALIDATION_SEED_OFFSET + 2**31  # fixed training sets' seeds: above every other seed


def test_seed(name: str) -> int:
    """The seed of task `name`'s test set, in [2**31, 2**32): stable across processes (crc32, not hash)."""
    return TEST_SEED_OFFSET + zlib.crc32(name.encode()) % 2**31


def validation_seed(name: str) -> int:
    """The seed of task `name`'s validation set, in [2**32, 2**32 + 2**31): above every training and test seed,
    and salted, so the validation and test sets of one task are drawn from unrelated streams."""
    return VALIDATION_SEED_OFFSET + zlib.crc32(f"validation/{name}".encode()) % 2**31


def training_set_seed(name: str) -> int:
    """The seed of task `name`'s fixed training set (its `train_examples` option), in [2**32 + 2**31, 2**33)."""
    return TRAINING_SET_SEED_OFFSET + zlib.crc32(f"training set/{name}".encode()) % 2**31


def check_train_seed(seed: int) -> None:
    """The one rule for the seeds a user gives (a run's, a sample's): an integer in [0, MAX_TRAIN_SEED)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < MAX_TRAIN_SEED:
        raise ValueError(f"Training seed got {seed!r}; accepted: an integer from 0 to 2**31 - 1 "
                         f"(seeds from 2**31 up are kept for test sets).")


def train_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator on `device` seeded with a training seed, which must be in [0, MAX_TRAIN_SEED).

    Use: `task.batch(batch_size, generator, device)` with `generator = train_generator(run_seed, device)`.
    """
    check_train_seed(seed)
    return torch.Generator(device=device).manual_seed(seed)


def distance_buckets(max_distance: int, count: int) -> list[tuple[int, int]]:
    """Contiguous ranges [lo, hi] of near-equal width (differing by at most one) covering 1..max_distance.

    Distance d lies in bucket floor((d - 1) * count / max_distance). There are min(count, max_distance)
    buckets, so none is empty. The passkey test set fills these buckets evenly; score by them too.

        >>> distance_buckets(10, 4)
        [(1, 3), (4, 5), (6, 8), (9, 10)]
    """
    if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 1:
        raise ValueError(f"max_distance got {max_distance!r}; accepted: an integer >= 1.")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count got {count!r}; accepted: an integer >= 1.")
    count = min(count, max_distance)
    ceil = [-(-bucket * max_distance // count) for bucket in range(count + 1)]  # ceil(b * max_distance / count)
    return [(1 + ceil[bucket], ceil[bucket + 1]) for bucket in range(count)]


@dataclass(frozen=True)
class Batch:
    """Examples of one task, every tensor on one device."""

    inputs: torch.Tensor  # (batch, seq) long token ids
    targets: torch.Tensor  # (batch, seq) long: the answer's token id where scored, IGNORE elsewhere
    distance: torch.Tensor  # (batch, seq) long: positions back to the answer's evidence where scored, -1 elsewhere
    metadata: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (batch,) per-example extras

    @property
    def nbytes(self) -> int:
        """The bytes its tensors hold."""
        return sum(tensor.nbytes for tensor in (self.inputs, self.targets, self.distance, *self.metadata.values()))

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on `device`."""
        return Batch(self.inputs.to(device), self.targets.to(device), self.distance.to(device),
                     {name: values.to(device) for name, values in self.metadata.items()})


@dataclass(frozen=True)
class Profile:
    """One size of a task: option overrides (quick's are the Options defaults), training budget and model."""

    options: dict[str, Any]  # overrides of the Options defaults
    train: dict[str, Any]  # e.g. {"steps": 600, "batch_size": 32, "lr": 1e-3, "eval_every": 100}
    model: dict[str, Any]  # e.g. {"dim": 64, "depth": 2, "heads": 4}


class Task:
    """A long-range dependency task of fixed sizes; a subclass says how to sample it.

    A subclass declares `Options` (a frozen dataclass with at least `seq_len` and `test_size`), one
    `Profile` per name in PROFILES (a task of MAD's suite adds MAD_PROFILE; one sized after MAD alone has quick and
    MAD_PROFILE only), and in `__init__` its `vocabulary` (the name of each token id),
    `num_classes` and `chance_accuracy`; it implements `sample` and, when the test set is drawn
    differently from training batches, `sample_test`. Callers use `batch` and `test_set`.
    """

    name: ClassVar[str]  # set by register_task
    Options: ClassVar[type]
    profiles: ClassVar[dict[str, Profile]]
    eval_splits: ClassVar[tuple[str, ...]] = ()  # extra held-out splits, each drawn by `sample_split`
    # True where a later input gives a scored position's answer away, so a model that attends to later
    # positions (model.causal=false) could read it rather than work it out; such a config is refused.
    needs_causal: ClassVar[bool] = False
    # Whether an answer depends on the order of the inputs (the token after a trigger, the last write, nesting),
    # so that a model blind to order (bidirectional, without absolute positions, over a variant that does not
    # read positions itself: `Attention.order_aware`) cannot do the task, and such a config is refused. False
    # only where the inputs as a bag decide every answer (passkey: the one key among distractors).
    depends_on_order: ClassVar[bool] = True
    # The option that counts what a model must hold or sift through at once (MQAR's key-value pairs, the tokens
    # selective copying copies, Pathfinder's distractor paths): the benchmark's capacity stage trains the task at
    # multiples of it, so that a curve rather than a ceiling separates variants. None where no option counts such
    # a thing (a vocabulary's size or the sequence length is not one: the length axis covers length).
    capacity_option: ClassVar[str | None] = None
    # The task's place in the default suite (`experiments.tasks.DEFAULT_SUITE`, what `attnlab run` trains when no
    # task is named: the tasks whose quick profile is discriminative), or None where the suite leaves it out.
    suite_position: ClassVar[int | None] = None
    # Per profile, one sentence where a shortcut probe of the task's tests predicts its labels there without the
    # long-range dependency (what it reads, and how well): the task fails its control at that profile. The default
    # suite (quick) leaves out a task with a known shortcut at quick, and `attnlab list`, the benchmark page and the
    # docs say why. Empty where every probe stays near chance.
    known_shortcut: ClassVar[dict[str, str]] = {}
    # Per profile, one sentence where the task is not discriminative there: dense does not learn it clearly above
    # chance (by more than 0.10, the verdicts issue's rule) within the profile's budget, so every variant sits near
    # chance and none can be told apart. The default suite (quick) leaves out a task that is not discriminative at
    # quick; it still runs when named, and `attnlab list`, the benchmark page and the docs say why.
    not_discriminative: ClassVar[dict[str, str]] = {}
    # Where a task that reads its examples from files rather than generating them gets those files, one sentence;
    # None for a task that generates its data. Such a task has the DATA_PROFILES, is left out of `list_tasks()`
    # (`list_data_tasks()` names it), and reads nothing until it is built by name.
    data_source: ClassVar[str | None] = None
    # Where a task follows a published one: the paper (and configuration) it follows, and each way it departs from
    # it, one sentence each without the full stop; `attnlab list` shows both.
    paper: ClassVar[str | None] = None
    deviations: ClassVar[tuple[str, ...]] = ()
    # The separate sequences each example holds (two for a pair of documents compared, LRA's retrieval): the
    # model encodes each half of the sequence alone and classifies the pair (`experiments.run.model`).
    towers: ClassVar[int] = 1
    # True where the model must rebuild the scored positions from its state at the last position alone (MAD's
    # compression, after its AutoEncoder backbone): the model reads the sequence there, and a decoder gives every
    # position's logits from that one vector and the position (`experiments.run.model`).
    bottleneck: ClassVar[bool] = False
    # MAD's ladder of difficulty (its `configs/tasks/*.yml` changes): option -> the values MAD tries, each alone over
    # the mad profile's options. Empty for a task outside MAD's suite.
    mad_ladder: ClassVar[dict[str, tuple[Any, ...]]] = {}

    vocabulary: list[str]  # readable name of each token id
    num_classes: int  # answers are token ids 0..num_classes-1
    chance_accuracy: float  # accuracy of guessing uniformly among the plausible answers at a scored position

    def __init__(self, options: Any, profile: str) -> None:
        self.options = options
        self.profile = profile
        self.seq_len: int = options.seq_len
        self.test_size: int = options.test_size
        self.default_train: dict[str, Any] = dict(self.profiles[profile].train)
        self.default_model: dict[str, Any] = dict(self.profiles[profile].model)
        self._training_sets: dict[torch.device, Batch] = {}  # device -> the fixed training set there, once drawn

    @property
    def split_size(self) -> int:
        """Examples in each extra split (`eval_splits`): as many as in the test set (a task may say otherwise)."""
        return self.test_size

    @property
    def validation_size(self) -> int:
        """Examples in the validation set: as many as in the test set (a task may say otherwise)."""
        return self.test_size

    @property
    def train_examples(self) -> int:
        """The size of the fixed training set: the task's `train_examples` option, if it has one; 0 (fresh
        examples in every batch) otherwise."""
        return getattr(self.options, "train_examples", 0)

    @property
    def eval_lengths(self) -> tuple[int, ...]:
        """The extra sequence lengths the task is evaluated at: its `eval_lengths` option, if it has one."""
        return tuple(getattr(self.options, "eval_lengths", ()))

    @property
    def max_len(self) -> int:
        """The longest sequence the model will see: seq_len or the longest eval length."""
        return max((self.seq_len, *self.eval_lengths))

    def at_length(self, length: int) -> Task:
        """The same task with seq_len = `length` and every other option unchanged (the vocabulary too)."""
        options = dataclasses.replace(self.options, seq_len=length, eval_lengths=())
        return type(self)(options, self.profile)

    def report_buckets(self) -> list[tuple[int, int]]:
        """The dependency-distance buckets accuracy is reported in: the task's `num_buckets` option where
        it has one (passkey's test set fills exactly those), else REPORT_BUCKETS."""
        return distance_buckets(self.seq_len - 1, getattr(self.options, "num_buckets", REPORT_BUCKETS))

    @property
    def vocab_size(self) -> int:
        """Input vocabulary size (embedding rows)."""
        return len(self.vocabulary)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(profile={self.profile!r}, {self.options})"

    # ----------------------------------------------------------------------------------------------
    # What a task defines.

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        """`batch_size` training examples drawn with `generator` (which lives on `device`), vectorised."""
        raise NotImplementedError

    def sample_test(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        """The test set's examples; by default drawn like training examples."""
        return self.sample(batch_size, generator, device)

    def sample_split(self, split: str, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        """Examples of the extra eval split `split` (one of `eval_splits`)."""
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------------
    # What callers use.

    def batch(self, batch_size: int, generator: torch.Generator, device: torch.device | str) -> Batch:
        """`batch_size` training examples on `device`, drawn only from `generator`, which must live there."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size got {batch_size!r}; accepted: an integer >= 1.")
        device = torch.device(device)
        if generator.device.type != device.type:
            raise ValueError(f"The generator lives on {generator.device} but the batch was asked for on {device}; "
                             f"accepted: a generator on the batch's device, train_generator(seed, {str(device)!r}).")
        if not self.train_examples:
            return self.sample(batch_size, generator, device)
        chosen = torch.randint(self.train_examples, (batch_size,), generator=generator, device=device)  # (batch,)
        training_set = self.training_set(device)
        return Batch(training_set.inputs[chosen], training_set.targets[chosen], training_set.distance[chosen],
                     {name: values[chosen] for name, values in training_set.metadata.items()})

    def training_set(self, device: torch.device | str) -> Batch:
        """The fixed training set (`train_examples` > 0): drawn like training batches from `training_set_seed(name)`
        on the CPU, the same for every run seed, moved to `device` and kept there."""
        device = torch.device(device)
        if device not in self._training_sets:
            generator = torch.Generator().manual_seed(training_set_seed(self.name))
            drawn = self.sample(self.train_examples, generator, torch.device("cpu"))
            self._training_sets[device] = drawn.to(device)
        return self._training_sets[device]

    def test_set(self, device: torch.device | str) -> Batch:
        """The fixed held-out set: test_size examples from `test_seed(name)`, drawn on the CPU, moved to `device`."""
        return self.sample_test(self.test_size, self._test_generator(self.name), torch.device("cpu")).to(device)

    def validation_set(self, device: torch.device | str) -> Batch:
        """The fixed set sweeps select on: validation_size examples drawn like the test set, from
        `validation_seed(name)`, on the CPU, moved to `device`."""
        generator = torch.Generator().manual_seed(validation_seed(self.name))
        return self.sample_test(self.validation_size, generator, torch.device("cpu")).to(device)

    def extra_test_sets(self, device: torch.device | str) -> dict[str, Batch]:
        """The held-out sets scored beside `test_set`: each split of `eval_splits` under its name (of `split_size`
        examples), and the test set at each of `eval_lengths` under 'length=<n>' (of test_size), each fixed."""
        sets = {}
        for split in self.eval_splits:
            generator = self._test_generator(f"{self.name}/{split}")
            sets[split] = self.sample_split(split, self.split_size, generator, torch.device("cpu")).to(device)
        for length in self.eval_lengths:
            task = self.at_length(length)
            generator = self._test_generator(f"{self.name}@{length}")
            sets[f"length={length}"] = task.sample_test(self.test_size, generator, torch.device("cpu")).to(device)
        return sets

    @staticmethod
    def _test_generator(key: str) -> torch.Generator:
        return torch.Generator().manual_seed(test_seed(key))

    def decode(self, tokens: Sequence[int] | torch.Tensor) -> list[str]:
        """Readable names of token ids."""
        names = []
        for token in torch.as_tensor(tokens).tolist():
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"Token id {token!r} is outside task {self.name!r}'s vocabulary; "
                                 f"accepted: 0 to {self.vocab_size - 1}.")
            names.append(self.vocabulary[token])
        return names

    def _scored(self, batch: Batch, index: int) -> list[int]:
        return (batch.targets[index] != IGNORE).nonzero().flatten().tolist()

    def label_text(self, batch: Batch, index: int) -> str:
        """Example `index`'s labels as 'position: input token -> answer', e.g. '127: ? -> K7'."""
        positions = self._scored(batch, index)
        questions = self.decode(batch.inputs[index, positions])
        answers = self.decode(batch.targets[index, positions])
        return "; ".join(f"{position}: {question} -> {answer}"
                         for position, question, answer in zip(positions, questions, answers, strict=True))

    def save_images(self, batch: Batch, folder: str | Path, count: int) -> list[Path]:
        """Write the first `count` examples of `batch` as PNG images in `folder` (tasks whose inputs are images)."""
        raise ValueError(f"Task {self.name!r} has no images to save; accepted: an image task (pathfinder).")

    def text(self, batch: Batch, index: int) -> str:
        """Example `index` on one line, for `attnlab sample`: its decoded input, then its labels."""
        return f"{' '.join(self.decode(batch.inputs[index]))} -> {self.label_text(batch, index)}"

    def example(self, batch: Batch, index: int) -> dict[str, Any]:
        """Example `index` as plain Python: decoded input, label(s) and metadata with the distance(s).

        "label" and metadata "distance" are ints when the example has one scored position, else lists
        in position order.
        """
        positions = self._scored(batch, index)
        labels = batch.targets[index, positions].tolist()
        distances = batch.distance[index, positions].tolist()
        metadata = {name: values[index].item() for name, values in batch.metadata.items()}
        metadata["distance"] = distances[0] if len(distances) == 1 else distances
        return {
            "input": self.decode(batch.inputs[index]),
            "label": labels[0] if len(labels) == 1 else labels,
            "metadata": metadata,
        }
