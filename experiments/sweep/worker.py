"""One worker process of a sweep or a benchmark that `--workers N` started (`experiments.sweep.pool.spawn_workers`):

    python -m experiments.sweep.worker '{"kind": "benchmark", "study": "benchmark-quick", "storage_url": null, ...}'

It is given only what is local to it (`WorkerSettings`: where the storage is, the study's name, the runs folder,
the device, its index, quiet, the heartbeat interval; a sweep's target of complete trials). It opens the study,
reads the definition stored there when the study was created, builds the sweep or the benchmark from it (checked
and resolved again, as the command that created it did), and takes trials or jobs until there are none left.
"""

from __future__ import annotations

import sys

from experiments.benchmark.command import join as join_benchmark
from experiments.sweep.command import join as join_sweep
from experiments.sweep.pool import WorkerSettings

JOIN = {"sweep": join_sweep, "benchmark": join_benchmark}


def main(argv: list[str] | None = None) -> int:
    (text,) = sys.argv[1:] if argv is None else argv
    settings = WorkerSettings.from_json(text)
    try:
        return JOIN[settings.kind](settings)
    except ValueError as error:  # a study that holds no definition this version can run: one sentence
        print(f"attnlab {settings.kind} worker {settings.index}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
