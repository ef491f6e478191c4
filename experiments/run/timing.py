"""Wall time of a callable on CPU and CUDA. Apart from `experiments.speed.memory`, whose import changes how glibc
allocates (for its peak-memory readings): what times a training run must time it as a training process runs."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def seconds(fn: Callable[[], object], device: torch.device) -> float:
    """Wall time of one call, waiting for the device to finish."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
