"""The report's sweeps section: each Optuna study's trials, the best trial's selection value beside its
run's test accuracy, the optimisation history, the accuracy each trial reported, and parameter importances."""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from analysis.report import figures
from analysis.report.context import Context
from analysis.report.render import Block, Figure, Table, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section
from analysis.sweeps import SweepStudy


def _best_text(study: SweepStudy, best: pd.Series) -> str:
    """The best trial's selection value and its run's test accuracy, named apart, and the confirmation runs."""
    if pd.isna(best["best trial"]):
        return f"Study {study.name}: no complete trial yet, so no best trial."
    test = best["test accuracy (its run's)"]
    text = (f"Study {study.name}: best trial {int(best['best trial'])}, selection value (the sweep's objective, "
            f"which chose it) {shared.fmt(best['selection value (objective)'])}; test accuracy of its run "
            f"{best['run']} (that run's test accuracy, not used to choose) {shared.fmt(test)}")
    if best["confirmation seeds"]:
        text += ("; confirmation runs (tagged with the study and confirm) test accuracy "
                 + shared.mean_std_text(best["confirmation mean"], best["confirmation std"],
                                        best["confirmation seeds"]) + ", mean ± sample standard deviation over seeds")
    return text + "."


def _history(study: SweepStudy, trials: pd.DataFrame, slug: str) -> Figure:
    """The optimisation history and the test accuracy each trial reported at each evaluation."""
    fig, axes = figures.figure(1, 2, width=13.0)
    ax = axes[0, 0]
    complete = trials[trials["state"] == "complete"]
    pruned = trials[trials["state"] == "pruned"]
    ax.scatter(complete["trial"], complete["value"], color="C0", label="complete trial", zorder=3)
    ax.scatter(pruned["trial"], pruned["last_reported"], color="grey", marker="x",
               label="pruned (last reported)", zorder=3)
    if len(complete):
        best = complete.sort_values("trial")["value"].cummax()
        ax.step(complete.sort_values("trial")["trial"], best, where="post", color="black", label="best so far")
    ax.set_xlabel("trial number")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    shared.accuracy_axis(ax)
    ax.set_title("optimisation history")
    ax.legend(loc="lower right")
    intermediate = study.intermediate_frame()
    ax = axes[0, 1]
    for _, line in intermediate.groupby("trial", sort=True):
        state = line["state"].iloc[0]
        ax.plot(line["step"], line["test_accuracy"], color="C0" if state == "complete" else "grey",
                linestyle="-" if state == "complete" else "--", alpha=0.7, marker="o", markersize=3)
    ax.set_xlabel("training step")
    shared.accuracy_axis(ax)
    ax.set_title("test accuracy reported per trial")
    figures.suptitle(fig, f"Study {study.name}")
    ax.legend(handles=[Line2D([], [], color="C0", marker="o", label="complete trial"),
                       Line2D([], [], color="grey", linestyle="--", marker="o", label="pruned or failed trial")],
              loc="lower right")
    return Figure(f"sweep-{slug}-history", f"Study {study.name}: optimisation history and the eval "
                  "accuracy each trial reported", fig, intermediate)


def _importance(study: SweepStudy, slug: str) -> Block:
    importance, reason = study.importances()
    if importance is None:
        return Text(f"Study {study.name}: no parameter importance ({reason}).")
    fig, axes = figures.figure(height=1.2 + 0.45 * len(importance))
    ax = axes[0, 0]
    ordered = importance.sort_values("importance")
    ax.barh(ordered["param"], ordered["importance"], color="C0")
    ax.set_xlabel("fANOVA importance (fraction of the objective's variance)")
    ax.set_ylabel("parameter")
    ax.set_title("parameter importance for test accuracy")
    figures.suptitle(fig, f"Study {study.name}")
    return Figure(f"sweep-{slug}-importance", f"Study {study.name}: parameter importance "
                  "(Optuna FanovaImportanceEvaluator, seed 0)", fig, importance)


@section("sweeps", "Sweeps")
def sweeps(context: Context) -> list[Block]:
    blocks: list[Block] = [Text(
        "Each Optuna study under sweeps/: its trials, the best trial's selection value (the objective the sweep "
        "maximised) beside the test accuracy of its run, the optimisation history (objective per trial and the "
        "best so far; pruned trials at their last reported value), the test accuracy each trial reported at each "
        "evaluation, and each parameter's importance for the objective by Optuna's fANOVA evaluator."
    )]
    if not context.studies:
        blocks.append(Text(f"No sweep studies in {context.runs_dir / 'sweeps'}: `make sweep` writes them."))
        return blocks
    statuses = dict(zip(context.runs["run_id"], context.runs["status"], strict=True))
    _, best_trials = shared.best_trials(context)
    for index, (study, (_, best)) in enumerate(zip(context.studies, best_trials.iterrows(), strict=True)):
        definition = study.definition
        blocks.append(Text(
            f"Study {study.name}: {definition.get('variant', '?')} on {definition.get('task', '?')} "
            f"(profile {definition.get('profile', '?')}, seed {definition.get('seed', '?')}); "
            + ", ".join(f"{number} {state}" for state, number in study.counts().items()) + "."
        ))
        blocks.append(Text(_best_text(study, best)))
        trials = study.trials_frame()
        trials["run status"] = trials["run_id"].map(statuses)
        slug = f"{index:02d}-{shared.slug(study.name)}"
        blocks.append(Table(f"sweep-{slug}-trials", f"Study {study.name}: trials", trials))
        blocks.append(_history(study, trials, slug))
        blocks.append(_importance(study, slug))
    return blocks
