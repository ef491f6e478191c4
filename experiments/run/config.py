"""Typed run configuration: frozen dataclasses, resolved from a profile and `--set section.field=value`.

A run's config is fully resolved before anything trains (profile defaults, then the user's overrides,
then every variant and task option filled in) and saved with the run as `config.json`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

import variants
from common.memory import check_fits
from common.options import OptionError, build_options, closest, format_value, option, parse_value, require
from experiments import tasks
from experiments.run import trackers
from experiments.tasks import presets as task_presets
from variants import presets

SECTIONS = ("variant", "task", "model", "train")


@dataclass(frozen=True)
class ModelConfig:
    dim: int = option(64, "model width")
    depth: int = option(2, "number of Transformer blocks")
    heads: int = option(4, "attention heads")
    head_dim: int | None = option(None, "width of each head's q, k and v; none: dim / heads")
    mlp_ratio: int = option(4, "MLP hidden width / dim")
    positions: Literal["learned", "sinusoidal", "none"] = option(
        "learned", "absolute position embedding: learned, sinusoidal (Vaswani et al. 2017), or none (NoPE, "
        "Kazemnejad et al. 2023: under a causal mask the mask alone carries order)")
    causal: bool = option(True, "decoder-style attention: position i sees positions <= i")

    def __post_init__(self) -> None:
        for name in ("dim", "depth", "heads", "mlp_ratio"):
            require(getattr(self, name) >= 1, name, getattr(self, name), "an integer >= 1")
        require(self.head_dim is None or self.head_dim >= 1, "head_dim", self.head_dim, "none or an integer >= 1")
        if self.head_dim is None:
            require(self.dim % self.heads == 0, "dim", self.dim, f"a multiple of heads = {self.heads}, or a head_dim")

    @property
    def attention_head_dim(self) -> int:
        """Each head's width: `head_dim`, or dim / heads when that is none."""
        return self.head_dim or self.dim // self.heads


@dataclass(frozen=True)
class TrainConfig:
    steps: int = option(600, "optimiser steps")
    batch_size: int = option(32, "examples per step")
    lr: float = option(1e-3, "peak learning rate (AdamW)")
    weight_decay: float = option(0.01, "AdamW weight decay")
    warmup_steps: int = option(50, "linear warm-up steps before the cosine decay")
    min_lr_ratio: float = option(0.1, "final learning rate / peak")
    grad_clip: float = option(1.0, "clip the gradient norm to this (0: no clipping)")
    eval_every: int = option(100, "evaluate every this many steps (and at the end)")
    interim_test: bool = option(
        True, "evaluations before the last read the test set and the extra held-out sets too (learning curves on "
              "the test set); false: the last evaluation only (experiments.run.evaluation)")
    interim_validation: int | None = option(
        None, "evaluations before the last read this many validation examples, evenly spaced through the set (what "
              "the target and a sweep's pruning read); none: all of them. The last reads all of them")
    target_accuracy: float | None = option(
        None, "stop at the first evaluation whose validation accuracy reaches this (the step and wall time are "
              "recorded); none: train every step")
    checkpoint_every: int = option(100, "checkpoint every this many steps (and at the end)")
    log_every: int = option(10, "log training metrics every this many steps")
    precision: Literal["auto", "float32", "bf16"] = option(
        "auto", "bf16: autocast with float32 master weights (CPU autocast on CPU); auto: bf16 on cuda, else float32")
    compile: bool = option(False, "torch.compile the model for the training steps")
    attention_stats: bool = option(
        False, "at every evaluation and before the first step, record attention statistics per layer and head "
               "(entropy, saturation, logit spread, W_q/W_k gradient norms; experiments.run.attention_stats)")
    tracker: tuple[Literal["wandb", "tensorboard"], ...] | None = option(
        None, "also log the run to wandb, tensorboard or both (wandb,tensorboard), each an extra to install "
              "(experiments.run.trackers); none: the run folder only")

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_every", "checkpoint_every", "log_every"):
            require(getattr(self, name) >= 1, name, getattr(self, name), "an integer >= 1")
        require(self.lr > 0, "lr", self.lr, "a number > 0")
        require(self.weight_decay >= 0, "weight_decay", self.weight_decay, "a number >= 0")
        require(self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "an integer >= 0")
        require(0 <= self.min_lr_ratio <= 1, "min_lr_ratio", self.min_lr_ratio, "a number from 0 to 1")
        require(self.grad_clip >= 0, "grad_clip", self.grad_clip, "a number >= 0")
        require(self.interim_validation is None or self.interim_validation >= 1, "interim_validation",
                self.interim_validation, "none or an integer >= 1")
        require(self.target_accuracy is None or 0 < self.target_accuracy <= 1, "target_accuracy",
                self.target_accuracy, "none or a number in (0, 1]")
        trackers.check_available(self.tracker)


@dataclass(frozen=True)
class RunConfig:
    variant: str
    task: str
    profile: str
    seed: int
    device: str
    kernel: str
    variant_options: Any  # the variant's (or baseline's) typed Options, every option filled in
    task_options: Any  # the task's typed Options, every option filled in
    model: ModelConfig
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data (the options dataclasses as dicts): config.json's content."""
        return dataclasses.asdict(self)


def parse_sets(assignments: list[str]) -> dict[str, dict[str, Any]]:
    """['train.lr=3e-4', 'variant.window=64'] -> {'train': {'lr': 0.0003}, 'variant': {'window': 64}, ...}."""
    overrides: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise OptionError(f"--set {assignment!r} is malformed; accepted: section.field=value, "
                              f"with section one of {', '.join(SECTIONS)}.")
        if section not in overrides:
            raise OptionError(f"--set {assignment!r} names section {section!r}{closest(section, SECTIONS)}; "
                              f"accepted: {', '.join(SECTIONS)}.")
        overrides[section][name] = parse_value(text)
    return overrides


def _for_listed(overrides: dict[str, dict[str, Any]], section: str, name: str,
                fields: dict[str, set[str]]) -> dict[str, dict[str, Any]]:
    """The overrides for `name` of a list whose option names are `fields`: `section.X` goes to the listed
    names that have option X, and is an error when none of them has it."""
    known = set().union(*fields.values())
    for key in overrides[section]:
        if key not in known:
            raise OptionError(f"--set {section}.{key} matches no option of {', '.join(map(repr, fields))}"
                              f"{closest(key, known)}; their options are: {', '.join(sorted(known)) or 'none'}.")
    mine = {key: value for key, value in overrides[section].items() if key in fields[name]}
    return {**overrides, section: mine}


def for_variant(overrides: dict[str, dict[str, Any]], name: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """The overrides for variant `name` of a list: `variant.X` goes to the listed variants that have option X,
    and is an error when none of them has it."""
    return _for_listed(overrides, "variant", name, {
        listed: {item.name for item in dataclasses.fields(variants.variant_class(presets.base(listed)).Options)}
        for listed in names})


def for_task(overrides: dict[str, dict[str, Any]], name: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """The overrides for task `name` of a list: `task.X` goes to the listed tasks that have option X, and is an
    error when none of them has it."""
    return _for_listed(overrides, "task", name, {
        listed: {item.name for item in dataclasses.fields(tasks.task_class(task_presets.base(listed)).Options)}
        for listed in names})


class Incompatible(OptionError):
    """A variant and a task (or model setting) that cannot run together by construction: a suite skips the
    cell with this sentence as its reason, where a single run refuses."""


def check_model_fits_task(model: ModelConfig, task: tasks.Task) -> None:
    """Refuse, in one sentence, a model that cannot do the task by construction: learned positions asked to
    reach lengths they were never trained at, or non-causal attention on a task whose later inputs give the
    answers away."""
    if model.positions == "learned" and task.max_len > task.seq_len:
        raise OptionError(f"model.positions 'learned' cannot represent eval length {task.max_len} of task "
                          f"{task.name!r}, past the training length {task.seq_len} (those rows of the table never "
                          "receive a gradient); accepted: --set model.positions=none or model.positions=sinusoidal, "
                          f"or eval lengths up to {task.seq_len}.")
    if task.needs_causal and not model.causal:
        raise Incompatible(f"model.causal false lets task {task.name!r} read each answer from a later input; "
                          "accepted: model.causal=true.")


def resolve(*, variant: str, task: str, profile: str, seed: int, device: str, kernel: str = "auto",
            overrides: dict[str, dict[str, Any]] | None = None, trains_here: bool = True) -> RunConfig:
    """Profile defaults, then overrides, then every option of the variant and the task filled in. `variant` is a
    name or a preset (`relative:kind=alibi`, `variants.presets`): the config holds the name and the options.
    `task` likewise is a name or a preset (`mqar:num_pairs=16`, `experiments.tasks.presets`).
    `trains_here`: the run is to train in this environment, so its model must fit the device's memory and its
    trackers must be able to start here; the analysis of a saved run passes False (a run trained on a larger GPU, or
    tracked online elsewhere, still reads on a laptop without a W&B key)."""
    overrides = overrides or {section: {} for section in SECTIONS}
    variant, variant_values = presets.with_preset(variant, overrides["variant"])  # a preset: its options fixed
    variants.check_kernel_name(variant, kernel)
    tasks.check_train_seed(seed)
    task, task_values = task_presets.with_preset(task, overrides["task"])  # a preset: its options fixed
    task_obj = tasks.create_task(task, profile=profile, **task_values)
    model = build_options(ModelConfig, "Config section 'model'",
                          {**task_obj.default_model, **variant_defaults(variant), **overrides["model"]})
    check_variant_fits_model(variant, model, task_obj)
    check_model_fits_task(model, task_obj)
    train = build_options(TrainConfig, "Config section 'train'", {**task_obj.default_train, **overrides["train"]})
    if trains_here:  # what this environment must have to train it: the memory, and trackers that can start
        check_model_fits_memory(model, task_obj, device)
        try:
            trackers.check_usable(train.tracker)
        except OptionError as error:
            raise OptionError(f"Config section 'train' {error}") from None
    if variants.is_baseline(variant):
        refuse_attention_settings(variant, model, train, task_obj.default_model)
    return RunConfig(
        variant=variant, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
        variant_options=variants.options_of(variant, variant_values, head_dim=model.attention_head_dim),
        task_options=task_obj.options, model=model, train=train,
    )


# What training holds per parameter: the float32 weight, its gradient and AdamW's two moments.
TRAINING_BYTES_PER_PARAMETER = 16


def check_model_fits_memory(model: ModelConfig, task: tasks.Task, device: str) -> None:
    """Refuse, in one sentence and before anything is allocated, a model whose training cannot fit in all the
    memory of `device`, counted from below: the parameters every variant's model has (the token embedding, learned
    positions, each block's MLP; the attention or token mixer beside it only adds to them)."""
    positions = task.max_len * model.dim if model.positions == "learned" else 0
    parameters = task.vocab_size * model.dim + positions + model.depth * 2 * model.mlp_ratio * model.dim**2
    check_fits(f"A model of at least {parameters:,} parameters (model.dim={model.dim}, model.depth={model.depth}, "
               f"model.mlp_ratio={model.mlp_ratio}) on task {task.name!r}, trained with AdamW,",
               parameters * TRAINING_BYTES_PER_PARAMETER, device,
               "a smaller model.dim, model.depth or model.mlp_ratio")


def variant_defaults(variant: str) -> dict[str, Any]:
    """The model settings a variant brings, under the config's own: no absolute positions for a variant with
    its own position terms, no causality for one that is bidirectional in its paper or whose causal form is not
    prefix-consistent."""
    cls = variants.variant_class(variant)
    defaults: dict[str, Any] = {}
    if cls.provides_positions:
        defaults["positions"] = "none"
    if not (cls.supports_causal and cls.prefix_consistent):
        defaults["causal"] = False
    return defaults


def check_variant_fits_model(variant: str, model: ModelConfig, task: tasks.Task) -> None:
    """Refuse, in one sentence, a variant without a causal form that holds (none in its paper, or one whose
    outputs read later inputs) on a task that needs causality or with causal attention asked for; a model blind
    to order on a task whose answers depend on it; and evaluation past the training length for a variant with
    terms indexed by position (`Attention.position_indexed`)."""
    cls = variants.variant_class(variant)
    if not cls.supports_causal or not cls.prefix_consistent:
        lacks, detail = ("is bidirectional in its paper", " and has no causal form")
        if cls.supports_causal:
            lacks = "has a causal form that is not prefix-consistent (a later input changes earlier outputs)"
            detail = ""
        if task.needs_causal:
            raise Incompatible(f"variant {variant!r} {lacks} and task {task.name!r} needs causal attention (a later "
                               "input gives each answer away); accepted: a task that does not need it, or a variant "
                               "with a prefix-consistent causal form.")
        if model.causal:
            raise Incompatible(f"variant {variant!r} {lacks}{detail}, so it cannot run model.causal=true; accepted: "
                               "model.causal=false, on a task that allows it.")
    if not model.causal and model.positions == "none" and task.depends_on_order and not cls.order_aware:
        learned = " or model.positions=learned" if task.max_len == task.seq_len else ""
        causal = " or model.causal=true" if cls.supports_causal and cls.prefix_consistent else ""
        raise Incompatible(f"model.positions 'none' with model.causal false leaves variant {variant!r} blind to the "
                           f"order of its inputs, on which the answers of task {task.name!r} depend; accepted: "
                           f"model.positions=sinusoidal{learned}{causal}.")
    if cls.position_indexed and task.max_len > task.seq_len:
        raise Incompatible(f"variant {variant!r} has terms indexed by absolute position, which eval length "
                           f"{task.max_len} of task {task.name!r} would read past the training length {task.seq_len}, "
                           f"where they never trained; accepted: eval lengths up to {task.seq_len}, or a variant "
                           "without position-indexed terms.")


def described_variant(config: RunConfig) -> str:
    """The run's variant as it describes itself, e.g. `local_w16` (no module is built for it)."""
    return variants.describe(config.variant, config.variant_options)


# -- baselines ----------------------------------------------------------------------------------------

def refuse_attention_settings(variant: str, model: ModelConfig, train: TrainConfig,
                              profile_model: dict[str, Any]) -> None:
    """A baseline has no attention heads: model.heads or model.head_dim other than the profile's, and attention
    statistics, are refused rather than silently ignored (a kernel too: `variants.check_kernel_name`). (The
    profile's own values pass: a saved config lists every field.) Positions, width, depth, MLP ratio and
    causality apply to a baseline as they are."""
    profile = build_options(ModelConfig, "Config section 'model'", profile_model)
    for name in ("heads", "head_dim"):
        value = getattr(model, name)
        if value != getattr(profile, name):
            raise OptionError(f"model.{name}={format_value(value)} sizes attention heads, which baseline "
                              f"{variant!r} does not have; accepted: the profile's "
                              f"{format_value(getattr(profile, name))} (leave it unset).")
    if train.attention_stats:
        raise OptionError(f"train.attention_stats=true measures attention weights, which baseline {variant!r} "
                          "does not have; accepted: false.")


def from_dict(data: dict[str, Any], *, trains_here: bool = True) -> RunConfig:
    """A saved config.json back to a RunConfig, re-validated field by field (`trains_here`: as `resolve`'s)."""
    names = {item.name for item in dataclasses.fields(RunConfig)}
    unknown = set(data) - names
    missing = {item.name for item in dataclasses.fields(RunConfig)
               if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING} - set(data)
    if unknown or missing:
        raise OptionError(f"config has unknown fields {sorted(unknown)} or lacks {sorted(missing)}; "
                          f"accepted fields: {', '.join(sorted(names))}.")
    return resolve(
        variant=data["variant"], task=data["task"], profile=data["profile"], seed=data["seed"],
        device=data["device"], kernel=data.get("kernel", "auto"),
        overrides={"variant": data.get("variant_options", {}), "task": data.get("task_options", {}),
                   "model": data.get("model", {}), "train": data.get("train", {})},
        trains_here=trains_here,
    )


def to_json(config: RunConfig) -> str:
    return json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n"


def due(step: int, every: int, steps: int) -> bool:
    """Whether something done every `every` steps (and after the last) is due after step `step`."""
    return step % every == 0 or step == steps
