"""Sweeps as the report reads them: the Optuna studies stored as journals under `<runs>/sweeps/`.

A sweep (`attnlab sweep`) keeps its study in `<runs>/sweeps/<study>.journal`; each trial is an ordinary
run whose summary carries the tags {"study", "trial"} and whose trial user attribute `run_id` names it.
The study's user attribute `definition` says which variant and task it tunes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.exceptions import ExperimentalWarning
from optuna.importance import FanovaImportanceEvaluator, get_param_importances
from optuna.storages import JournalStorage
from optuna.trial import FrozenTrial, TrialState

from analysis.runs import matches
from common.journals import journal_backend
from common.options import closest

STATES = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "failed",
          TrialState.RUNNING: "running", TrialState.WAITING: "waiting"}


@dataclass
class SweepStudy:
    """One study: its name, its journal, the Optuna study and what it tunes."""

    name: str
    path: Path
    study: optuna.Study
    definition: dict[str, Any] = field(default_factory=dict)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def best(self) -> FrozenTrial | None:
        """The complete trial of highest value (the earliest among equals), or None."""
        complete = [trial for trial in self.trials if trial.state == TrialState.COMPLETE]
        return max(complete, key=lambda trial: (trial.value, -trial.number)) if complete else None

    def counts(self) -> dict[str, int]:
        """Trials per state: complete, pruned, failed, running (and waiting, when any are queued)."""
        counts = {name: sum(trial.state == state for trial in self.trials) for state, name in STATES.items()}
        return {name: count for name, count in counts.items() if count or name != "waiting"}

    def trials_frame(self) -> pd.DataFrame:
        """One row per trial: number, state, value (the objective: final test accuracy), the last reported
        intermediate value and its step, the run id, and each parameter as `param.<name>`."""
        rows = []
        for trial in self.trials:
            last_step = max(trial.intermediate_values) if trial.intermediate_values else None
            rows.append({
                "trial": trial.number, "state": STATES[trial.state], "value": trial.value,
                "last_step": last_step,
                "last_reported": trial.intermediate_values[last_step] if last_step is not None else None,
                "run_id": trial.user_attrs.get("run_id"),
                **{f"param.{name}": value for name, value in trial.params.items()},
            })
        return pd.DataFrame(rows, columns=None if rows else ["trial", "state", "value", "last_step",
                                                              "last_reported", "run_id"])

    def intermediate_frame(self) -> pd.DataFrame:
        """The test accuracy each trial reported at each evaluation step (long format)."""
        rows = [{"trial": trial.number, "state": STATES[trial.state], "step": step, "test_accuracy": value}
                for trial in self.trials for step, value in sorted(trial.intermediate_values.items())]
        return pd.DataFrame(rows, columns=["trial", "state", "step", "test_accuracy"])

    def importances(self) -> tuple[pd.DataFrame | None, str]:
        """fANOVA importance of each parameter for the objective (Optuna's FanovaImportanceEvaluator,
        seeded), or None and the reason it cannot be computed."""
        complete = [trial for trial in self.trials if trial.state == TrialState.COMPLETE]
        if len(complete) < 2:
            return None, f"{len(complete)} complete trial(s): fANOVA needs at least 2"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExperimentalWarning)
                scores = get_param_importances(self.study, evaluator=FanovaImportanceEvaluator(seed=0))
        except (ValueError, RuntimeError) as error:  # e.g. no parameter shared by every complete trial
            return None, str(error).splitlines()[0]
        if not scores:
            return None, "no parameter was searched in every complete trial"
        return pd.DataFrame({"param": list(scores), "importance": list(scores.values())}), ""


def select_studies(studies: list[SweepStudy], filters: dict[str, list[str]]) -> list[SweepStudy]:
    """The studies whose definition agrees with the filters on the fields it has (variant, task, profile,
    seed); a filter on any other column leaves studies in."""
    return [study for study in studies
            if all(matches(study.definition[column], values) for column, values in filters.items()
                   if column in study.definition and column in ("variant", "task", "profile", "seed"))]


def study_journals(runs_dir: Path) -> list[Path]:
    folder = runs_dir / "sweeps"
    return sorted(folder.glob("*.journal")) if folder.is_dir() else []


def load_studies(runs_dir: Path, only: str | None = None) -> tuple[list[SweepStudy], list[dict[str, str]]]:
    """The studies under `<runs_dir>/sweeps/` (only `only`, when given), and the journals that could not be
    read, each with its reason. Naming a study that has no journal there is a ValueError."""
    journals = study_journals(runs_dir)
    if only is not None:
        names = [path.stem for path in journals]
        if only not in names:
            raise ValueError(f"Study {only!r} has no journal in {runs_dir / 'sweeps'}{closest(only, names)}; "
                             f"accepted: {', '.join(names) if names else 'no study (none is stored there)'}.")
        journals = [path for path in journals if path.stem == only]
    studies, skipped = [], []
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    for path in journals:
        try:
            storage = JournalStorage(journal_backend(path))
            for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
                study = optuna.load_study(study_name=summary.study_name, storage=storage)
                definition = dict(study.user_attrs.get("definition", {}))
                studies.append(SweepStudy(summary.study_name, path, study, definition))
        except Exception as error:  # a journal Optuna cannot replay: skipped, with Optuna's reason
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            skipped.append({"run": f"sweeps/{path.name}", "reason": f"the study journal cannot be read ({reason})"})
    return studies, skipped
