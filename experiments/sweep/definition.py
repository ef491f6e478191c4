"""A sweep's definition: validated and resolved before anything runs, and the study it creates or joins. The
process that starts a sweep builds it from its options (`build`, from `experiments.schemas.sweep.SweepOptions`); the
definition (its stored fields, `common.schema.stored`) is stored with its study, and a worker process builds it from
there (`rebuild`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from common import schema
from common.options import OptionError
from common.schema import setting
from experiments import tasks
from experiments.run import config as configs
from experiments.run.records import RUN_ID
from experiments.schemas.sweep import SweepOptions
from experiments.sweep import space as spaces
from experiments.sweep.storage import create_or_join, field_of, open_storage, shown
from variants import presets

PRUNERS = ("median", "none")


def check_study_name(name: str) -> str:
    if not RUN_ID.fullmatch(name) or ".." in name:
        raise OptionError(f"Study name {name!r} is not a plain name; accepted: letters, digits, '.', '_' and '-', "
                          "starting with a letter or digit, without '..'.")
    return name


@dataclass(frozen=True)
class Sweep:
    """A sweep's definition, validated and resolved before anything runs. The fields declared with `setting` are
    what its study stores (`definition`): what makes trials comparable, and all a worker process reads to join it."""

    variant: str = setting()
    task: str = setting()
    profile: str = setting()
    seed: int = setting()
    device: str
    kernel: str = setting()
    overrides: dict[str, dict[str, Any]] = setting()  # the user's --set, fixed in every trial
    space: spaces.Space = setting(store=lambda space: [param.to_dict() for param in space.params],
                                  load=lambda params: spaces.Space(tuple(map(spaces.Param.from_dict, params))))
    study_name: str
    storage_url: str | None
    runs_dir: Path
    trials: int
    pruner: str = setting()
    prune_after: int = setting()
    heartbeat_seconds: int
    confirm_seeds: int = 0  # fresh seeds that train the best configuration again once the study is done

    @property
    def journal(self) -> Path:
        return self.runs_dir / "sweeps" / f"{self.study_name}.journal"

    @property
    def storage_shown(self) -> str:
        return shown(self.storage_url) if self.storage_url else str(self.journal)

    @property
    def fresh_seeds(self) -> list[int]:
        """The seeds that confirm the best configuration: the `confirm_seeds` seeds after the sweep's own.
        Every trial trains with the sweep's seed, so none of them trained a trial; and they are the same
        each time, so confirming again finds the runs it already trained."""
        return [self.seed + offset for offset in range(1, self.confirm_seeds + 1)]

    def upgraded(self, stored: dict[str, Any]) -> dict[str, Any]:
        """`stored`, a definition as an older version stored it, in today's form as far as it agrees with this
        sweep: a space stored as text (each parameter described) is this sweep's where the text describes it, and
        the kernel and pruner, which older versions did not store, are this sweep's."""
        today = {"kernel": self.kernel, "pruner": self.pruner, "prune_after": self.prune_after, **stored}
        if today.get("space") == [param.describe() for param in self.space.params]:
            today["space"] = schema.stored(self)["space"]
        return today

    def config(self, chosen: dict[str, dict[str, Any]]) -> configs.RunConfig:
        """The run config of a trial: the sweep's overrides plus the trial's values."""
        overrides = {section: {**values, **chosen.get(section, {})} for section, values in self.overrides.items()}
        return configs.resolve(variant=self.variant, task=self.task, profile=self.profile, seed=self.seed,
                               device=self.device, kernel=self.kernel, overrides=overrides)

    def trial_config(self, trial: FrozenTrial) -> configs.RunConfig:
        """The run config of a trial that has drawn its values."""
        return self.config(spaces.as_overrides(trial.params))

    def make_pruner(self) -> optuna.pruners.BasePruner:
        if self.pruner == "none":
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(n_startup_trials=self.prune_after)


def build(options: SweepOptions, *, device: str, runs_dir: Path) -> Sweep:
    """Validate everything a sweep needs and resolve its space on `device`, touching nothing: a bad value is a
    one-sentence error."""
    variant, task, profile, seed, kernel = options.variant, options.task, options.profile, options.seed, options.kernel
    for name, value, least in (("trials", options.trials, 1), ("heartbeat seconds", options.heartbeat_seconds, 1),
                               ("prune-after", options.prune_after, 0), ("confirm-seeds", options.confirm_seeds, 0)):
        if value < least:
            raise OptionError(f"Sweep {name} got {value}; accepted: an integer >= {least}.")
    if seed + options.confirm_seeds >= tasks.MAX_TRAIN_SEED:
        raise OptionError(f"Sweep confirm-seeds got {options.confirm_seeds}, but seeds {seed + 1}.."
                          f"{seed + options.confirm_seeds} pass the largest seed; accepted: at most "
                          f"{tasks.MAX_TRAIN_SEED - 1 - seed}.")
    if options.pruner not in PRUNERS:
        raise OptionError(f"Pruner {options.pruner!r} is unknown; accepted: {', '.join(PRUNERS)}.")
    if variant in presets.SETS:
        raise OptionError(f"Sweep variant {variant!r} is a set of variants, and a sweep tunes one; accepted: one of "
                          f"its rows ({', '.join(presets.expand(variant))}), or a benchmark of the set.")
    row, (variant, fixed) = variant, presets.parse(variant)  # a preset's options are fixed in the space
    overrides = configs.for_variant(configs.parse_sets(list(options.sets)), variant, [variant])
    searched = spaces.declared(variant)
    for section in spaces.SECTIONS:
        for name in overrides[section]:
            if f"{section}.{name}" in searched:
                raise OptionError(f"--set {section}.{name} names an option the sweep searches; accepted: narrowing "
                                  f"or fixing it with --space {section}.{name}=VALUE.")
    # A preset's options: fixed in the space where the sweep searches them (below), else set as --set would.
    merged = presets.with_preset(row, overrides["variant"])[1]
    overrides = {**overrides, "variant": {key: value for key, value in merged.items()
                                          if f"variant.{key}" not in searched}}
    base = configs.resolve(variant=variant, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
                           overrides=overrides)
    sizes = {"seq_len": base.task_options.seq_len, "head_dim": base.model.attention_head_dim,
             "steps": base.train.steps}
    narrowing = spaces.read_space_file(Path(options.space_file)) if options.space_file else {}
    narrowing.update(spaces.parse_space_args(list(options.space)))
    for key, value in fixed.items():
        if f"variant.{key}" not in searched:
            continue
        if f"variant.{key}" in narrowing and narrowing[f"variant.{key}"][0] != value:
            raise OptionError(f"{narrowing[f'variant.{key}'][1]} narrows variant.{key}, which preset {row!r} fixes "
                              f"at {configs.format_value(value)}; accepted: the preset alone, or the variant's name.")
        narrowing[f"variant.{key}"] = (value, f"preset {row!r}")
    resolved = spaces.resolve(variant, sizes, narrowing)
    name = check_study_name(options.study or f"{row.replace(':', '-').replace('=', '-')}-{task}-{profile}-s{seed}")
    return Sweep(variant=variant, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
                 overrides=overrides, space=resolved, study_name=name, storage_url=options.storage_url,
                 runs_dir=runs_dir, trials=options.trials, pruner=options.pruner, prune_after=options.prune_after,
                 heartbeat_seconds=options.heartbeat_seconds, confirm_seeds=options.confirm_seeds)


def rebuild(stored: dict[str, Any], *, study_name: str, device: str, storage_url: str | None, runs_dir: Path,
         heartbeat_seconds: int, trials: int) -> Sweep:
    """The sweep whose study `study_name` holds the definition `stored` (`common.schema.stored` of it), checked by
    resolving its run config on this machine's `device`: what a worker process runs, started with only where the
    storage is, what is local to it and `trials`, the target of the command that started it."""
    where = f"sweep study {study_name!r}"

    def read(key: str) -> Any:
        return field_of(stored, key, where=where)

    if not all(isinstance(param, dict) for param in read("space")):
        raise OptionError(f"The {where} stores its space as text (an older version created it); accepted: "
                          "joining it once with the command that created it, which records it as data.")
    sweep = schema.from_stored(Sweep, read, device=device, study_name=study_name, storage_url=storage_url,
                               runs_dir=runs_dir, trials=trials, heartbeat_seconds=heartbeat_seconds)
    sweep.config({})  # a definition this version cannot run is refused here, in one sentence
    return sweep


def open_study(sweep: Sweep) -> optuna.Study:
    """Create the sweep's study, or join it after checking that it was created for the same sweep."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each trial is announced by the sweep itself
    storage = open_storage(sweep.storage_url, sweep.journal, sweep.heartbeat_seconds)
    return create_or_join(storage, sweep.study_name, schema.stored(sweep), kind="sweep", shown=sweep.storage_shown,
                          pruner=sweep.make_pruner(), upgrade=sweep.upgraded,
                          accepted="the variant, task, profile, seed, --set, --space, kernel and pruner it was "
                                   "created with, or another study name")
