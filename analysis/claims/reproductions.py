"""The published claims' verdicts, read from their records (`make reproduce` trains them, `make results` rebuilds
these from the records without training): the page (reports/reproductions/) and docs/reproductions.md, each claim
(`analysis.claims`) beside attnlab's own measurement. The runs of a claim are benchmarks (`experiments.claims`): when
every part of a claim has settled, its storage is kept as the claim's record
(docs/records/claims/benchmark-claim-...journal). A claim none of whose parts has a record yet is listed as not run.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd

from analysis import claims as registry
from analysis.claims import INCONCLUSIVE, Claim, Results, Runs, Verdict
from analysis.claims.base import EDGES
from analysis.report.build import write_page
from analysis.report.render import Section, Table, Text, markdown_table
from common import schema
from common.files import atomic_write_text
from experiments.benchmark import record
from experiments.benchmark.definition import overrides_for
from experiments.benchmark.ledger import Ledger, busy_seconds
from experiments.claims.parts import LR_MULTIPLES, PROFILE, RECORDS, benchmark_of, claims_options, own_grid, untrained
from experiments.run import config as configs

DOC = Path("docs/reproductions.md")
ESTIMATE = "estimate.csv"  # under the claims' records: `attnlab reproduce --estimate`'s record, made before they ran
COLUMNS = ["claim", "source", "their setting", "ours", "their number", "our measurement", "verdict", "why", "power"]


def chosen(names: str | None) -> list[Claim]:
    """The claims `names` lists (comma-separated; none: every claim), each checked: an unknown one is a
    one-sentence error naming the closest."""
    listed = [name for name in (names or "").split(",") if name] or registry.list_claims()
    return [registry.claim_named(name) for name in listed]


def kept(claim: Claim, records: Path = RECORDS) -> dict[str, Ledger]:
    """The records of a claim's parts that exist, by part."""
    paths = {runs.part: record.path_of(f"claim-{claim.name}-{runs.part}", records) for runs in claim.runs}
    return {part: record.load(path) for part, path in paths.items() if path.exists()}


CELLS = ("variants", "tasks")  # the stored fields that name a part's cells: a record that differs there lacks some


def stale(claim: Claim, ledgers: dict[str, Ledger]) -> dict[str, list[str]]:
    """The parts of `claim` whose record was kept under another definition than the one `make reproduce` trains
    today (`experiments.claims.parts.benchmark_of` at its defaults), each with the stored fields that differ."""
    found = {}
    for runs in claim.runs:
        if runs.part not in ledgers:
            continue
        now = schema.stored(benchmark_of(claim.name, runs, device="cpu", storage=None, runs_dir=Path("runs"),
                                         lr_multiples=LR_MULTIPLES))
        then = schema.stored(ledgers[runs.part].benchmark)
        differ = [key for key in now if now[key] != then.get(key)]
        if differ:
            found[runs.part] = differ
    return found


def verdict_of(claim: Claim, records: Path = RECORDS) -> Verdict:
    """The claim's verdict from its records; a claim with runs and no record of one of them is not run yet; one
    whose records were kept under another definition than today's keeps its verdict, marked stale (`stale`)."""
    reasons = list(dict.fromkeys(filter(None, map(untrained, claim.runs))))
    if reasons:
        return Verdict(INCONCLUSIVE, "not trained", "; ".join(reasons))
    ledgers = kept(claim, records)
    missing = [runs.part for runs in claim.runs if runs.part not in ledgers]
    if missing:
        return Verdict(INCONCLUSIVE, "not run yet", f"no record of its runs {', '.join(missing)}: `make reproduce "
                                                    f"CLAIM={claim.name}` trains them")
    old = stale(claim, ledgers)
    if not old:
        return claim.verdict(Results(ledgers))
    parts = "; ".join(f"{part} ({', '.join(fields)})" for part, fields in old.items())
    why = (f"stale record: its part{'s' if len(old) > 1 else ''} {parts} differ from the definition `make reproduce "
           f"CLAIM={claim.name}` trains today, stated in the setting; it trains them again")
    if any(set(fields) & set(CELLS) for fields in old.values()):  # today's cells are not all in the record
        return Verdict(INCONCLUSIVE, "not run yet under today's definition", why, stale=True)
    verdict = claim.verdict(Results(ledgers))
    return dataclasses.replace(verdict, stale=True, why=f"{why}. As recorded: {verdict.why}")


def budget(claim: Claim) -> str:
    """What each run of the claim trains, per part and task, as its parts resolve it (the task profile's, under the
    part's budget and --set): steps, batch, examples seen, learning rate (or the rates its own grid screens) and
    paired seeds; '' for a claim with no runs."""
    lines = []
    for runs in claim.runs:
        for task in runs.tasks:
            overrides = overrides_for(configs.parse_sets(list(runs.assignments)), runs.variants[0], task,
                                      runs.variants, runs.tasks)
            train = configs.resolve(variant=runs.variants[0], task=task, profile=PROFILE, seed=0, device="cpu",
                                    overrides=overrides, trains_here=False).train
            grid = own_grid(runs)
            rates = (f"learning rates {', '.join(f'{multiple * train.lr:.4g}' for multiple in grid)} screened"
                     if grid else f"learning rate {train.lr:g}")
            where = task if runs.part == task else f"{runs.part} on {task}"
            lines.append(f"{where}: {train.steps:,} steps of {train.batch_size} "
                         f"({train.steps * train.batch_size:,} examples seen), {rates}, {runs.seeds} paired seeds")
    return "; ".join(dict.fromkeys(lines))


def table(claims: list[Claim], records: Path = RECORDS) -> pd.DataFrame:
    rows = []
    for claim in claims:
        verdict = verdict_of(claim, records)
        rows.append({"claim": claim.name, "source": claim.source, "their setting": claim.their_setting,
                     "ours": claim.our_setting + (f"; budget per run (protocol {claims_options().protocol}: every "
                                                  f"run its whole budget): {budget(claim)}. {claim.budget_why}"
                                                  if claim.runs else ""),
                     "their number": f"{claim.claimed} ({claim.read})",
                     "our measurement": verdict.ours,
                     "verdict": verdict.outcome + (" (stale record)" if verdict.stale else ""), "why": verdict.why,
                     "power": verdict.power or ("none: no training" if not claim.runs else verdict.ours)})
    return pd.DataFrame(rows, columns=COLUMNS)


def described(runs: Runs) -> str:
    """A part as the page's table of rules shows it: its variants, tasks, sets and the grid it sweeps of its own."""
    grid = own_grid(runs)
    return (f"{runs.part}: {', '.join(runs.variants)} on {', '.join(runs.tasks)}"
            + (f" with {', '.join(runs.assignments)}" if runs.assignments else "")
            + (f" tuned over {', '.join(f'{multiple:g}' for multiple in grid)} x each task's learning rate" if grid
               else ""))


def rules(claims: list[Claim]) -> pd.DataFrame:
    return pd.DataFrame([{"claim": claim.name, "rule": claim.rule + (f"; {EDGES}" if claim.runs else ""),
                          "effect its paper reports": f"{claim.effect:g} in accuracy: {claim.effect_why}" if claim.runs
                          else "none (no training)",
                          "runs": "; ".join(map(described, claim.runs)) or "none (no training)"} for claim in claims])


INTRO = ("Each published claim beside attnlab's own measurement at CPU scale, with the rule that decides its verdict, "
         "written before the runs. A claim's runs are benchmarks under the benchmark's protocol 2 (docs/benchmark.md) "
         "kept as records under docs/records/claims/, each with its command: every run trains the budget its claim "
         "states beside the paper's, none stops at a target, and a seed fixes the data order and the initialisation "
         "for every variant, so that differences are paired by seed. By default every cell trains at one fixed "
         "learning rate, the task profile's (the papers tuned theirs): nothing is screened and every seed is read, "
         "with the half-width of its 95% interval; a claim that sweeps its paper's grid screens it on two seeds first "
         "and reads the fresh seeds. \"not reproduced\" is a result: the settings differ as each row says. A check "
         "whose cells all sit at chance or at the ceiling reads inconclusive (floor) or (ceiling); \"equal\", "
         "\"closes the gap\" and \"at least as\" are decided by two one-sided tests against a margin the rule "
         "states, never by a difference that is not significant. The power column says how many paired seeds a "
         "claim's decisive comparison needs to detect the effect its paper reports (the rules say which effect, and "
         "why), from the spread of the differences over the seeds its records measured. A verdict read from records "
         "kept under another definition than the claim's today is marked stale, with what differs.")


def cost(records: Path = RECORDS, link: str = "records/claims/") -> str:
    """What the claims' records cost: the estimate made before they ran (`ESTIMATE` under `records`, the record of
    `attnlab reproduce --estimate`) against the wall time they took, the union of every settled job's span over
    every claim's records (`busy_seconds`: from the first job's start to the last one's end, less any pause between
    them); "" without that estimate, or while a claim's records are missing or stale (its cost is not the one
    estimated)."""
    path = records / ESTIMATE
    if not path.exists():
        return ""
    spans = []
    for claim in chosen(None):
        ledgers = kept(claim, records)
        if set(ledgers) != {runs.part for runs in claim.runs if untrained(runs) is None} or stale(claim, ledgers):
            return ""
        spans += [span for ledger in ledgers.values() for span in ledger.spans()]
    estimate = pd.read_csv(path, dtype=str, keep_default_na=False).set_index("what")
    wall = next(what for what in estimate.index if what.startswith("wall time with "))
    workers, estimated, measured = int(wall.split()[3]), float(estimate.loc[wall, "hours"]), busy_seconds(spans) / 3600
    return (f"Their runs cost, estimated before they ran (`make reproduce ARGS=--estimate WORKERS={workers}`, "
            f"[{link}{ESTIMATE}]({link}{ESTIMATE})), {float(estimate.loc['every job', 'hours']):.2f} hours of runs, "
            f"{estimated:.2f} hours of wall time with {workers} workers; measured, {measured:.2f} hours of wall time "
            f"({measured / estimated:.2f} of the estimate; while at least one of their jobs ran).")


def document(frame: pd.DataFrame, rule_table: pd.DataFrame, records: Path = RECORDS) -> str:
    """docs/reproductions.md: the table, then each claim's rule and runs."""
    spent = cost(records)
    lines = ["# Reproductions", "", "Generated by `make reproduce` and `make results` from the records under "
             "[records/claims/](records/claims/); do not edit it by hand.", "", INTRO, "", *([spent, ""] * bool(spent)),
             *markdown_table(frame), "", "## Rules and runs", "", *markdown_table(rule_table)]
    return "\n".join(lines) + "\n"


def write(out: Path, records: Path = RECORDS, doc: Path = DOC) -> Path:
    """The page (`out`/reproductions/) and `doc`, from the records of every claim."""
    claims = chosen(None)  # every claim, whichever ran: the page is the whole set
    frame, rule_table = table(claims, records), rules(claims)
    counts = frame["verdict"].value_counts()
    summary = ", ".join(f"{int(counts[outcome])} {outcome}" for outcome in counts.index)
    atomic_write_text(doc, document(frame, rule_table, records))
    sections = [Section("claims", "Claims", [Text(INTRO), Table("claims", "Every claim and its verdict", frame)]),
                Section("rules", "Rules and runs", [Table("rules", "Each claim's verdict rule and runs", rule_table)])]
    return write_page(out, "reproductions", "attnlab reproductions", [f"{len(frame)} claims: {summary}."], sections)


def readme_lines(records: Path = RECORDS) -> list[str]:
    """README.md's lines of the claims (inside its generated block): each claim's source, verdict and why, from the
    records; the settings, the figures and the rules are in docs/reproductions.md."""
    claims = chosen(None)
    frame = table(claims, records)
    untried = frame["our measurement"].isin(["not run yet", "not trained"])
    frame["verdict"] = frame["verdict"].where(~untried, frame["verdict"] + " (" + frame["our measurement"] + ")")
    frame = frame[["claim", "source", "verdict", "why"]]
    frame["source"] = [re.sub(r', "[^"]*"', "", claim.source) for claim in claims]  # without the paper's title
    spent = cost(records, "docs/records/claims/")
    return ["Published claims at CPU scale, each read by its rule written before the runs (`make reproduce`; the "
            "settings, the figures and the rules: [docs/reproductions.md](docs/reproductions.md))"
            + (f". {spent}" if spent else ":"), "", *markdown_table(frame)]
