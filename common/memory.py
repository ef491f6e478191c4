"""The memory a device has, so that a size that cannot fit is refused in one sentence before anything is allocated
(rather than ending in the allocator's traceback after minutes of setup)."""

from __future__ import annotations

import math
import os

import torch

from common.options import OptionError


def device_memory(device: str) -> tuple[float, str]:
    """The bytes of memory on `device` and their name: a CUDA device's total memory (read from its properties,
    which makes no CUDA context), else the machine's physical memory; infinity where the system does not say."""
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(torch.device(device).index or 0)
        return float(properties.total_memory), f"memory on {properties.name}"
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")), "memory on this machine"
    except (ValueError, OSError):  # a system without these sysconf names
        return math.inf, "memory on this machine"


def check_fits(what: str, needed: float, device: str, accepted: str) -> None:
    """Refuse `what` (a sentence's subject, e.g. "A batch of 10 examples") when its `needed` bytes exceed all the
    memory `device` has: only sizes that cannot fit whatever else runs, so that no size that could run is refused."""
    total, name = device_memory(device)
    if needed > total:
        raise OptionError(f"{what} needs {needed / 2**30:,.1f} GiB, more than the {total / 2**30:,.1f} GiB of {name}; "
                          f"accepted: {accepted}.")
