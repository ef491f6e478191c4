"""The training loop: one run of one variant on one task, read top to bottom.

The same function serves a single run, a suite and (later) a sweep trial. Same seed and same device
give the same numbers; a run resumed from its checkpoint ends with the metrics, bit for bit on CPU,
of the same run uninterrupted, because the checkpoint holds everything the next step depends on:
weights, optimiser moments, the data generator's state and the step.

On a GPU the step runs under bf16 autocast with float32 master weights (`train.precision`, "auto" =
bf16 on CUDA, float32 elsewhere; bf16 may be asked on CPU too, where CPU autocast runs it), optionally
through `torch.compile` (`train.compile`), on data generated on the device, and without waiting for
the device between logging intervals: nothing in the step reads a value back to the host.
"""

from __future__ import annotations

import math
import platform
import resource
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from common.provenance import git_commit
from experiments import attention_stats, tasks
from experiments.config import RunConfig, TrainConfig
from experiments.model import Transformer
from experiments.records import RunRecord


def learning_rate(step: int, train: TrainConfig) -> float:
    """Linear warm-up to `lr`, then cosine decay to `lr * min_lr_ratio` at the last step."""
    if step < train.warmup_steps:
        return train.lr * (step + 1) / train.warmup_steps
    progress = (step - train.warmup_steps) / max(1, train.steps - train.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return train.lr * (train.min_lr_ratio + (1 - train.min_lr_ratio) * cosine)


@torch.no_grad()
def evaluate(model: Transformer, eval_set: tasks.Batch, batch_size: int,
             buckets: list[tuple[int, int]]) -> dict[str, Any]:
    """Accuracy over the scored positions of the eval set, overall and per dependency-distance bucket
    (no buckets: overall only)."""
    model.eval()
    correct, distance, losses = [], [], []
    for start in range(0, eval_set.inputs.shape[0], batch_size):
        inputs = eval_set.inputs[start : start + batch_size]
        targets = eval_set.targets[start : start + batch_size]
        logits = model(inputs)  # (B, T, classes)
        scored = targets != tasks.IGNORE
        losses.append(F.cross_entropy(logits[scored], targets[scored], reduction="sum"))
        correct.append(logits[scored].argmax(-1) == targets[scored])
        distance.append(eval_set.distance[start : start + batch_size][scored])
    model.train()
    correct, distance = torch.cat(correct).float(), torch.cat(distance)
    by_distance = []
    for lo, hi in buckets:
        inside = (distance >= lo) & (distance <= hi)
        count = int(inside.sum())
        accuracy = float(correct[inside].mean()) if count else None
        by_distance.append({"lo": lo, "hi": hi, "accuracy": accuracy, "count": count})
    result = {"eval_accuracy": float(correct.mean()), "eval_loss": float(torch.stack(losses).sum() / correct.numel())}
    return {**result, "accuracy_by_distance": by_distance} if buckets else result


def evaluate_all(model: Transformer, eval_set: tasks.Batch, extra_sets: dict[str, tasks.Batch], batch_size: int,
                 buckets: list[tuple[int, int]]) -> dict[str, Any]:
    """The eval set's accuracy (per distance bucket too), and each extra held-out set's under "splits"."""
    result = evaluate(model, eval_set, batch_size, buckets)
    if extra_sets:
        result["splits"] = {name: evaluate(model, batch, batch_size, []) for name, batch in extra_sets.items()}
    return result


def scored_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the scored positions of (B, T, classes) logits and (B, T) targets.

    On CUDA through ignore_index, which needs no host sync (selecting the scored positions would wait
    for the device to count them); elsewhere on the selected positions, the numbers runs have always
    had there. The two give the same gradient bit for bit and may differ in the loss's last bit."""
    if logits.device.type == "cuda":
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=tasks.IGNORE)
    scored = targets != tasks.IGNORE
    return F.cross_entropy(logits[scored], targets[scored])


def resolved_precision(train: TrainConfig, device: torch.device) -> str:
    """"float32" or "bf16": what `train.precision` means on `device` ("auto": bf16 on CUDA only)."""
    if train.precision == "auto":
        return "bf16" if device.type == "cuda" else "float32"
    return train.precision


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if platform.system() == "Darwin" else 1024)


def train(
    config: RunConfig,
    record: RunRecord,
    *,
    quiet: bool = False,
    should_stop: Callable[[int], bool] = lambda step: False,
    should_prune: Callable[[int, float], bool] = lambda step, accuracy: False,
    tags: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train (or resume, when the record holds a checkpoint) and return the run's summary.

    `should_stop(step)` is asked before every step (True: stop, status "interrupted", resumable);
    `should_prune(step, eval_accuracy)` after every evaluation (True: stop, status "pruned", as a sweep's
    pruner decides); `tags` (e.g. a sweep's study and trial number) are copied into the summary.
    """
    device = torch.device(config.device)
    train_cfg = config.train

    # -- the task, the model, the optimiser ---------------------------------------------------------
    torch.manual_seed(config.seed)
    task = tasks.create_task(config.task, profile=config.profile, **config.task_options)
    model = Transformer(
        config.model, vocab_size=task.vocab_size, num_classes=task.num_classes, max_len=task.max_len,
        variant=config.variant, variant_options=config.variant_options, kernel=config.kernel,
    ).to(device)
    # Weight decay on matrices only: not on biases, norms, scalars per head or position tables.
    decays = {name: param.dim() >= 2 and "positions" not in name for name, param in model.named_parameters()}
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in model.named_parameters() if decays[n]], "weight_decay": train_cfg.weight_decay},
         {"params": [p for n, p in model.named_parameters() if not decays[n]], "weight_decay": 0.0}],
        lr=train_cfg.lr, betas=(0.9, 0.98),
    )
    generator = tasks.train_generator(config.seed, device)  # training data only; the eval set has its own seed
    eval_set = task.eval_set(device)  # a fixed held-out set from its own seed
    extra_sets = task.extra_eval_sets(device)  # splits and other lengths, each scored separately
    described = model.variant_module.describe()
    # bf16 autocast: matmuls and attention in bf16, reductions and the float32 master weights as they are.
    precision = resolved_precision(train_cfg, device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    step_model = torch.compile(model) if train_cfg.compile else model  # shares the weights with `model`

    # Training metrics are summed on the device between logging intervals (no host sync per step):
    # loss, correct predictions and scored positions.
    window = torch.zeros(3, dtype=torch.float64, device=device)

    # -- resume -------------------------------------------------------------------------------------
    step, history, wall_seconds, train_seconds = 0, [], 0.0, 0.0
    checkpoint = record.load_checkpoint()
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        generator.set_state(checkpoint["generator"])
        window.copy_(checkpoint["window"])
        step, history = checkpoint["step"], checkpoint["history"]
        wall_seconds, train_seconds = checkpoint["wall_seconds"], checkpoint["train_seconds"]
    last_eval = next((line for line in reversed(history) if line["kind"] == "eval"), None)

    def evaluation() -> dict[str, Any]:  # the eval line of this step
        with autocast:
            scores = evaluate_all(model, eval_set, extra_sets, train_cfg.batch_size, task.report_buckets())
        line = {"kind": "eval", "step": step, "wall_seconds": wall_seconds, **scores}
        if train_cfg.attention_stats:
            line["attention"] = attention_stats.measure(model, *attention_stats.probe_batch(eval_set))
        return line

    if train_cfg.attention_stats and step == 0:  # where the learning curves and the statistics start
        last_eval = evaluation()
        history.append(last_eval)

    def extra_accuracy(name: str) -> float | None:  # an extra held-out set's accuracy at the last evaluation
        return last_eval["splits"][name]["eval_accuracy"] if last_eval and "splits" in last_eval else None

    def summary(status: str, error: str | None = None) -> dict[str, Any]:
        tokens = step * train_cfg.batch_size * task.seq_len
        return {
            "run_id": record.run_id, "status": status, "error": error,
            "variant": config.variant, "variant_options": config.variant_options, "variant_name": described,
            "kernel": model.kernel, "precision": precision, "compiled": train_cfg.compile,
            "parameters": sum(param.numel() for param in model.parameters()),
            "task": config.task, "task_options": config.task_options,
            "profile": config.profile, "seed": config.seed,
            "eval_accuracy": last_eval["eval_accuracy"] if last_eval else None,
            "eval_loss": last_eval["eval_loss"] if last_eval else None,
            "chance_accuracy": task.chance_accuracy,
            "accuracy_by_distance": last_eval["accuracy_by_distance"] if last_eval else [],
            "accuracy_by_split": {split: extra_accuracy(split) for split in task.eval_splits},
            "accuracy_by_length": [
                {"length": task.seq_len, "accuracy": last_eval["eval_accuracy"] if last_eval else None},
                *({"length": length, "accuracy": extra_accuracy(f"length={length}")} for length in task.eval_lengths),
            ] if task.eval_lengths else [],
            "tags": dict(tags or {}),
            "steps": step, "total_steps": train_cfg.steps, "wall_seconds": wall_seconds,
            "tokens_per_second": tokens / train_seconds if train_seconds else None,
            "peak_memory_bytes": peak_memory_bytes(device), "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
            "torch_version": torch.__version__, "git_commit": git_commit(),
        }

    def save(status: str) -> None:
        record.save_checkpoint({
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
            "window": window, "step": step, "history": history, "wall_seconds": wall_seconds,
            "train_seconds": train_seconds,
        })
        record.write_metrics(history)
        record.write_summary(summary(status))

    record.write_summary(summary("running"))

    # -- the loop -----------------------------------------------------------------------------------
    started = time.perf_counter() - wall_seconds
    finite = torch.ones((), dtype=torch.bool, device=device)
    status = "completed"
    bar = tqdm(total=train_cfg.steps, initial=step, desc=f"{described}/{config.task}", disable=quiet,
               unit="step", dynamic_ncols=True)
    try:
        while step < train_cfg.steps:
            if should_stop(step):
                status = "interrupted"
                break
            step_started = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, train_cfg)
            batch = task.batch(train_cfg.batch_size, generator, device)
            with autocast:
                logits = step_model(batch.inputs)  # (B, T, classes)
                loss = scored_loss(logits, batch.targets)
            scored = batch.targets != tasks.IGNORE
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(
                model.parameters(), train_cfg.grad_clip if train_cfg.grad_clip > 0 else math.inf
            )
            finite &= torch.isfinite(loss) & torch.isfinite(grad_norm)
            optimizer.step()
            step += 1
            window += torch.stack([loss.detach().double(),
                                   ((logits.detach().argmax(-1) == batch.targets) & scored).sum().double(),
                                   scored.sum().double()])
            train_seconds += time.perf_counter() - step_started
            bar.update()

            logging = step % train_cfg.log_every == 0 or step == train_cfg.steps
            evaluating = step % train_cfg.eval_every == 0 or step == train_cfg.steps
            checkpointing = step % train_cfg.checkpoint_every == 0 or step == train_cfg.steps
            if logging or evaluating or checkpointing:
                # Divergence guard: a non-finite loss or gradient since the last check ends the run here,
                # before a checkpoint could keep the broken weights.
                if not bool(finite):
                    status = "diverged"
                    break
                wall_seconds = time.perf_counter() - started
            if logging:
                steps_in_window = (step - 1) % train_cfg.log_every + 1
                loss_sum, correct, scored_count = window.tolist()
                line = {"kind": "train", "step": step, "loss": loss_sum / steps_in_window,
                        "accuracy": correct / max(scored_count, 1.0),
                        "lr": learning_rate(step - 1, train_cfg), "grad_norm": float(grad_norm),
                        "wall_seconds": wall_seconds}
                history.append(line)
                bar.set_postfix(loss=f"{line['loss']:.3f}", acc=f"{line['accuracy']:.3f}")
                window.zero_()
            if evaluating:
                last_eval = evaluation()
                history.append(last_eval)
                bar.set_postfix(loss=f"{history[-2]['loss']:.3f}" if logging else None,
                                eval=f"{last_eval['eval_accuracy']:.3f}")
            if checkpointing:
                save("running")
            if evaluating and step < train_cfg.steps and should_prune(step, last_eval["eval_accuracy"]):
                status = "pruned"
                break
    except BaseException as error:
        bar.close()
        record.write_summary(summary("failed", f"{type(error).__name__}: {error}"))
        raise
    bar.close()
    wall_seconds = time.perf_counter() - started
    if status == "diverged":
        record.write_metrics(history)
        final = summary("diverged", f"non-finite loss or gradient by step {step}")
        record.write_summary(final)
        return final
    save(status)
    return summary(status)

