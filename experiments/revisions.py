"""Which revision of a task or a variant a result was measured on, so that a record can tell a stale row.

Every task and every variant (baselines included) is at revision 1 until a change alters what its runs measure:
how its data is drawn, the size of its held-out sets, what its forward computes. Such a change raises the
name's revision here, with one line saying what changed. A run records the revisions it trained on
(`Summary.revisions`); the calibration record keeps them per row, and the pages written from it
(`analysis.calibration.table`, `analysis.results_doc`) mark a row whose task or variant has been revised since as
stale, with the reason, until it is trained again. A change that alters no result (a refactor, a faster kernel
that matches the reference) raises nothing. A revision that changed some of a task's profiles only names them, and
leaves the rows of its other profiles current.

The benchmark's protocol (`experiments.benchmark`: its stages, its stopping rule, what its page concludes) has
versions the same way: a change to the protocol raises `PROTOCOL` with one line saying what the new version is. A
benchmark stores the version it was created under in its definition, every job's result stores the revisions it
trained on, and the benchmark's page and the README mark a result whose protocol or revisions are behind as stale.
"""

from __future__ import annotations

TASK, VARIANT = "task", "variant"
QUICK_SETS = "its quick test and validation sets grew so that an accuracy's 95% half-width is at most 0.02"

# name -> its revisions, oldest first: (revision, what it changed[, the profiles it changed, where not all]). A
# name not listed is at revision 1; a revision left out of a list (an early one) changed every profile.
REVISED: dict[str, dict[str, tuple[tuple, ...]]] = {
    TASK: {
        **{name: ((2, QUICK_SETS),) for name in ("flipflop", "induction", "mqar", "passkey", "selective_copy")},
        "pathfinder": ((3, "every picture holds two copies of one path, one broken away from its ends; the marked "
                           "copy decides the label (the old half-path negatives left local cues); quick is 16x16"),
                       (4, "quick is 24x24, with copies of 28-34 points and two distractors of 8-14, at lr 1e-3 (at "
                           "16x16 the end cues read the break); distractors draw their lengths apart from the "
                           "copies'")),
        "listops": ((2, "its answer is drawn uniformly among those its tree's digits reach, so that neither a bag of "
                        "tokens nor the root operator predicts it; quick sets grew and quick trains 3,000 steps"),
                    (3, "its quick profile draws MIN, MAX and MED only: with SM as well, dense stayed within chance "
                        "+ 0.10", ("quick",)),
                    (4, "its standard profile draws quick's trees at lengths 48-127 and trains quick's model and "
                        "budget: with LRA's depth 9 and SM dense stayed at chance",
                     ("standard",))),
    },
    VARIANT: {
        "bigbird": ((2, "its random blocks are drawn per query block, so that a prefix sees the blocks it saw "
                        "alone"),),
        "cosformer": ((2, "its M is the model's maximum length, as in its paper, not the length of each call"),),
        "performer": ((2, "its estimated row sums are floored again, after a quick induction run diverged "
                          "without"),),
        "reformer": ((2, "its causal form, which let a query see later keys, is refused: it runs bidirectionally"),),
    },
}


# The benchmark's protocol versions, oldest first: (version, what it is). A definition stored before benchmarks kept
# their version ran version 1.
PROTOCOLS = (
    (1, "each cell tunes a grid of learning rates at one seed, every run stopping at the target accuracy, the best "
        "rate by validation accuracy up to the target; confirmation seeds and capacity points train at that rate; "
        "rows ranked by mean test accuracy, each against the task's best by a paired test"),
    (2, "each cell screens a grid of learning rates on two seeds or more over a fraction of the budget and takes the "
        "rate of best mean validation accuracy; every run trains its whole budget, every metric read at its end, "
        "the first evaluations of the whole validation set at 0.9 and 0.99 kept as events and the learning curve's "
        "area as a metric"),
)
PROTOCOL = PROTOCOLS[-1][0]  # the version a benchmark created today runs


def protocol(version: int) -> str:
    """What benchmark protocol `version` is."""
    return dict(PROTOCOLS)[version]


def protocol_behind(recorded: int) -> str:
    """Why a benchmark stored under protocol `recorded` no longer measures today's protocol, or '' when it does."""
    return (f"the benchmark's protocol is at version {PROTOCOL} ({protocol(PROTOCOL)}), the record at {recorded}"
            if recorded < PROTOCOL else "")


def _latest(kind: str, name: str) -> tuple:
    return REVISED[kind].get(name, ((1, ""),))[-1]


def revision(kind: str, name: str) -> int:
    """The current revision of task or variant (`kind`) `name`."""
    return _latest(kind, name)[0]


def change(kind: str, name: str) -> str:
    """What the current revision of `name` changed ('' at revision 1)."""
    return _latest(kind, name)[1]


def of_run(task: str, variant: str) -> dict[str, int]:
    """The revisions a run of `variant` on `task` trains on, as `Summary.revisions` records them."""
    return {TASK: revision(TASK, task), VARIANT: revision(VARIANT, variant)}


def _reason(kind: str, name: str, recorded: int, profile: str | None) -> str:
    """Why revisions of `name` after `recorded` changed what a run of `profile` (None: any profile) measures, citing
    the newest that did, or '' when none did."""
    current, kept = revision(kind, name), {number: rest for number, *rest in REVISED[kind].get(name, ())}
    for number in range(current, recorded, -1):
        what, *scope = kept.get(number, ("an earlier change to every profile",))
        if not scope or profile is None or profile in scope[0]:
            cited = what if number == current else f"revision {number}: {what}"
            return f"{kind} {name} is at revision {current} ({cited}), the row at {recorded}"
    return ""


def stale_because(task: str, variant: str, recorded: dict[str, int], profile: str | None = None) -> str:
    """Why a result of `profile` (None: whichever) measured on the `recorded` revisions no longer measures today's
    code, or '' when it does; a revision not recorded (a result from before runs recorded them) reads as 1."""
    reasons = [_reason(kind, name, recorded.get(kind) or 1, profile)
               for kind, name in ((TASK, task), (VARIANT, variant))]
    return "; ".join(reason for reason in reasons if reason)
