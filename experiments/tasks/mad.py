"""What the tasks of MAD's suite share (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid Architectures",
repository athms/mad-lab: `mad/configs.py`, `mad/data/instances.py`, `configs/tasks/*.yml`): the mad profile, the
levels of MAD's ladder of difficulty, and the bookkeeping of keys that come back.

MAD trains 2 blocks of width 128 (`MADModelConfig`) with AdamW, batches of 128, for 200 epochs over a fixed
training set (12,800 examples at a task's baseline), the learning rate falling on a cosine to 1e-6, with no
warm-up and no clipping; it tests on 1,280 examples. Its benchmark (`make_benchmark_mad_configs`) trains each
level of a task at learning rates 1e-4, 5e-4 and 1e-3 and weight decays 0 and 0.1; a model's MAD score is its
best test accuracy over that grid, averaged over the levels. The mad profile is MAD's baseline at 5e-4 (MAD's
default) and weight decay 0; a level with fewer training examples trains fewer steps, MAD's 200 epochs (`mad_levels`).

Deviations every task of the suite shares: the model is attnlab's Transformer (a GELU MLP of 4 x width, learned
absolute positions, 16 heads of width 8), where MAD's has SwiGLU and rotary embeddings; a training batch draws its
examples from the fixed set uniformly with replacement, not in shuffled epochs; the cosine ends at 1e-6 / 5e-4 of the
peak whatever the peak, so at 2e-7 to 2e-6 over MAD's grid. The recall tasks add one: their loss is over the scored
positions only, where MAD trains them as language models, next-token prediction at every position (keys and noise
included, which nothing predicts).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from common.options import require
from experiments.tasks.base import MAD_PROFILE, Profile
from experiments.tasks.registry import TASK_SETS, task_class

# MAD's paper and code, the start of `Task.paper` of each task of the suite (which names the generator it follows).
PAPER = "Poli et al. 2024, \"Mechanistic Design and Scaling of Hybrid Architectures\" (MAD), athms/mad-lab's"
# The deviations every task of the suite shares, the end of its `Task.deviations` (the module's docstring says why).
SHARED_DEVIATIONS = ("attnlab's Transformer (GELU MLP, learned positions) where MAD's has SwiGLU and rotary embeddings",
                     "a batch draws its examples from the fixed training set with replacement, not in shuffled epochs")
# What the recall tasks add: MAD trains them as language models.
NEXT_TOKEN_DEVIATION = ("the loss is over the scored positions only, where MAD trains next-token prediction at every "
                        "position")


MAD_EPOCHS = 200  # MADConfig.epochs
MAD_BATCH_SIZE = 128  # MADConfig.batch_size
MAD_LR = 5e-4  # MADConfig.lr, the middle of the benchmark's grid
MAD_MIN_LR = 1e-6  # MADConfig.min_lr, where its cosine ends
MAD_TEST_SIZE = 1280  # MADConfig.num_test_examples
MAD_TRAIN_EXAMPLES = 12800  # every baseline's num_train_examples but memorization's
MAD_MODEL = {"dim": 128, "depth": 2, "heads": 16}  # 2 blocks of width 128; MAD's mh-attention has 16 heads
# The quick profile of a task sized after MAD alone: its options' defaults, the other tasks' quick model and budget.
QUICK_PROFILE = Profile(options={}, model={"dim": 64, "depth": 2, "heads": 4},
                        train={"steps": 1000, "batch_size": 64, "lr": 1e-3, "eval_every": 100})
EVALUATIONS = 20  # evaluations over a mad run
TRAIN_EXAMPLES_HELP = "examples of the fixed training set, drawn once for every run seed (MAD's); 0: fresh examples"


def check_counts(options: Any) -> None:
    """The checks of the example counts every task of MAD's suite has: `train_examples` and `test_size`."""
    require(options.train_examples >= 0, "train_examples", options.train_examples,
            "an integer >= 0 (0: fresh examples in every batch)")
    require(options.test_size >= 1, "test_size", options.test_size, "an integer >= 1")


def keys_and_values(symbols: int, others: list[str]) -> tuple[int, int, list[str]]:
    """MAD's split of `symbols` tokens into keys, the first half (rounded down), and values, the rest: (num_keys,
    num_values, the vocabulary), which numbers the values first (the answers), then the keys, then `others`."""
    num_keys, num_values = symbols // 2, symbols - symbols // 2
    return num_keys, num_values, [*(f"v{value}" for value in range(num_values)),
                                  *(f"k{key}" for key in range(num_keys)), *others]


def budget(train_examples: int) -> dict[str, Any]:
    """MAD's budget for a training set of `train_examples`: 200 epochs of batches of 128, cosine to 1e-6."""
    steps = MAD_EPOCHS * math.ceil(train_examples / MAD_BATCH_SIZE)
    return {"steps": steps, "batch_size": MAD_BATCH_SIZE, "lr": MAD_LR, "weight_decay": 0.0, "warmup_steps": 0,
            "min_lr_ratio": MAD_MIN_LR / MAD_LR, "grad_clip": 0.0, "eval_every": max(1, steps // EVALUATIONS)}


def profile(options: dict[str, Any], train_examples: int = MAD_TRAIN_EXAMPLES) -> Profile:
    """The mad profile of a task whose MAD baseline sets `options`, on a fixed set of `train_examples`."""
    return Profile(options={**options, "train_examples": train_examples, "test_size": MAD_TEST_SIZE},
                   model=MAD_MODEL, train=budget(train_examples))


def mad_levels(name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """MAD's levels of difficulty of task `name`, each as (the task options it sets over the mad profile, the training
    budget it changes): the baseline ({}, {}) first, then each value of each option of `Task.mad_ladder` alone, as
    `make_benchmark_mad_configs` does. A level with fewer training examples trains MAD's 200 epochs of them.

        >>> mad_levels("compression")[1]
        ({'vocab_size': 32}, {})
        >>> mad_levels("compression")[-1][0], mad_levels("compression")[-1][1]["steps"]
        ({'train_examples': 800}, 1400)
    """
    ladder = task_class(name).mad_ladder
    if not ladder:
        raise ValueError(f"Task {name!r} is not one of MAD's; accepted: {', '.join(TASK_SETS[MAD_PROFILE])}.")
    return [({}, {}), *(({option: value}, budget(value) if option == "train_examples" else {})
                        for option, values in ladder.items() for value in values)]


def previous_occurrence(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For ids (batch, slots), the slot where each slot's id last came before and where it came first, (batch, slots)
    each: -1 where the id is new; its own slot first. An id below 0 never matches another (pass -1 - slot).

        >>> previous_occurrence(torch.tensor([[5, 7, 5, 5]]))
        (tensor([[-1, -1,  0,  2]]), tensor([[0, 1, 0, 0]]))
    """
    slots = ids.shape[1]
    unique = torch.where(ids < 0, -1 - torch.arange(slots, device=ids.device), ids)  # a negative id matches nothing
    sorted_ids, order = unique.sort(dim=1, stable=True)  # (batch, slots): equal ids together, in slot order
    repeats = torch.cat([torch.zeros_like(sorted_ids[:, :1], dtype=torch.bool),
                         sorted_ids[:, 1:] == sorted_ids[:, :-1]], 1)  # (batch, slots) in sorted order
    before = torch.cat([torch.full_like(order[:, :1], -1), order[:, :-1]], 1)
    index = torch.arange(slots, device=ids.device).expand_as(order)
    first_index = torch.where(repeats, 0, index).cummax(dim=1).values  # where each run of equal ids starts
    previous = torch.empty_like(order).scatter_(1, order, torch.where(repeats, before, -1))
    first = torch.empty_like(order).scatter_(1, order, order.gather(1, first_index))
    return previous, first
