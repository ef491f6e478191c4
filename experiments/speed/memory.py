"""Peak memory of a callable, on CPU and CUDA, for the speed tables and memory tests (its wall time:
`experiments.run.timing`).

CPU peak memory is the process's resident high-water mark (Linux `VmHWM`), reset just before the call
through /proc/self/clear_refs, minus the resident size at that moment. While a call is measured, glibc's
allocator is told to hand every allocation above 64 KiB straight back to the system, so memory freed by an
earlier call is not silently reused and missed. `attnlab speed` times its calls within `settled_allocator()`,
glibc's thresholds where its own dynamic ones settle in a process that frees large blocks (32 MiB to map, twice
that to trim), so that a timing sees the allocator of a training process rather than one that faults in every
large tensor's pages anew (which made the additive kernel look 2x slower).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import math
from collections.abc import Callable
from pathlib import Path

import torch

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MEASURING_MMAP = 64 * 1024  # every allocation above it goes straight back to the system when freed
_SETTLED_MMAP = 32 * 1024 * 1024  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: where the dynamic one stops
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(_M_MMAP_THRESHOLD, _MEASURING_MMAP)  # a fixed threshold also stops glibc from raising it
        return libc
    return None


_LIBC = _libc()


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_peak_supported() -> bool:
    return _STATUS.exists() and _CLEAR_REFS.exists()


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> float:
    """Extra memory at the peak of `fn()` over what was in use before it; NaN where unmeasurable."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return float(torch.cuda.max_memory_allocated(device) - before)
    if not cpu_peak_supported():
        return math.nan
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, _MEASURING_MMAP)  # a fixed threshold also stops glibc from raising it
        _LIBC.malloc_trim(0)
    _CLEAR_REFS.write_text("5")  # resets VmHWM to the current resident size
    before = _status_kib("VmRSS")
    fn()
    return float((_status_kib("VmHWM") - before) * 1024)


@contextlib.contextmanager
def settled_allocator():
    """Within: glibc's thresholds where its own dynamic ones settle in a training process (the speed command's
    timings); after: the mmap threshold back to the measuring one, 64 KiB (`peak_memory_bytes` trims the heap
    itself before it reads)."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, _SETTLED_MMAP)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, 2 * _SETTLED_MMAP)
    try:
        yield
    finally:
        if _LIBC is not None:
            _LIBC.mallopt(_M_MMAP_THRESHOLD, _MEASURING_MMAP)
