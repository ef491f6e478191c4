"""`make speed-train`: the harness's training throughput against a minimal hand-written PyTorch loop.

Both train a model of the same sizes on the same task batches for the same number of steps: the
harness through `experiments.run.train.train` (registry attention, divergence guard, metrics, progress),
the baseline through a plain nanoGPT-style loop that calls `scaled_dot_product_attention` directly.
They run in alternating rounds in one process, and the ratio of their tokens per second is the
harness's overhead. Evaluation and checkpoints are outside the harness's timed region, as they are
outside the baseline's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from experiments import tasks
from experiments.run import config as configs
from experiments.run.build import build_task
from experiments.run.records import RunRecord
from experiments.run.train import learning_rate, train


class MinimalBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hs)
        x = x + self.out(y.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.norm2(x))


class MinimalModel(nn.Module):
    def __init__(self, config: configs.ModelConfig, vocab_size: int, num_classes: int, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, config.dim)
        self.positions = nn.Parameter(torch.randn(max_len, config.dim) * 0.02)
        self.blocks = nn.Sequential(*[MinimalBlock(config.dim, config.heads, config.mlp_ratio)
                                      for _ in range(config.depth)])
        self.norm, self.head = nn.LayerNorm(config.dim), nn.Linear(config.dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.positions[: tokens.shape[1]])))


def minimal_tokens_per_second(config: configs.RunConfig, steps: int) -> float:
    device = torch.device(config.device)
    task = build_task(config)
    torch.manual_seed(config.seed)
    model = MinimalModel(config.model, task.vocab_size, task.num_classes, task.seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    started = time.perf_counter()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config.train)
        batch = task.batch(config.train.batch_size, generator, device)
        logits = model(batch.inputs)
        scored = batch.targets != tasks.IGNORE
        loss = F.cross_entropy(logits[scored], batch.targets[scored])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.grad_clip)
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return steps * config.train.batch_size * task.seq_len / (time.perf_counter() - started)


def harness_tokens_per_second(config: configs.RunConfig, runs_dir: Path, round_index: int) -> float:
    record = RunRecord.create(runs_dir, f"speed-train-{round_index}")
    record.write_config(config.to_dict())
    return train(config, record, quiet=True).tokens_per_second


def run(*, variant: str, task: str, steps: int, rounds: int, device: str) -> dict[str, float]:
    if rounds < 1:
        raise ValueError(f"--rounds got {rounds}; accepted: an integer >= 1 (the median of that many rounds).")
    overrides = {section: {} for section in configs.SECTIONS}
    overrides["train"] = {"steps": steps, "eval_every": steps, "checkpoint_every": steps, "log_every": 10}
    config = configs.resolve(variant=variant, task=task, profile="quick", seed=0, device=device,
                             overrides=overrides)
    harness, minimal = [], []
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(rounds):
            minimal.append(minimal_tokens_per_second(config, steps))
            harness.append(harness_tokens_per_second(config, Path(folder), round_index))
    return {"harness_tokens_per_second": statistics.median(harness),
            "minimal_tokens_per_second": statistics.median(minimal),
            "ratio": statistics.median(harness) / statistics.median(minimal)}


def run_and_print(*, variant: str, task: str, steps: int, rounds: int, device: str) -> None:
    """`attnlab speed-train`: both loops' tokens per second and their ratio."""
    result = run(variant=variant, task=task, steps=steps, rounds=rounds, device=device)
    print(f"{variant} on {task} ({device}, {steps} steps, median of {rounds} alternating rounds):")
    print(f"  harness  {result['harness_tokens_per_second']:,.0f} tokens/s")
    print(f"  minimal  {result['minimal_tokens_per_second']:,.0f} tokens/s")
    print(f"  harness / minimal = {result['ratio']:.3f} (goal >= 0.9)")
