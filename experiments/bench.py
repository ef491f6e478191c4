"""`make bench-variants`: forward+backward time and peak memory per variant and kernel against length.

Beside the registered variants it times two baselines in the same process: the seeds' naive code
(`seeds-naive`: matmul, masked_fill with a float mask, softmax, matmul) and a direct call of
`torch.nn.functional.scaled_dot_product_attention` (`torch-sdpa`). At each length the contenders are
timed in turns (warm-up, one memory run, then `repeats` timed rounds), so that ratios between them
come from the same minutes of a shared machine. A contender whose next length is predicted (quadratic
growth from the last length) to take longer than `budget` seconds per call is recorded as skipped.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

import variants
from experiments.files import atomic_write_text
from experiments.measure import peak_memory_bytes, seconds

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def seeds_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """The seeds' scaled_dot_product_attention with their create_causal_mask, verbatim in substance."""
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if causal:
        mask = torch.tril(torch.ones(q.shape[2], k.shape[2], device=q.device))
        scores = scores.masked_fill(mask == 0, float("-inf"))
    return torch.matmul(F.softmax(scores, dim=-1), v)


def torch_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


@dataclass(frozen=True)
class Contender:
    variant: str  # self-describing name, or the baseline's name
    kernel: str
    attend: Attend


def parse_spec(spec: str) -> tuple[str, dict]:
    """'relative:kind=t5:num_buckets=16' -> ('relative', {'kind': 't5', 'num_buckets': 16})."""
    name, *pairs = spec.split(":")
    options = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"Variant spec {spec!r} has {pair!r}; accepted: name:option=value[:option=value].")
        options[key] = parse_value(text)
    return name, options


def parse_value(text: str) -> object:
    """Command-line text to a Python value: true/false, integers, floats, otherwise the string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def contenders(specs: list[str], kernel_names: list[str] | None, heads: int, head_dim: int,
               device: torch.device) -> list[Contender]:
    """The baselines, then every spec on every kernel it lists (or those asked for) that runs on `device`."""
    chosen = [Contender("seeds-naive", "naive", seeds_naive), Contender("torch-sdpa", "direct", torch_sdpa)]
    for spec in specs:
        name, options = parse_spec(spec)
        probe = variants.create(name, num_heads=heads, head_dim=head_dim, **options)
        for kernel in ["auto", *probe.kernels]:
            if kernel_names is not None and kernel not in kernel_names:
                continue
            module = variants.create(name, num_heads=heads, head_dim=head_dim, backend=kernel, **options).to(device)
            label = f"auto={module.backend}" if kernel == "auto" else kernel
            chosen.append(Contender(module.describe(), label, _call(module)))
    return chosen


def _step(contender: Contender, q, k, v, grad: torch.Tensor, causal: bool) -> None:
    """One forward+backward pass."""
    contender.attend(q, k, v, causal).backward(grad)
    q.grad = k.grad = v.grad = None


def _call(module: torch.nn.Module) -> Attend:
    return lambda q, k, v, causal: module(q, k, v, causal=causal)


def default_specs() -> list[str]:
    """Every registered variant with its defaults, and each relative position kind."""
    specs = [name for name in variants.list_variants() if name != "relative"]
    return specs + [f"relative:kind={kind}" for kind in ("shaw", "t5", "alibi", "rope")]


def run(*, specs: list[str], kernels: list[str] | None, lengths: list[int], causal_modes: list[bool],
        batch: int, heads: int, head_dim: int, repeats: int, budget: float, device: torch.device,
        out_dir: Path, quiet: bool) -> tuple[pd.DataFrame, Path]:
    dtype = torch.float32
    field = contenders(specs, kernels, heads, head_dim, device)
    rows = []
    last_seconds: dict[tuple[str, str, bool], tuple[int, float]] = {}
    plan = [(length, causal) for length in sorted(lengths) for causal in causal_modes]
    with tqdm(total=len(plan) * len(field), disable=quiet, unit="config", desc="bench-variants") as bar:
        for length, causal in plan:
            generator = torch.Generator(device=device).manual_seed(length)
            q, k, v = (torch.randn(batch, heads, length, head_dim, generator=generator, device=device, dtype=dtype)
                       .requires_grad_() for _ in range(3))
            grad = torch.randn(batch, heads, length, head_dim, generator=generator, device=device, dtype=dtype)

            active, timings = [], {}
            for contender in field:
                key = (contender.variant, contender.kernel, causal)
                row = {"variant": contender.variant, "kernel": contender.kernel, "seq_len": length,
                       "causal": causal, "batch": batch, "heads": heads, "head_dim": head_dim,
                       "dtype": str(dtype).removeprefix("torch."), "device": device.type}
                if key in last_seconds:
                    previous_length, previous = last_seconds[key]
                    predicted = previous * (length / previous_length) ** 2
                    if predicted > budget:
                        status = f"skipped: predicted {predicted:.0f}s per call > budget {budget:g}s"
                        rows.append({**row, "status": status})
                        bar.update()
                        continue
                bar.set_postfix_str(f"n={length} {contender.variant}/{contender.kernel}")
                call = functools.partial(_step, contender, q, k, v, grad, causal)
                warmup = seconds(call, device)
                peak = peak_memory_bytes(call, device)
                active.append((contender, call, row, peak))
                timings[key] = [] if warmup < budget else [warmup]
                bar.update()
            for _ in range(repeats):
                for contender, call, _, _ in active:
                    key = (contender.variant, contender.kernel, causal)
                    if len(timings[key]) < repeats:
                        timings[key].append(seconds(call, device))
            for contender, _, row, peak in active:
                key = (contender.variant, contender.kernel, causal)
                median = statistics.median(timings[key])
                last_seconds[key] = (length, median)
                rows.append({**row, "status": "ok", "ms": median * 1e3, "ms_min": min(timings[key]) * 1e3,
                             "repeats": len(timings[key]), "peak_mib": peak / 2**20})
    table = pd.DataFrame(rows)
    path = out_dir / f"variants-{time.strftime('%Y%m%d-%H%M%S')}.csv"
    atomic_write_text(path, table.to_csv(index=False))
    return table, path


def acceptance(table: pd.DataFrame, length: int = 4096) -> list[str]:
    """The registry issue's acceptance ratios, at `length`, causal, when those rows were measured."""
    ok = table[(table["status"] == "ok") & (table["seq_len"] == length) & table["causal"]]
    ms = {(row.variant, row.kernel): row.ms for row in ok.itertuples()}
    dense = next((value for (variant, kernel), value in ms.items()
                  if variant == "dense" and kernel.startswith("auto")), None)
    lines = []
    if dense is not None and ("torch-sdpa", "direct") in ms:
        ratio = dense / ms[("torch-sdpa", "direct")]
        lines.append(f"n={length} causal: dense (auto) / direct sdpa = {ratio:.2f}x time (goal <= 1.2)")
    if dense is not None and ("seeds-naive", "naive") in ms:
        speedup = ms[("seeds-naive", "naive")] / dense
        lines.append(f"n={length} causal: seeds' naive / dense (auto) = {speedup:.1f}x time (goal >= 5)")
    return lines
