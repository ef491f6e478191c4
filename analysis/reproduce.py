"""`make reproduce` (`attnlab reproduce`): each published claim (`analysis.claims`) beside attnlab's own measurement.

Every claim's runs are benchmarks (`analysis.claims.Runs` -> `experiments.benchmark.build`), named
claim-<claim>-<part>, at the quick profile, under the benchmark's machinery: stopping at validation accuracy 0.99,
the test set read once per run, `WORKERS`, resuming (the same command continues) and `STORAGE` (every machine on one
storage). Every cell trains at one learning rate, the task profile's, with 3 seeds (`analysis.claims.base` says
why those are read as one cell's seeds); `--lr-multiples 1,3,9` tunes the benchmark's grid on the validation set
first, at twice the cost. A part that sweeps its paper's own grid (`analysis.claims.grid`, the mad claim's) tunes
that grid whatever `--lr-multiples` says. The grid is not extended and cells keep their own sizes, as the papers
compare them (a claim that needs parity says so in its setting). A part on a task that declares itself not
discriminative at the quick profile (`Task.not_discriminative`) is not trained: its claim is inconclusive there, for
the task's reason.
`--estimate` times every part first and trains nothing, as the benchmark's estimate does, and writes each part's
table of sizes (estimate.csv) beside its journal.

When every part of a claim has settled, its storage is kept as the claim's record
(docs/records/claims/benchmark-claim-...journal), and the verdicts are read from the records: the page
(reports/reproductions/) and docs/reproductions.md, which `make results` rebuilds from the records without training.
A claim none of whose parts has a record yet is listed as not run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import claims as registry
from analysis.claims import INCONCLUSIVE, Claim, Results, Runs, Verdict
from analysis.claims.base import EDGES
from analysis.claims.grid import own_grid
from analysis.render import Section, Table, Text, markdown_table
from analysis.report import write_page
from common.files import atomic_write_text
from common.options import format_value
from common.schema import resolved
from experiments import benchmark, tasks
from experiments import config as configs
from experiments.benchmark import Benchmark, Ledger, estimate, record
from experiments.benchmark.definition import build, overrides_for
from experiments.schemas.benchmark import BenchmarkOptions, parse_multiples
from experiments.slurm import Slurm
from experiments.sweep.pool import worker_count

RECORDS = record.RECORDS / "claims"
DOC = Path("docs/reproductions.md")
LR_MULTIPLES = "1"  # one learning rate per cell, the task profile's: the module docstring
PROFILE = "quick"
CLAIMS_PROTOCOL = 1  # the benchmark's protocol 1: one learning rate, every run stopping at the target
COLUMNS = ["claim", "source", "their setting", "ours", "their number", "our measurement", "verdict", "why", "power"]


def claims_options(**given: Any) -> BenchmarkOptions:
    """The options of a claim's benchmark (the module docstring says how it is set): protocol 1's (its target and its
    interim validation) at the quick profile, from seed 0, one capacity seed, the grid not extended, cells at their own
    sizes; then `given`."""
    return resolved(BenchmarkOptions, {"protocol": CLAIMS_PROTOCOL, "profile": PROFILE, "seed": 0, "capacity_seeds": 1,
                                       "extend_grid": 0, "size_to_dense": False, **given})


def benchmark_of(claim: Claim, runs: Runs, *, device: str, storage: str | None, runs_dir: Path,
                 lr_multiples: str) -> Benchmark:
    """The benchmark that trains one part of a claim (`claims_options`): at `lr_multiples` unless the part sweeps its
    own grid (`analysis.claims.grid`)."""
    return build(claims_options(name=f"claim-{claim.name}-{runs.part}", variants=runs.variants, tasks=runs.tasks,
                                seeds=runs.seeds, lr_multiples=own_grid(runs) or parse_multiples(lr_multiples),
                                capacity_widths=runs.capacity_widths, capacity_scales=runs.capacity_scales,
                                sets=runs.sets, storage_url=storage), device=device, runs_dir=runs_dir)


def chosen(names: str | None) -> list[Claim]:
    """The claims `names` lists (comma-separated; none: every claim), each checked: an unknown one is a
    one-sentence error naming the closest."""
    listed = [name for name in (names or "").split(",") if name] or registry.list_claims()
    return [registry.claim_named(name) for name in listed]


def untrained(runs: Runs) -> str | None:
    """Why a part is not trained: a task of it not discriminative at the claims' profile (its reason); else None."""
    return next((f"task {task} is not discriminative at the {PROFILE} profile: "
                 f"{tasks.task_class(task).not_discriminative[PROFILE]}" for task in runs.tasks
                 if PROFILE in tasks.task_class(task).not_discriminative), None)


def estimate_all(parts: list[Benchmark], workers: int, quiet: bool) -> str:
    """What every part left to run costs here, as `attnlab benchmark --estimate` measures a benchmark, summed; each
    part's table of sizes is written to its estimate.csv, as the benchmark's estimate writes it."""
    lines, total = [], 0.0
    for part in parts:
        sizes = estimate.estimate(part, workers=workers, quiet=quiet)
        estimate.write(part, sizes, workers)
        seconds = float(sizes["seconds"].sum())
        total += seconds
        lines.append(f"{part.name}: {estimate.duration(seconds)} of runs")
    return "\n".join([*lines, f"total: {estimate.duration(total)} of runs; with {workers} workers, about "
                      f"{estimate.duration(total / workers)} of wall time (steps at the profile's, an upper bound "
                      "where runs stop at the target)"])


def run(names: str | None, *, workers: int | None, device: str, storage: str | None, runs_dir: Path, out: Path,
        quiet: bool, estimate_only: bool = False, records: Path = RECORDS, doc: Path = DOC,
        lr_multiples: str | None = None, slurm: Slurm | None = None) -> int:
    """`attnlab reproduce`: train every part of the chosen claims that has not settled (a part on a task not
    discriminative at the profile: none, `untrained`), keep each settled claim's parts as records, then write the page
    and docs/reproductions.md. 0 when every chosen claim has a verdict from settled runs, 130 after a signal, 1
    otherwise."""
    claims = chosen(names)
    parts = {(claim.name, runs.part): benchmark_of(claim, runs, device=device, storage=storage, runs_dir=runs_dir,
                                                   lr_multiples=lr_multiples or LR_MULTIPLES)
             for claim in claims for runs in claim.runs if untrained(runs) is None}
    count = worker_count(workers, device, per_core=slurm is None)
    if estimate_only:
        print(estimate_all(list(parts.values()), count, quiet))
        return 0
    exit_code, submitted = 0, False
    for part in parts.values():
        code, ledger = benchmark.run(part, workers=count, quiet=quiet, slurm=slurm)
        if ledger is None:  # its workers submitted to SLURM: the same command writes the page once they are done
            submitted = True
            continue
        if code == 130:
            return 130
        exit_code = max(exit_code, code)
        if ledger.complete and storage is None:
            record.keep(part.name, runs_dir, records)
    if submitted:
        return exit_code
    print(f"wrote {write(out, records, doc)} and {doc}")
    return exit_code


def kept(claim: Claim, records: Path = RECORDS) -> dict[str, Ledger]:
    """The records of a claim's parts that exist, by part."""
    paths = {runs.part: record.path_of(f"claim-{claim.name}-{runs.part}", records) for runs in claim.runs}
    return {part: record.load(path) for part, path in paths.items() if path.exists()}


def verdict_of(claim: Claim, records: Path = RECORDS) -> Verdict:
    """The claim's verdict from its records; a claim with runs and no record of one of them is not run yet."""
    reasons = list(dict.fromkeys(filter(None, map(untrained, claim.runs))))
    if reasons:
        return Verdict(INCONCLUSIVE, "not trained", "; ".join(reasons))
    ledgers = kept(claim, records)
    missing = [runs.part for runs in claim.runs if runs.part not in ledgers]
    if missing:
        return Verdict(INCONCLUSIVE, "not run yet", f"no record of its runs {', '.join(missing)}: `make reproduce "
                                                    f"CLAIM={claim.name}` trains them")
    return claim.verdict(Results(ledgers))


def budget(claim: Claim) -> str:
    """What each run of the claim trains on, per task, as its parts resolve it (the task profile's, under the part's
    --set): steps, batch, examples seen and learning rate; '' for a claim with no runs."""
    lines = []
    for runs in claim.runs:
        for task in runs.tasks:
            overrides = overrides_for(configs.parse_sets(list(runs.sets)), runs.variants[0], task, runs.variants,
                                      runs.tasks)
            train = configs.resolve(variant=runs.variants[0], task=task, profile=PROFILE, seed=0, device="cpu",
                                    overrides=overrides, trains_here=False).train
            examples = train.steps * train.batch_size
            lines.append(f"{task}: up to {train.steps:,} steps of {train.batch_size} ({examples:,} examples seen), "
                         f"learning rate {train.lr:g}")
    return "; ".join(dict.fromkeys(lines))


def table(claims: list[Claim], records: Path = RECORDS) -> pd.DataFrame:
    rows = []
    for claim in claims:
        verdict = verdict_of(claim, records)
        rows.append({"claim": claim.name, "source": claim.source, "their setting": claim.their_setting,
                     "ours": claim.our_setting + (f"; budget per run (stopping at validation accuracy "
                                                  f"{format_value(claims_options().target)}): {budget(claim)}"
                                                  if claim.runs else ""),
                     "their number": f"{claim.claimed} ({claim.read})",
                     "our measurement": verdict.ours, "verdict": verdict.outcome, "why": verdict.why,
                     "power": verdict.power or ("none: no training" if not claim.runs else verdict.ours)})
    return pd.DataFrame(rows, columns=COLUMNS)


def described(runs: Runs) -> str:
    """A part as the page's table of rules shows it: its variants, tasks, sets and the grid it sweeps of its own."""
    grid = own_grid(runs)
    return (f"{runs.part}: {', '.join(runs.variants)} on {', '.join(runs.tasks)}"
            + (f" with {', '.join(runs.sets)}" if runs.sets else "")
            + (f" tuned over {', '.join(f'{multiple:g}' for multiple in grid)} x each task's learning rate" if grid
               else ""))


def rules(claims: list[Claim]) -> pd.DataFrame:
    return pd.DataFrame([{"claim": claim.name, "rule": claim.rule + (f"; {EDGES}" if claim.runs else ""),
                          "effect its paper reports": f"{claim.effect:g} in accuracy: {claim.effect_why}" if claim.runs
                          else "none (no training)",
                          "runs": "; ".join(map(described, claim.runs)) or "none (no training)"} for claim in claims])


INTRO = ("Each published claim beside attnlab's own measurement at CPU scale, with the rule that decides its verdict, "
         "written before the runs. A claim's runs are benchmarks (docs/benchmark.md) kept as records under "
         "docs/records/claims/, each with its command; by default every cell trains at one learning rate, the task "
         "profile's (the papers tuned theirs), so tuning selects nothing and means are over its seed and the "
         "confirmation seeds, 3 in all, with the half-width of their 95% interval (with a grid, over the confirmation "
         "seeds only). \"not reproduced\" is a result: the settings differ as each row says. A check whose cells all "
         "sit at chance or at the ceiling reads inconclusive (floor) or (ceiling); \"equal\", \"closes the gap\" and "
         "\"at least as\" are decided by two one-sided tests against a margin the rule states, never by a difference "
         "that is not significant. The power column says how many paired seeds a claim's decisive comparison needs "
         "to detect the effect its paper reports (the rules say which effect, and why), from the spread of the "
         "differences over the seeds its records measured.")


def document(frame: pd.DataFrame, rule_table: pd.DataFrame) -> str:
    """docs/reproductions.md: the table, then each claim's rule and runs."""
    lines = ["# Reproductions", "", "Generated by `make reproduce` and `make results` (`analysis.reproduce`) from the "
             "records under [records/claims/](records/claims/); do not edit it by hand.", "", INTRO, "",
             *markdown_table(frame), "", "## Rules and runs", "", *markdown_table(rule_table)]
    return "\n".join(lines) + "\n"


def write(out: Path, records: Path = RECORDS, doc: Path = DOC) -> Path:
    """The page (`out`/reproductions/) and `doc`, from the records of every claim."""
    claims = chosen(None)  # every claim, whichever ran: the page is the whole set
    frame, rule_table = table(claims, records), rules(claims)
    counts = frame["verdict"].value_counts()
    summary = ", ".join(f"{int(counts[outcome])} {outcome}" for outcome in counts.index)
    atomic_write_text(doc, document(frame, rule_table))
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
    return ["Published claims at CPU scale, each read by its rule written before the runs (`make reproduce`; the "
            "settings, the figures and the rules: [docs/reproductions.md](docs/reproductions.md)):", "",
            *markdown_table(frame)]
