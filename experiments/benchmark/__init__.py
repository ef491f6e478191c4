"""`make benchmark`: every variant on every task, compared by one protocol, on one machine or many.

    attnlab benchmark                                             # every variant and baseline x the suite
    attnlab benchmark --variant dense,local --task mqar,listops --seeds 3 --profile standard
    attnlab benchmark --workers 4                                 # four processes on this machine
    attnlab benchmark --storage postgresql://user@host/db         # the same command on every machine

The protocol (docs/benchmark.md):

1. Cells: each variant on each task. A variant that cannot run a task by construction (a bidirectional-only
   variant on a task that needs causality) is listed as skipped with the reason, never dropped. Each cell's
   model is sized to within 10% of dense's parameters on its task, both ways (`parity`), or listed unranked.
2. Tuning, one budget for every variant: each cell trains once per learning rate of a shared grid (the
   multiples `--lr-multiples`, default 1, 3 and 9, of the task profile's learning rate), with the tuning
   seed, and the learning rate of highest validation accuracy is chosen; the test set plays no part. Where it
   lies at an edge of the grid, the next multiple beyond it is tuned too, up to `--extend-grid` (default 2).
   Under a target, a tuning run still short of it where a sibling has reached it stops there: it can no
   longer be chosen (`ledger.outdone`).
3. Confirmation: the chosen learning rate trains again with `--seeds` fresh seeds (the seeds after the
   tuning seed); the test accuracy is reported as mean and 95% interval over those seeds.
4. Capacity: once confirmation has settled, the chosen learning rate trains again at other model widths
   (`--capacity-widths`, default 0.5 times the cell's) and at other values of the task's capacity
   option (`--capacity-scales`, default 2 times: MQAR's key-value pairs, ...), with the first
   `--capacity-seeds` confirmation seeds (default 1); the page draws accuracy against width and against count.
5. Accounting: parameters, steps, tokens and wall time of every run; failures and divergences with
   their reasons.

Every run is a job in one Optuna storage, the sweeps' own (`experiments.sweep.storage`): the journal file
RUNS_DIR/benchmark/NAME/jobs.journal on one machine, a database across machines. Running the same command
again continues where it stopped. The modules, by job:

    definition  the benchmark validated and its cells resolved before anything runs, from its options
                (`experiments.schemas.benchmark`) or from its stored definition (a worker process)
    stages      tuning, confirmation, capacity: each stage one object, when a cell is ready for it and its jobs
    parity      each cell's model sized to dense's parameters on its task, resolved with it
    capacity    each cell's capacity points (its sizes on each capacity axis), resolved with it
    ledger      each job's and each cell's state, read from the storage
    worker      plan, take a job, train it, write its figures; until every job has settled
    command     `attnlab benchmark` from start to end; one worker process of it (`join`)
    estimate    `attnlab benchmark --estimate`: what remains of it, timed here before it runs
"""

from experiments.benchmark.command import open_study, run
from experiments.benchmark.definition import Benchmark, Cell, build, rebuild
from experiments.benchmark.ledger import CellState, JobState, Ledger
from experiments.benchmark.stages import STAGES, Job, Stage
from experiments.benchmark.worker import work

__all__ = ["STAGES", "Benchmark", "Cell", "CellState", "Job", "JobState", "Ledger", "Stage", "build", "open_study",
           "rebuild", "run", "work"]
