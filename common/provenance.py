"""Where a result came from: the commit of the code that produced it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit() -> str | None:
    """The commit checked out where this code lives, or None outside a git checkout."""
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None
