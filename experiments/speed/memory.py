"""Peak memory of a callable, on CPU and CUDA, for the speed tables and memory tests (its wall time:
`experiments.timing`).

CPU peak memory is the process's resident high-water mark (Linux `VmHWM`), reset just before the call
through /proc/self/clear_refs, minus the resident size at that moment. glibc's allocator is told to
hand every allocation above 64 KiB straight back to the system, so memory freed by an earlier call is
not silently reused and missed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
from collections.abc import Callable
from pathlib import Path

import torch

_M_MMAP_THRESHOLD = -3
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(_M_MMAP_THRESHOLD, 64 * 1024)  # a fixed threshold also stops glibc from raising it
    return libc


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
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
    _CLEAR_REFS.write_text("5")  # resets VmHWM to the current resident size
    before = _status_kib("VmRSS")
    fn()
    return float((_status_kib("VmHWM") - before) * 1024)
