"""Where a result came from: the commit of the code that produced it."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


def _checked_out() -> str | None:
    """The commit checked out where this code lives now, or None outside a git checkout."""
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None


@functools.cache
def git_commit() -> str | None:
    """The commit of the code this process runs: the one checked out when this module was imported, read once, so
    that a run that trains for an hour records the code it ran even if the checkout moves on meanwhile."""
    return _checked_out()


git_commit()  # at import, beside the rest of the code this process loads
