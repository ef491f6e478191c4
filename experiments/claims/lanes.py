"""Every part of `make reproduce` in one pool of workers: each worker process goes through the parts in the same
order and takes jobs from one until none is left to take, then goes on to the next (`work(..., leave=True)`), so a
worker never waits while another runs a part's last job. Run one part after another, each with its own pool, every
part's last wave would leave a worker idle; here only the last part's does.

    python -m experiments.claims.lanes '{"index": 0, "parts": [{"kind": "benchmark", "study": ...}, ...]}'

A worker is given only what is local to it, as a benchmark's worker is (`WorkerSettings`, one per part); it reads
each part's definition from the part's storage. A signal stops it as it stops a benchmark's worker: the job in
flight is checkpointed and queued again, and the worker ends with 130 without going on.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass

from experiments.benchmark.command import join
from experiments.run.launch import StopFlag
from experiments.sweep.pool import WorkerSettings


@dataclass(frozen=True)
class Lanes:
    """What each worker of the pool is started with (`spawn_workers` reads `command` and `device`): every part's
    worker settings, in the order the workers take them."""

    parts: tuple[WorkerSettings, ...]
    device: str

    def command(self, index: int) -> list[str]:
        """The command line of worker `index`: the parts' settings as one JSON argument."""
        shown = {"index": index, "parts": [dataclasses.asdict(part) | {"index": index} for part in self.parts]}
        return [sys.executable, "-m", "experiments.claims.lanes", json.dumps(shown)]


def lane(parts: list[WorkerSettings]) -> int:
    """One worker: each part's jobs until none is left to take, part after part; 0 at the end, or the first other
    exit code (130 after a signal) at once."""
    should_stop = StopFlag().install()
    for part in parts:
        code = join(part, should_stop=should_stop, leave=True)
        if code != 0:
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    (text,) = sys.argv[1:] if argv is None else argv
    given = json.loads(text)
    parts = [WorkerSettings(**part) for part in given["parts"]]
    try:
        return lane(parts)
    except ValueError as error:  # a study that holds no definition this version can run: one sentence
        print(f"attnlab reproduce worker {given['index']}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
