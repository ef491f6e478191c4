"""`attnlab speed` and gpu-check skip a contender whose next length would outgrow the time or memory at hand,
with one prediction: quadratic growth from the last length measured."""

import functools

import torch

from experiments.speed import kernels

GIB = 2**30


def test_the_budget_skip_predicts_quadratic_growth_of_time_and_memory():
    skip = functools.partial(kernels.predicted_too_costly, memory_at_hand=lambda: 100 * GIB, share=0.8,
                             memory_name="free GPU memory")
    last = (1024, 0.1, 1 * GIB)  # 0.1 s per call and a peak of 1 GiB at length 1024
    assert skip(None, 4096, budget=1.0) == ""  # nothing measured yet: try it
    assert skip(last, 2048, budget=1.0) == ""  # 0.4 s, 4 GiB
    assert skip(last, 4096, budget=1.0) == "skipped: predicted 1.6s per call > budget 1s"
    assert skip(last, 4096, budget=1.0, power=1) == ""  # 0.4 s where time grows no faster than n
    assert skip(last, 16384, budget=1000.0) == "skipped: predicted peak 256.0 GiB > 80% of free GPU memory"


def test_speed_records_a_length_predicted_over_budget_as_skipped(tmp_path):
    table, _ = kernels.run(specs=[], kernels=["naive"], lengths=[16, 4096], causal_modes=[True], batch=1, heads=1,
                           head_dim=8, repeats=1, budget=1e-9, device=torch.device("cpu"), out_dir=tmp_path,
                           quiet=True)
    assert list(table["seq_len"]) == [16, 4096]
    assert table["status"].iloc[0] == "ok"
    assert table["status"].iloc[1].startswith("skipped: predicted") and "> budget 1e-09s" in table["status"].iloc[1]
