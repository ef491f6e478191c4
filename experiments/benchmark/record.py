"""The leaderboard of record: a settled benchmark's storage kept in the repository, from which its page,
docs/results.md and the README's leaderboard are rebuilt without training (`attnlab results`).

A record is the benchmark's own journal file (Optuna's `JournalStorage`, one JSON line per operation), copied to
`docs/records/benchmark-NAME.journal` by `attnlab results --keep NAME` once every job has settled. It holds the
benchmark's definition (the command that runs it again) and every job's figures: validation and test accuracy
per seed, steps, the step where a run reached the target, wall time, device and the commit each ran at. So the
page's paired verdicts, which need each seed's accuracy, come from it as they came from the run; and the
estimate reads from it how many steps a job of the same size took before it stopped (`earlier_steps`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from common.journals import set_aside_torn_line
from common.options import OptionError
from experiments.benchmark.definition import STUDY_PREFIX, rebuild
from experiments.benchmark.ledger import COMPLETED, Ledger, at_target
from experiments.benchmark.stages import TUNE
from experiments.sweep.storage import stored_definition

RECORDS = Path("docs/records")
SUFFIX = ".journal"


def path_of(name: str, records: Path | None = None) -> Path:
    """Where the record of benchmark `name` lives: docs/records/benchmark-NAME.journal (or under `records`)."""
    return (records or RECORDS) / f"{STUDY_PREFIX}{name}{SUFFIX}"


def load(path: Path, *, device: str = "cpu") -> Ledger:
    """The benchmark a record holds, its cells resolved again here on `device` (no run needs them), and its state.
    A file that is not one benchmark's storage is a one-sentence error."""
    # Read a copy: reading leaves the record as it is, but for a last line that was cut off (set aside beside it).
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        try:
            set_aside_torn_line(path)
            shutil.copyfile(path, copy)
            storage = JournalStorage(JournalFileBackend(str(copy)))
            names = [name for name in optuna.get_all_study_names(storage) if name.startswith(STUDY_PREFIX)]
        except OptionError:  # a line of the journal that is not JSON, named in a sentence of its own
            raise
        except (OSError, ValueError) as error:
            raise OptionError(f"Benchmark record {str(path)!r} cannot be read ({error}); accepted: a benchmark's "
                              "journal file, as `attnlab results --keep NAME` writes it.") from None
        if len(names) != 1:
            raise OptionError(f"Benchmark record {str(path)!r} holds {len(names)} benchmarks; accepted: the journal "
                              "of exactly one.")
        definition = stored_definition(storage, names[0], kind="benchmark", shown=str(path))
        benchmark = rebuild(definition, study_name=names[0], device=device, storage_url=None,
                            runs_dir=path.parent, heartbeat_seconds=60)
        trials = optuna.load_study(study_name=names[0], storage=storage).get_trials(deepcopy=False)
    return Ledger(benchmark, trials)


def records(folder: Path | None = None) -> list[Path]:
    """Every benchmark record under `folder` (default: docs/records/), by name."""
    return sorted((folder or RECORDS).glob(f"{STUDY_PREFIX}*{SUFFIX}"))


def keep(name: str, runs_dir: Path, records_folder: Path | None = None) -> Path:
    """Copy benchmark `name`'s journal (RUNS_DIR/benchmark/NAME/jobs.journal) into the records, refusing one of
    which a job has not settled: a record is a finished leaderboard."""
    journal = runs_dir / "benchmark" / name / "jobs.journal"
    if not journal.exists():
        raise OptionError(f"Benchmark {name!r} has no storage at {journal}; accepted: the name of a benchmark run "
                          "with the embedded store under --runs-dir.")
    ledger = load(journal)
    if not ledger.complete:
        raise OptionError(f"Benchmark {name!r} has jobs that have not settled; accepted: a benchmark whose every job "
                          "has (run `make benchmark` with the same variables to finish it).")
    target = path_of(name, records_folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(journal, partial)
    partial.replace(target)  # atomic: a reader never sees half a record
    return target


def outdone_steps(result: dict, soonest: int | None) -> int:
    """The steps a tuning run takes under today's rule that a run not at the target by the step where a sibling
    reached it stops there (`experiments.benchmark.ledger.outdone`): a record made before the rule holds such runs
    at their full length, and replaying the rule on their learning curves predicts the length they take now. A run
    that reached the target itself by then, or one that stopped already, keeps its steps."""
    steps, reached = int(result["steps"]), result.get("target_step")
    if soonest is None or (reached is not None and reached <= soonest):
        return steps
    return min([steps, *(step for step, _, _ in result.get("curve") or [] if step >= soonest)])


def earlier_steps(ledger: Ledger) -> dict[tuple[str, str, str, str], list[int]]:
    """Per (variant, task, size, stage): the steps each completed job of that size and stage took (fewer than its
    profile's where it stopped at the target), a tuning job's as `outdone_steps` replays them: stopped by the
    siblings queued before it (`Ledger.queued`), which have settled by the time it runs."""
    found: dict[tuple[str, str, str, str], list[int]] = {}
    for cell in ledger.cells:
        completed = [state for state in cell.jobs
                     if state.state == COMPLETED and state.result and state.result.get("steps")]
        order = {job.key: index for index, job in enumerate(ledger.queued([state.job for state in completed]))}
        for state in completed:
            job, result = state.job, state.result
            size = ledger.benchmark.stage(job.stage).size(job)
            soonest = min((step for other in completed if other.job.stage == TUNE
                           and order[other.job.key] < order[job.key]
                           and (step := at_target(other.result, ledger.benchmark.target)) is not None), default=None)
            steps = outdone_steps(result, soonest) if job.stage == TUNE else int(result["steps"])
            found.setdefault((job.variant, job.task, size, job.stage), []).append(steps)
    return found
