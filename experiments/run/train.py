"""The training loop: one run of one variant on one task, read top to bottom.

The same function serves a single run, a suite and a sweep trial. Same seed and same device give the
same numbers; a run resumed from its checkpoint ends with the metrics, bit for bit on CPU, of the same
run uninterrupted, because the checkpoint holds everything the next step depends on: weights,
optimiser moments, the data generator's state and the step.

On a GPU the step runs under bf16 autocast with float32 master weights (`train.precision`, "auto" =
bf16 on CUDA, float32 elsewhere; bf16 may be asked on CPU too, where CPU autocast runs it), optionally
through `torch.compile` (`train.compile`), on data generated on the device, and without waiting for
the device between logging intervals: nothing in the step reads a value back to the host.

`train` reads as its steps: `set_up` (task, model, optimiser, held-out sets: a `Run`, fixed), `resume`
(the `RunState` the loop changes, from the checkpoint or fresh), `begin` (the trackers started, `train.tracker`),
then per step `train_step`, and at their intervals `train_line` and `evaluation_line` (each recorded by
`record_line`, which sends it to the trackers too) and `save`; `finish` writes the `Summary`.
"""

from __future__ import annotations

import math
import platform
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from common.provenance import git_commit
from experiments import revisions, tasks
from experiments.run import attention_stats, evaluation
from experiments.run.build import Parts, build
from experiments.run.checkpoints import checkpoint_mismatch
from experiments.run.config import RunConfig, TrainConfig, due
from experiments.run.evaluation import reached_target, stopped_at_target, validation_accuracy
from experiments.run.model import Transformer, scored_loss
from experiments.run.optimizer import build_optimizer
from experiments.run.records import RunRecord, Summary, metric_line_as_today
from experiments.run.trackers import Trackers


def learning_rate(step: int, train: TrainConfig) -> float:
    """Linear warm-up to `lr`, then cosine decay to `lr * min_lr_ratio` at the last step."""
    if step < train.warmup_steps:
        return train.lr * (step + 1) / train.warmup_steps
    progress = (step - train.warmup_steps) / max(1, train.steps - train.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return train.lr * (train.min_lr_ratio + (1 - train.min_lr_ratio) * cosine)


def resolved_precision(train: TrainConfig, device: torch.device) -> str:
    """"float32" or "bf16": what `train.precision` means on `device` ("auto": bf16 on CUDA only)."""
    if train.precision == "auto":
        return "bf16" if device.type == "cuda" else "float32"
    return train.precision


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if platform.system() == "Darwin" else 1024)


@dataclass
class Run:
    """What a run is set up with and never changes: its config and record, the task and its held-out sets,
    the model and its optimiser, the training data's generator (whose state the checkpoint keeps)."""

    config: RunConfig
    record: RunRecord
    tags: dict[str, Any]
    device: torch.device
    task: tasks.Task
    model: Transformer
    step_model: nn.Module  # `model`, or its torch.compile'd twin sharing the same weights
    optimizer: torch.optim.AdamW
    decayed_parameters: list[str]
    generator: torch.Generator  # training batches only
    test_set: tasks.Batch  # the test set, from its own seed
    validation_set: tasks.Batch  # what sweeps select on, from a seed of its own
    extra_sets: dict[str, tasks.Batch]  # splits and other lengths, each scored separately
    precision: str  # "float32" or "bf16"
    autocast: torch.autocast  # bf16: matmuls and attention in bf16, reductions and master weights in float32
    described: str  # the variant as it describes itself, e.g. local_w16
    trackers: Trackers  # train.tracker's (none: an empty list), started by `begin`


@dataclass
class RunState:
    """What the loop changes; all of it but `finite` and `last_eval` (found again in `history`) is checkpointed."""

    step: int
    history: list[dict[str, Any]]  # the metrics.jsonl lines so far
    wall_seconds: float
    train_seconds: float  # in training steps only: the throughput's denominator
    # Training metrics summed on the device since the last train line (no host sync per step):
    # (3,) float64 = loss, correct predictions, scored positions.
    running_sums: torch.Tensor
    finite: torch.Tensor  # () bool: no non-finite loss or gradient since the run (re)started
    grad_norm: torch.Tensor | None = None  # of the last step, before clipping
    last_eval: dict[str, Any] | None = None


def set_up(parts: Parts, record: RunRecord, tags: dict[str, Any]) -> Run:
    """The run's task and model (`experiments.run.build`) on its device, its optimiser and the held-out sets."""
    config, device = parts.config, torch.device(parts.config.device)
    torch.set_rng_state(parts.rng_state)
    model = parts.model.to(device)
    optimizer, decayed = build_optimizer(model, config.train)
    precision, task = resolved_precision(config.train, device), parts.task
    return Run(
        config=config, record=record, tags=dict(tags), device=device, task=task, model=model,
        step_model=torch.compile(model) if config.train.compile else model,
        optimizer=optimizer, decayed_parameters=decayed,
        generator=tasks.train_generator(config.seed, device), test_set=task.test_set(device),
        validation_set=task.validation_set(device), extra_sets=task.extra_test_sets(device),
        precision=precision,
        autocast=torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"),
        described=parts.described, trackers=Trackers(config.train.tracker, record.path),
    )


def resume(run: Run) -> RunState:
    """The state the record's checkpoint holds (weights, moments and the generator restored into `run`),
    or a fresh one at step 0; a checkpoint this run cannot resume from is a RecordError saying why."""
    state = RunState(step=0, history=[], wall_seconds=0.0, train_seconds=0.0,
                     running_sums=torch.zeros(3, dtype=torch.float64, device=run.device),
                     finite=torch.ones((), dtype=torch.bool, device=run.device))
    checkpoint = run.record.load_checkpoint()
    if checkpoint is not None:
        wrong = checkpoint_mismatch(checkpoint, model=run.model, optimizer=run.optimizer,
                                    generator_state=run.generator.get_state(), running_sums=state.running_sums)
        if wrong:
            raise run.record.mismatched_checkpoint(wrong)
        run.model.load_state_dict(checkpoint["model"])
        run.optimizer.load_state_dict(checkpoint["optimizer"])
        run.generator.set_state(checkpoint["generator"])
        # Checkpoints written before the rename call the running sums "window".
        state.running_sums.copy_(checkpoint["running_sums"] if "running_sums" in checkpoint else checkpoint["window"])
        state.step, state.history = checkpoint["step"], [metric_line_as_today(line) for line in checkpoint["history"]]
        state.wall_seconds, state.train_seconds = checkpoint["wall_seconds"], checkpoint["train_seconds"]
    state.last_eval = next((line for line in reversed(state.history) if line["kind"] == "eval"), None)
    return state


def train_step(run: Run, state: RunState) -> None:
    """One optimiser step on a fresh batch; adds its loss and accuracy to the running sums, on the device."""
    started = time.perf_counter()
    train_cfg = run.config.train
    for group in run.optimizer.param_groups:
        group["lr"] = learning_rate(state.step, train_cfg)
    batch = run.task.batch(train_cfg.batch_size, run.generator, run.device)
    with run.autocast:
        logits = run.step_model(batch.inputs)  # (B, T, classes)
        loss = scored_loss(logits, batch.targets)
    scored = batch.targets != tasks.IGNORE  # (B, T)
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    state.grad_norm = torch.nn.utils.clip_grad_norm_(
        run.model.parameters(), train_cfg.grad_clip if train_cfg.grad_clip > 0 else math.inf
    )
    state.finite &= torch.isfinite(loss) & torch.isfinite(state.grad_norm)
    run.optimizer.step()
    state.step += 1
    state.running_sums += torch.stack([loss.detach().double(),
                                       ((logits.detach().argmax(-1) == batch.targets) & scored).sum().double(),
                                       scored.sum().double()])
    state.train_seconds += time.perf_counter() - started


def train_line(run: Run, state: RunState) -> dict[str, Any]:
    """The train line of this step: mean loss and accuracy since the last one; empties the running sums."""
    train_cfg = run.config.train
    steps_summed = (state.step - 1) % train_cfg.log_every + 1
    loss_sum, correct, scored_count = state.running_sums.tolist()
    state.running_sums.zero_()
    return {"kind": "train", "step": state.step, "loss": loss_sum / steps_summed,
            "accuracy": correct / max(scored_count, 1.0), "lr": learning_rate(state.step - 1, train_cfg),
            "grad_norm": float(state.grad_norm), "wall_seconds": state.wall_seconds}


def evaluation_line(run: Run, state: RunState, final: bool) -> dict[str, Any]:
    """The eval line of this step (`experiments.run.evaluation`: every held-out set in full where `final`, otherwise
    what the interim settings ask), with `train.attention_stats` the statistics per layer and head and, where the
    held-out sets were read, the largest weight of their scored rows (`attention_stats.scored_max_weight`)."""
    with run.autocast:
        figures = evaluation.held_out(run.model, run.config.train, (run.test_set, run.extra_sets, run.validation_set),
                                      run.task.report_buckets(), final)
    line = {"kind": "eval", "step": state.step, "wall_seconds": state.wall_seconds, **figures}
    if run.config.train.attention_stats:
        line["attention"] = attention_stats.measure(run.model, *attention_stats.probe_batch(run.test_set))
        if "test_accuracy" in line:  # the held-out sets were read: the weights of their scored rows too
            line["scored_max_weight"] = attention_stats.scored_max_weight(run.model, run.test_set)
            for name, split in line.get("splits", {}).items():
                split["scored_max_weight"] = attention_stats.scored_max_weight(run.model, run.extra_sets[name])
    return line


def record_line(run: Run, state: RunState, line: dict[str, Any]) -> None:
    """Append a metric line to the history and send it to the run's trackers."""
    state.history.append(line)
    run.trackers.log(line)


def record_evaluation(run: Run, state: RunState, final: bool) -> None:
    """Evaluate now and record the eval line: an interim one whose validation reaches the target is followed at
    once by the full evaluation, marked as where the run stopped (`experiments.run.evaluation`)."""
    line, train_cfg = evaluation_line(run, state, final), run.config.train
    if not final and reached_target(train_cfg, line) and not evaluation.is_complete(train_cfg, line):
        line = {**evaluation_line(run, state, True), "target_reached": True}
    state.last_eval = line
    record_line(run, state, line)


def begin(run: Run, state: RunState) -> None:
    """Start the trackers (a resumed run continues its own), evaluate before the first step where attention
    statistics are asked for (where the learning curves and the statistics start), write the running summary."""
    run.trackers.start(run.config.to_dict(), run.record.run_id, run.tags, state.step)
    if run.config.train.attention_stats and state.step == 0:
        record_evaluation(run, state, False)
    run.record.write_summary(summarise(run, state, "running"))


def summarise(run: Run, state: RunState, status: str, error: str | None = None) -> Summary:
    """The run's summary as of its last evaluation."""
    config, task, last = run.config, run.task, state.last_eval or {}

    def extra_accuracy(name: str) -> float | None:  # an extra held-out set's accuracy at the last evaluation
        return last["splits"][name]["test_accuracy"] if "splits" in last else None

    def at_length(length: int, figures: dict[str, Any]) -> dict[str, Any]:  # with the scored rows' largest weight
        weight = {"scored_max_weight": figures["scored_max_weight"]} if "scored_max_weight" in figures else {}
        return {"length": length, "accuracy": figures.get("test_accuracy"), **weight}

    tokens = state.step * config.train.batch_size * task.seq_len
    return Summary(
        run_id=run.record.run_id, status=status, error=error,
        variant=config.variant, variant_options=config.variant_options, variant_name=run.described,
        kernel=run.model.kernel, precision=run.precision, compiled=config.train.compile,
        parameters=sum(parameter.numel() for parameter in run.model.parameters()),
        task=config.task, task_options=config.task_options, profile=config.profile, seed=config.seed,
        test_accuracy=last.get("test_accuracy"), test_loss=last.get("test_loss"),
        val_accuracy=last.get("val_accuracy"), val_loss=last.get("val_loss"),
        chance_accuracy=task.chance_accuracy, accuracy_by_distance=last.get("accuracy_by_distance", []),
        accuracy_by_split={split: extra_accuracy(split) for split in task.eval_splits},
        accuracy_by_length=[
            at_length(task.seq_len, last),
            *(at_length(length, last.get("splits", {}).get(f"length={length}", {})) for length in task.eval_lengths),
        ] if task.eval_lengths else [],
        tags=dict(run.tags), steps=state.step, total_steps=config.train.steps, wall_seconds=state.wall_seconds,
        **(dict(target_step=last["step"], target_seconds=last["wall_seconds"])
           if stopped_at_target(config.train, last) else {}),
        tokens_per_second=tokens / state.train_seconds if state.train_seconds else None,
        peak_memory_bytes=peak_memory_bytes(run.device), device=str(run.device),
        device_name=torch.cuda.get_device_name(run.device) if run.device.type == "cuda" else platform.processor(),
        torch_version=torch.__version__, git_commit=git_commit(), decayed_parameters=run.decayed_parameters,
        revisions=revisions.of_run(config.task, config.variant),
    )


def save(run: Run, state: RunState, status: str) -> Summary:
    """Checkpoint, metrics and summary, in that order; the summary written."""
    run.record.save_checkpoint({
        "model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
        "generator": run.generator.get_state(), "running_sums": state.running_sums, "step": state.step,
        "history": state.history, "wall_seconds": state.wall_seconds, "train_seconds": state.train_seconds,
    })
    run.record.write_metrics(state.history)
    summary = summarise(run, state, status)
    run.record.write_summary(summary)
    return summary


def progress(state: RunState) -> dict[str, str]:
    """The progress bar's figures: the last train line's loss and accuracy, the last evaluation's accuracy (test, or
    validation where it read no test set)."""
    line = next((line for line in reversed(state.history) if line["kind"] == "train"), None)
    figures = {"loss": line["loss"], "acc": line["accuracy"]} if line else {}
    if state.last_eval:  # an interim evaluation may read the validation set only (`experiments.run.evaluation`)
        shown = "test" if "test_accuracy" in state.last_eval else "val"
        figures[shown] = state.last_eval[f"{shown}_accuracy"]
    return {name: f"{value:.3f}" for name, value in figures.items()}


def finish(run: Run, state: RunState, status: str, error: BaseException | None = None) -> Summary:
    """The run's last records, the trackers' too: a failed run's summary with the error, a diverged run's metrics
    and summary (its last checkpoint keeps the last good weights), any other run's checkpoint too."""
    if status == "failed":
        summary = summarise(run, state, status, f"{type(error).__name__}: {error}")
        run.record.write_summary(summary)
    elif status == "diverged":
        run.record.write_metrics(state.history)
        summary = summarise(run, state, status, f"non-finite loss or gradient by step {state.step}")
        run.record.write_summary(summary)
    else:
        summary = save(run, state, status)
    run.trackers.finish(summary.to_dict())
    return summary


def train(
    run_or_parts: RunConfig | Parts,
    record: RunRecord,
    *,
    quiet: bool = False,
    should_stop: Callable[[int], bool] = lambda step: False,
    should_prune: Callable[[int, float], bool] = lambda step, accuracy: False,
    tags: dict[str, Any] | None = None,
) -> Summary:
    """Train (or resume, when the record holds a checkpoint) the run of a config, or of the parts `build` made
    of it, and return its `Summary`.

    `should_stop(step)` is asked before every step (True: status "interrupted", resumable); `should_prune(step,
    val_accuracy)` after every evaluation but the last (True: status "pruned", as a sweep's pruner decides);
    `tags` (e.g. a sweep's study and trial number) are copied into the summary. The run's lock is held throughout
    (`RunRecord.training`): a run another process trains is a RecordError, before anything is read or written."""
    with record.training():
        run = set_up(run_or_parts if isinstance(run_or_parts, Parts) else build(run_or_parts), record, tags or {})
        config, state = run.config, resume(run)
        steps = config.train.steps
        begin(run, state)

        started, status = time.perf_counter() - state.wall_seconds, "completed"
        bar = tqdm(total=steps, initial=state.step, desc=f"{run.described}/{config.task}", disable=quiet,
                   unit="step", dynamic_ncols=True)
        try:
            while state.step < steps and not stopped_at_target(config.train, state.last_eval):
                if should_stop(state.step):
                    status = "interrupted"
                    break
                train_step(run, state)  # state.step += 1
                bar.update()
                logging = due(state.step, config.train.log_every, steps)
                evaluating = due(state.step, config.train.eval_every, steps)
                checkpointing = due(state.step, config.train.checkpoint_every, steps)
                if logging or evaluating or checkpointing:
                    # A non-finite loss or gradient since the last check ends the run before a checkpoint keeps it.
                    if not bool(state.finite):
                        status = "diverged"
                        break
                    state.wall_seconds = time.perf_counter() - started
                if logging:
                    record_line(run, state, train_line(run, state))
                if evaluating:
                    record_evaluation(run, state, state.step == steps)
                if logging or evaluating:
                    bar.set_postfix(progress(state))
                if checkpointing:
                    save(run, state, "running")
                if evaluating and state.step < steps and not stopped_at_target(config.train, state.last_eval) \
                        and should_prune(state.step, validation_accuracy(state.last_eval)):
                    status = "pruned"
                    break
        except BaseException as error:
            bar.close()
            finish(run, state, "failed", error)
            raise
        bar.close()
        state.wall_seconds = time.perf_counter() - started
        return finish(run, state, status)
