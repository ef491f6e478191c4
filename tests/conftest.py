import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One thread per worker: `make test` runs a worker per core, and the tests' tensors are tiny, so a second
    # thread in each worker only contends for a core another worker is using.
    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
