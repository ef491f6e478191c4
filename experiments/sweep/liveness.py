"""Which process runs a trial, and whether it still does: a worker is named by its machine, its process id
and the process's start time, so that a reused process id is not mistaken for the worker."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any


def _process_start(pid: int) -> str | None:
    """The start time of a live process (Linux /proc), None when there is none or it is a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *rest = stat.rsplit(")", 1)[1].split()
    return None if state in ("Z", "X") else rest[18]  # field 22 of proc(5): starttime


def machine() -> str:
    """This machine as processes on it see it: host name and, on Linux, the PID namespace."""
    try:
        return f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return socket.gethostname()


def this_worker() -> dict[str, Any]:
    return {"machine": machine(), "pid": os.getpid(), "started": _process_start(os.getpid())}


def worker_alive(worker: dict[str, Any]) -> bool:
    """Whether the process `worker` names still runs; True when it cannot be told (another machine)."""
    if worker["machine"] != machine():
        return True
    if worker["started"] is not None:  # Linux: same pid and same start time, so a reused pid is not mistaken
        return _process_start(worker["pid"]) == worker["started"]
    try:
        os.kill(worker["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
