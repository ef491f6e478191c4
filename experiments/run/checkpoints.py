"""What a checkpoint must hold for a run to resume from it: every key `experiments.run.train.save` writes, of its type,
and every tensor of the shape the run's model, optimiser, data generator and running sums have. A checkpoint that
falls short is named in one sentence (`RunRecord.mismatched_checkpoint`) before anything is loaded or written;
the report's attention pictures check the weights alone (`weights_mismatch`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _named(names: list[str]) -> str:
    return ", ".join(map(repr, names[:3])) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def tensor_mismatch(what: str, saved: Any, shape: tuple[int, ...], dtype: torch.dtype | None = None) -> str | None:
    """Why `saved` cannot stand for a tensor of `shape` (and `dtype`, where given), or None."""
    if not isinstance(saved, torch.Tensor):
        return f"{what} is a {type(saved).__name__}, not a tensor"
    if saved.shape != shape:
        return f"{what} has shape {tuple(saved.shape)} in the checkpoint and {tuple(shape)} in this run"
    if dtype is not None and saved.dtype != dtype:
        return f"{what} holds {saved.dtype}, not {dtype}"
    return None


def weights_mismatch(checkpoint: dict[str, Any], model: nn.Module) -> str | None:
    """Why the checkpoint's weights cannot be loaded into `model` (none, a parameter missing or extra, or of
    another shape), or None."""
    saved, expected = checkpoint.get("model"), model.state_dict()
    if not isinstance(saved, dict):
        return ("it lacks 'model'" if saved is None
                else f"its 'model' is a {type(saved).__name__}, not a dict of tensors")
    missing, extra = [name for name in expected if name not in saved], [name for name in saved if name not in expected]
    if missing:
        return f"its model lacks the parameters {_named(missing)}, which this run's model has"
    if extra:
        return f"its model has the parameters {_named(extra)}, which this run's model lacks"
    return next(filter(None, (tensor_mismatch(f"model parameter {name!r}", saved[name], value.shape)
                              if isinstance(value, torch.Tensor) else _extra_state_mismatch(name, saved[name], value)
                              for name, value in expected.items())), None)


def _extra_state_mismatch(name: str, saved: Any, expected: Any) -> str | None:
    """A module's extra state (Performer's redraw count and generator, say: `get_extra_state`) is of the type the
    run's module gives, or None."""
    if type(saved) is not type(expected):
        return f"its model entry {name!r} is a {type(saved).__name__}, not the {type(expected).__name__} it holds here"
    return None


def moments_mismatch(saved: Any, optimizer: torch.optim.Optimizer, model: nn.Module) -> str | None:
    """Why the checkpoint's optimiser state cannot be `optimizer`'s (not an optimiser's state, groups of other sizes,
    a moment of another shape than its parameter), or None."""
    if not (isinstance(saved, dict) and isinstance(saved.get("state"), dict)
            and isinstance(saved.get("param_groups"), list)
            and all(isinstance(group, dict) and isinstance(group.get("params"), list)
                    and all(isinstance(index, int) for index in group["params"]) for group in saved["param_groups"])):
        return "its 'optimizer' is not an optimiser's state (a dict of 'state' and 'param_groups')"
    sizes = [len(group["params"]) for group in saved["param_groups"]]
    expected = [len(group["params"]) for group in optimizer.param_groups]
    if sizes != expected:
        return f"its optimiser has groups of {sizes} parameters in the checkpoint and of {expected} in this run"
    names = {parameter: name for name, parameter in model.named_parameters()}
    for saved_group, group in zip(saved["param_groups"], optimizer.param_groups, strict=True):
        for index, parameter in zip(saved_group["params"], group["params"], strict=True):
            moments, name = saved["state"].get(index, {}), names[parameter]  # no moments before its first step
            if not isinstance(moments, dict):
                return f"its optimiser state of parameter {name!r} is a {type(moments).__name__}, not a dict"
            wrong = next(filter(None, (
                tensor_mismatch(f"the optimiser's {key} of parameter {name!r}", value, () if key == "step" else
                                parameter.shape) for key, value in moments.items())), None)
            if wrong:
                return wrong
    return None


def checkpoint_mismatch(checkpoint: dict[str, Any], *, model: nn.Module, optimizer: torch.optim.Optimizer,
                        generator_state: torch.Tensor, running_sums: torch.Tensor) -> str | None:
    """Why a run of `model`, `optimizer`, its data generator's state and its running sums cannot resume from
    `checkpoint` (what `experiments.run.train.save` writes): a key missing, a value of the wrong type, a tensor of
    another shape than the run's; or None."""
    sums = "running_sums" if "running_sums" in checkpoint else "window"  # its name in checkpoints before the rename
    missing = [key for key in ("model", "optimizer", "generator", sums, "step", "history", "wall_seconds",
                               "train_seconds") if key not in checkpoint]
    if missing:
        return f"it lacks {_named(missing)}"
    step = checkpoint["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return f"its step is {step!r:.40} (a {type(step).__name__}), not an integer >= 0"
    for key in ("wall_seconds", "train_seconds"):
        if not isinstance(checkpoint[key], (int, float)) or isinstance(checkpoint[key], bool):
            return f"its {key} is {checkpoint[key]!r:.40} (a {type(checkpoint[key]).__name__}), not a number"
    history = checkpoint["history"]
    if not isinstance(history, list) or not all(isinstance(line, dict) and line.get("kind") in ("train", "eval")
                                                for line in history):
        return "its history is not a list of train and eval lines"
    return (weights_mismatch(checkpoint, model) or moments_mismatch(checkpoint["optimizer"], optimizer, model)
            or tensor_mismatch("its generator state", checkpoint["generator"], generator_state.shape, torch.uint8)
            or tensor_mismatch(f"its {sums}", checkpoint[sums], running_sums.shape))
