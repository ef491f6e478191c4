"""The encoded data of a file-reading task, cached beside the data as numpy arrays loaded memory-mapped.

A data set is encoded once (its files read, tokenised, split) into named arrays, saved under the cache folder as
`<name>.<key>/<array>.npy`, where the key is a digest of the cache's format, the encoding's parameters and every
source file's path, size and modification time. A later load whose key matches maps those files (np.load with
mmap_mode="r": seconds, whatever the data's size); a changed, added or removed source file changes the key, and
the data is encoded again. A cache is written into a temporary folder and renamed into place, so a reader never
sees half of one; the caches of the same name with another key are then removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from common.options import OptionError

CACHE_FOLDER = ".attnlab-cache"  # under the data folder, unless task.cache_dir names another
FORMAT = 1  # raise when what a cache holds changes, so that every earlier cache is encoded again


def cache_key(sources: Iterable[Path], root: Path, parameters: dict[str, Any]) -> str:
    """The digest of FORMAT, `parameters` and each source's path (relative to `root`), size and mtime."""
    stats = []
    for path in sorted(sources):
        status = path.stat()
        stats.append([str(path.relative_to(root)), status.st_size, status.st_mtime_ns])
    text = json.dumps([FORMAT, parameters, stats], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _load(folder: Path) -> dict[str, np.ndarray]:
    return {path.stem: np.load(path, mmap_mode="r") for path in sorted(folder.glob("*.npy"))}


def cached(cache_root: Path, name: str, key: str, encode: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays `encode()` returns, from `cache_root/<name>.<key>/` when it is there, else encoded and saved there
    first (then other keys' caches of `name` removed). `name` holds no dot."""
    folder = cache_root / f"{name}.{key}"
    if folder.is_dir():
        return _load(folder)
    arrays = encode()
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        temporary = cache_root / f".{name}.{key}.{os.getpid()}.tmp"
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir()
        for array_name, array in arrays.items():
            np.save(temporary / f"{array_name}.npy", np.ascontiguousarray(array))
        try:
            temporary.rename(folder)
        except OSError:  # another process renamed its copy first: keep that one
            shutil.rmtree(temporary, ignore_errors=True)
    except OSError as error:
        raise OptionError(f"The cache folder {cache_root} cannot be written ({error.strerror or error}); accepted: "
                          "--set task.cache_dir=DIR, a folder this user may write.") from None
    for stale in cache_root.glob(f"{name}.*"):
        if stale != folder and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    return _load(folder)
