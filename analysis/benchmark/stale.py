"""Which results of a benchmark no longer measure today's code, and why (`experiments.revisions`): a result whose
task or variant has been revised since it trained, or a benchmark stored under an earlier protocol. The benchmark's
page, docs/results.md and the README mark such a result (stale) and say why; a result stored before results kept
their revisions is said to be so, with the commit it trained at, rather than given a revision it did not record.
"""

from __future__ import annotations

import pandas as pd

from experiments import revisions
from experiments.benchmark.ledger import Ledger
from experiments.tasks import presets as task_presets
from variants import presets

MARK = " (stale)"  # after a stale cell's test accuracy on the leaderboard


def _results(ledger: Ledger) -> list[tuple[str, str, dict]]:
    """(variant, task, result) of every job that stored one."""
    return [(state.cell.variant, state.cell.task, job.result) for state in ledger.cells for job in state.jobs
            if job.result]


def stale_cells(ledger: Ledger) -> dict[tuple[str, str], str]:
    """Per (variant, task) with a result whose recorded task or variant revision is behind today's, why
    (`revisions.stale_because` over its results: the variant a row runs, the benchmark's profile)."""
    found: dict[tuple[str, str], dict[str, None]] = {}
    for variant, task, result in _results(ledger):
        recorded = result.get("revisions")  # none: stored before results kept them (`stale_lines` says so)
        reason = recorded and revisions.stale_because(task_presets.base(task), presets.base(variant), recorded,
                                                      ledger.benchmark.profile)
        if reason:
            found.setdefault((variant, task), {})[reason] = None
    return {cell: "; ".join(reasons) for cell, reasons in found.items()}


def stale_lines(ledger: Ledger) -> list[str]:
    """A sentence for a protocol behind today's, one per stale cell, and one for the results stored without their
    revisions, naming the commits they trained at."""
    lines = []
    behind = revisions.protocol_behind(ledger.benchmark.protocol)
    if behind:
        lines.append(f"Stale: {behind}; every result here was measured under protocol {ledger.benchmark.protocol} "
                     "and stands as measured then.")
    lines += [f"Stale: {variant} on {task}: {reason}; its results stand as measured then until a benchmark trains "
              f"them again." for (variant, task), reason in stale_cells(ledger).items()]
    unrecorded = [result for _, _, result in _results(ledger) if not result.get("revisions")]
    if unrecorded:
        commits = sorted({str(result.get("git_commit") or "unknown")[:12] for result in unrecorded})
        lines.append(f"Revisions not recorded: {len(unrecorded)} of {len(_results(ledger))} results were stored "
                     f"before results kept the revisions of their task and variant; they trained at commit "
                     f"{', '.join(commits)}, whose experiments/revisions.py lists the revisions then; whether a "
                     "revision since has left them stale is not known here.")
    return lines


def marked(shown: pd.DataFrame, ledger: Ledger) -> pd.DataFrame:
    """The leaderboard as shown with each stale cell's test accuracy marked (stale): a cell behind a revision, or
    every cell with a result where the protocol is behind."""
    stale = set(stale_cells(ledger))
    if revisions.protocol_behind(ledger.benchmark.protocol):
        stale |= {(variant, task) for variant, task, _ in _results(ledger)}
    shown = shown.copy()
    for variant, task in stale:
        shown.loc[shown["variant"] == variant, task] += MARK
    return shown
