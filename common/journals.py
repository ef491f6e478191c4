"""Optuna's journal files as every reader opens them: the sweeps', the benchmark's, the report's, and a benchmark
record before it is copied. A last line that was cut (a worker killed mid-write, a full disk) is set aside beside
the journal, which is read up to its last whole line; a whole line that is not JSON is a one-sentence error naming
the file and the line.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path

from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.storages.journal._file import get_lock_file  # how Optuna's backend holds its lock while it appends

from common.options import OptionError


def journal_backend(path: Path) -> JournalFileBackend:
    """Optuna's backend of the journal file `path`, which `set_aside_torn_line` has read first."""
    set_aside_torn_line(path)
    return JournalFileBackend(str(path))


def set_aside_torn_line(path: Path) -> None:
    """Make the journal `path` end at its last whole line: a last line that was cut before its newline (a worker
    killed mid-write, a full disk) is moved to `<journal>.torn-<time>` beside it, never deleted, and stderr says so
    in one line. A whole line that is not one of Optuna's records is a one-sentence error naming the file and the
    line.

    Read first without a lock (a reader in a read-only folder takes none); where the last line looks cut, read
    again under Optuna's own lock (`JournalFileBackend.append_logs` holds it while it writes), so that a line a
    live worker is still appending is waited for, never cut (a lock its writer left when killed is taken over after
    Optuna's grace period, as Optuna's next append would)."""
    if not path.is_file() or not _torn_line(path, path.read_bytes()):
        return
    with get_lock_file(JournalFileSymlinkLock(str(path))):
        data = path.read_bytes()
        torn = _torn_line(path, data)
        if not torn:
            return
        aside = path.with_name(f"{path.name}.torn-{datetime.now():%Y%m%dT%H%M%S%f}")
        with aside.open("xb") as file:  # written and on disk before the journal loses it
            file.write(torn)
            file.flush()
            os.fsync(file.fileno())
        os.truncate(path, len(data) - len(torn))
    print(f"Journal {path} ended in a line that was cut off: its last {len(torn)} bytes are set aside in {aside}, "
          "and it is read up to its last whole line.", file=sys.stderr)


def _torn_line(path: Path, data: bytes) -> bytes:
    """What follows the last newline of the journal `data`: a line that was cut (b"" where it ends with one). A
    whole line that is not a JSON object is a one-sentence error naming the file and the line."""
    *whole, torn = data.split(b"\n")
    for number, line in enumerate(whole, start=1):
        try:
            problem = None if isinstance(json.loads(line), dict) else "JSON, but not an object"
        except ValueError as error:
            problem = str(error).splitlines()[0]
        if problem is not None:
            raise OptionError(f"Journal {path} line {number} is not one of Optuna's records ({problem}); accepted: "
                              f"a journal of Optuna's JSON lines: restore it from a copy, or remove line {number}.")
    return torn
