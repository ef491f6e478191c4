"""Writing results so that no finished result is ever lost: atomic replacement, never half a file. Before anything is
written, the check that a folder a command will write can be written; and what the filesystem refused, as a sentence."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def writable_folder(path: Path, name: str) -> Path:
    """`path`, once it is known that a command can make it (or write into it): refused before anything is written
    or trained. A path that is a file or lies under one is the user's mistake, a ValueError naming `name` (the option
    the path came from); a folder the filesystem will not let this process write (a read-only filesystem, its
    permissions) is the environment's, the OSError that writing there would raise."""
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir():
        where = "is a file" if existing == path else f"lies under {existing}, which is a file"
        raise ValueError(f"{name} {path} {where}; accepted: a folder, existing or new, with no file along its path.")
    if os.statvfs(existing).f_flag & os.ST_RDONLY:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    return path


# What a user can do about the refusals a command meets most.
REMEDIES = {errno.ENOSPC: "free space there, or choose a folder on another disk",
            errno.EROFS: "choose a folder on a writable filesystem",
            **dict.fromkeys((errno.EACCES, errno.EPERM), "choose a folder this user can write, or let it write there")}


def refusal(error: OSError) -> str:
    """An OSError as one sentence: the path the filesystem refused, its reason, and what to do where that is known."""
    where = f" {error.filename}" if error.filename else ""
    remedy = f"; {REMEDIES[error.errno]}" if error.errno in REMEDIES else ""
    return f"The filesystem refused{where}: {error.strerror or error}{remedy}."


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder and an atomic rename. An OSError names
    `path` (a failed write names no file, a failed temporary file its own name)."""
    try:
        _write_and_rename(path, data)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from error


def _write_and_rename(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it private; give it the permissions of a new file
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())
