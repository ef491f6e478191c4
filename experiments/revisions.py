"""Which revision of a task or a variant a result was measured on, so that a record can tell a stale row.

Every task and every variant (baselines included) is at revision 1 until a change alters what its runs measure:
how its data is drawn, the size of its held-out sets, what its forward computes. Such a change raises the
name's revision here, with one line saying what changed. A run records the revisions it trained on
(`Summary.revisions`); the calibration record keeps them per row, and the pages written from it
(`analysis.calibration`, `analysis.results_doc`) mark a row whose task or variant has been revised since as
stale, with the reason, until it is trained again. A change that alters no result (a refactor, a faster kernel
that matches the reference) raises nothing.
"""

from __future__ import annotations

TASK, VARIANT = "task", "variant"

# name -> (revision, what the latest revision changed); a name not listed is at revision 1.
REVISED: dict[str, dict[str, tuple[int, str]]] = {
    TASK: {
        **{name: (2, "its quick test and validation sets grew so that an accuracy's 95% half-width is at most 0.02")
           for name in ("flipflop", "induction", "mqar", "passkey", "selective_copy")},
        "pathfinder": (3, "every picture holds two copies of one path, one broken away from its ends; the marked copy "
                          "decides the label (the old half-path negatives left local cues); quick is 16x16"),
        "listops": (3, "its quick profile draws MIN, MAX and MED only: with SM as well, dense stayed within chance + "
                       "0.10"),
    },
    VARIANT: {
        "bigbird": (2, "its random blocks are drawn per query block, so that a prefix sees the blocks it saw alone"),
        "cosformer": (2, "its M is the model's maximum length, as in its paper, not the length of each call"),
        "performer": (2, "its estimated row sums are floored again, after a quick induction run diverged without"),
        "reformer": (2, "its causal form, which let a query see later keys, is refused: it runs bidirectionally"),
    },
}


def revision(kind: str, name: str) -> int:
    """The current revision of task or variant (`kind`) `name`."""
    return REVISED[kind].get(name, (1, ""))[0]


def change(kind: str, name: str) -> str:
    """What the current revision of `name` changed ('' at revision 1)."""
    return REVISED[kind].get(name, (1, ""))[1]


def of_run(task: str, variant: str) -> dict[str, int]:
    """The revisions a run of `variant` on `task` trains on, as `Summary.revisions` records them."""
    return {TASK: revision(TASK, task), VARIANT: revision(VARIANT, variant)}


def stale_because(task: str, variant: str, recorded: dict[str, int]) -> str:
    """Why a result measured on the `recorded` revisions no longer measures today's code, or '' when it does; a
    revision not recorded (a result from before runs recorded them) reads as 1."""
    reasons = [f"{kind} {name} is at revision {revision(kind, name)} ({change(kind, name)}), the row at "
               f"{recorded.get(kind) or 1}" for kind, name in ((TASK, task), (VARIANT, variant))
               if (recorded.get(kind) or 1) < revision(kind, name)]
    return "; ".join(reasons)
