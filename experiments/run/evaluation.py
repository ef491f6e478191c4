"""What an evaluation reads and what it decides: accuracy on the held-out sets, and whether a run stops there.

A run evaluates every `train.eval_every` steps and after its last (`experiments.run.train`). The last evaluation
reads every held-out set in full: the test set (per distance bucket too), each extra set (splits, other lengths)
and the validation set. The evaluations before it, the interim ones, read what the run's config asks:

- `train.interim_test` (default true): the test and extra sets too, for learning curves on the test set. A
  benchmark turns it off, so that its test sets are read once, at the end of each run.
- `train.interim_validation` (default none: all): this many validation examples, evenly spaced through the set,
  so that every distance bucket keeps its share. What the stop at `train.target_accuracy` and a sweep's pruning
  read is then this subset; the run's validation accuracy, what selection reads, is the full set's, at the end.

A run stops at the first evaluation whose validation accuracy reaches `train.target_accuracy` (`reached_target`).
Where that evaluation was an interim one, the full evaluation follows at the same step and becomes the run's
last, marked `"target_reached": true` (`stopped_at_target`), whatever the full set then reads.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from experiments import tasks
from experiments.run.config import TrainConfig
from experiments.run.model import Transformer


@torch.no_grad()
def evaluate(model: Transformer, test_set: tasks.Batch, batch_size: int,
             buckets: list[tuple[int, int]]) -> dict[str, Any]:
    """Accuracy over the scored positions of a held-out set, overall and per dependency-distance bucket
    (no buckets: overall only)."""
    model.eval()
    correct, distance, losses = [], [], []
    for start in range(0, test_set.inputs.shape[0], batch_size):
        inputs = test_set.inputs[start : start + batch_size]
        targets = test_set.targets[start : start + batch_size]
        logits = model(inputs)  # (B, T, classes)
        scored = targets != tasks.IGNORE
        losses.append(F.cross_entropy(logits[scored], targets[scored], reduction="sum"))
        correct.append(logits[scored].argmax(-1) == targets[scored])
        distance.append(test_set.distance[start : start + batch_size][scored])
    model.train()
    correct, distance = torch.cat(correct).float(), torch.cat(distance)
    by_distance = []
    for lo, hi in buckets:
        inside = (distance >= lo) & (distance <= hi)
        count = int(inside.sum())
        accuracy = float(correct[inside].mean()) if count else None
        by_distance.append({"lo": lo, "hi": hi, "accuracy": accuracy, "count": count})
    result = {"test_accuracy": float(correct.mean()), "test_loss": float(torch.stack(losses).sum() / correct.numel())}
    return {**result, "accuracy_by_distance": by_distance} if buckets else result


def evaluate_all(model: Transformer, test_set: tasks.Batch, extra_sets: dict[str, tasks.Batch], batch_size: int,
                 buckets: list[tuple[int, int]]) -> dict[str, Any]:
    """The test set's accuracy (per distance bucket too), and each extra held-out set's under "splits"."""
    result = evaluate(model, test_set, batch_size, buckets)
    if extra_sets:
        result["splits"] = {name: evaluate(model, batch, batch_size, []) for name, batch in extra_sets.items()}
    return result


def spread(batch: tasks.Batch, count: int | None) -> tasks.Batch:
    """`count` examples of `batch` evenly spaced through it (a held-out set is laid out bucket by bucket, so each
    bucket keeps its share); all of it where `count` is None or not smaller."""
    size = batch.inputs.shape[0]
    if count is None or count >= size:
        return batch
    index = torch.linspace(0, size - 1, count, device=batch.inputs.device).round().long()
    return tasks.Batch(batch.inputs[index], batch.targets[index], batch.distance[index],
                       {name: values[index] for name, values in batch.metadata.items()})


def held_out(model: Transformer, train: TrainConfig, sets: tuple[tasks.Batch, dict[str, tasks.Batch], tasks.Batch],
             buckets: list[tuple[int, int]], final: bool) -> dict[str, Any]:
    """An evaluation's figures from the (test, extra, validation) sets: every set in full where `final`,
    otherwise what `train.interim_test` and `train.interim_validation` ask (the module's docstring)."""
    test_set, extra_sets, validation_set = sets
    scores = evaluate_all(model, test_set, extra_sets, train.batch_size, buckets) \
        if final or train.interim_test else {}
    validation = spread(validation_set, None if final else train.interim_validation)
    figures = evaluate(model, validation, train.batch_size, [])
    return {**scores, "val_accuracy": figures["test_accuracy"], "val_loss": figures["test_loss"],
            **({} if validation is validation_set else {"val_examples": validation.inputs.shape[0]})}


def is_complete(train: TrainConfig, line: dict[str, Any]) -> bool:
    """Whether an interim evaluation's line already holds what a last one would (every set read in full)."""
    return train.interim_test and "val_examples" not in line


def validation_accuracy(line: dict[str, Any]) -> float | None:
    """The validation accuracy an evaluation line (or a summary) reports: what sweeps select and prune on,
    so the test set stays an untouched test set. None where there is none (a record from before it)."""
    return line.get("val_accuracy")


def reached_target(train: TrainConfig, line: dict[str, Any] | None) -> bool:
    """Whether an evaluation line's validation accuracy reaches `train.target_accuracy` (never without one)."""
    accuracy = validation_accuracy(line) if line else None
    return train.target_accuracy is not None and accuracy is not None and accuracy >= train.target_accuracy


def stopped_at_target(train: TrainConfig, line: dict[str, Any] | None) -> bool:
    """Whether the run stopped at this evaluation for reaching the target: its mark, or (a line without one,
    from before interim evaluations) its own validation accuracy. A run resumed after it trains no further."""
    if not line:
        return False
    return bool(line["target_reached"]) if "target_reached" in line else reached_target(train, line)
