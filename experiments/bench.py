"""`make bench-variants`: forward+backward time and peak memory per variant and kernel against length.

Beside the registered variants it times two baselines in the same process: the tutorials' naive implementation
(`tutorial-naive`: matmul, masked_fill with a float mask, softmax, matmul) and a direct call of
`torch.nn.functional.scaled_dot_product_attention` (`torch-sdpa`). At each length the contenders are
timed in turns (warm-up, one memory run, then `repeats` timed rounds), so that ratios between them
come from the same minutes of a shared machine. A contender whose next length is predicted (quadratic
growth from the last length) to take longer than `budget` seconds per call is recorded as skipped.

The baselines of `variants.baselines` (lstm, gru, conv, mamba) are timed when named among the specs: their
token mixer at width heads * head_dim, at the same batch and lengths as attention, kernel `torch`.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from einops import rearrange
from tqdm import tqdm

import variants
from common.files import atomic_write_text
from experiments.config import parse_value
from experiments.measure import peak_memory_bytes, seconds
from variants.kernels import KERNELS

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def tutorial_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """The tutorials' scaled_dot_product_attention with their create_causal_mask, verbatim in substance."""
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


def contenders(specs: list[str], kernel_names: list[str] | None, heads: int, head_dim: int,
               device: torch.device, max_len: int | None = None) -> list[Contender]:
    """The baselines (kernels `naive` and `direct`), then every spec on every kernel it lists, or only the
    kernels asked for, built for sequences of at most `max_len` (what the variants sized by it need). The kernel
    `auto` picks is timed once, labelled `auto=<kernel>`."""
    baselines = [Contender("tutorial-naive", "naive", tutorial_naive), Contender("torch-sdpa", "direct", torch_sdpa)]
    chosen = [baseline for baseline in baselines if kernel_names is None or baseline.kernel in kernel_names]
    for spec in specs:
        name, options = parse_spec(spec)
        if variants.is_baseline(name):
            if kernel_names is None or {"auto", "torch"} & set(kernel_names):
                chosen.append(mixer_contender(name, options, heads * head_dim, device))
            continue
        probe = variants.create(name, num_heads=heads, head_dim=head_dim, max_len=max_len, **options).to(device)
        chosen_by_auto = probe.kernel
        for kernel in probe.kernels:
            if not KERNELS[kernel].runs_on(device):
                continue
            label = f"auto={kernel}" if kernel == chosen_by_auto else kernel
            if kernel_names is not None and kernel not in kernel_names and not (
                    "auto" in kernel_names and kernel == chosen_by_auto):
                continue
            module = variants.create(name, num_heads=heads, head_dim=head_dim, kernel=kernel, max_len=max_len,
                                     **options).to(device)
            chosen.append(Contender(module.describe(), label, _call(module)))
    return chosen


def mixer_contender(name: str, options: dict, dim: int, device: torch.device) -> Contender:
    """A baseline's token mixer (`variants.baselines`) at width dim = heads * head_dim, on the same q tensor
    read as (batch, seq, dim): forward+backward of the mixer in attention's place, at the same sizes. Its
    causal and non-causal forms are built once each (they can differ in parameters). Kernel `torch`."""
    mixers = {causal: variants.create_baseline(name, dim=dim, causal=causal, **options).to(device)
              for causal in (True, False)}

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        heads = q.shape[1]
        mixed = mixers[causal](rearrange(q, "b h t d -> b t (h d)"))
        return rearrange(mixed, "b t (h d) -> b h t d", h=heads)

    return Contender(mixers[True].describe(), "torch", attend)


def _available_bytes() -> float:
    """Memory the system can still give (Linux MemAvailable), or infinity where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024.0
    except OSError:
        pass
    return math.inf


def predicted_too_costly(last: tuple[int, float, float] | None, length: int, *, budget: float,
                         memory_at_hand: Callable[[], float], share: float, memory_name: str) -> str:
    """A skip reason when quadratic growth from the last length measured, `last` = (length, seconds per
    call, peak bytes), would take longer than `budget` seconds per call or more than `share` of the memory
    at hand (`memory_at_hand()` bytes, of what `memory_name` says); "" when the next length may run.
    bench-variants and gpu-check both decide with it."""
    if last is None:
        return ""
    previous_length, previous_seconds, previous_peak = last
    growth = (length / previous_length) ** 2
    if previous_seconds * growth > budget:
        return f"skipped: predicted {previous_seconds * growth:.1f}s per call > budget {budget:g}s"
    if previous_peak * growth > share * memory_at_hand():
        return f"skipped: predicted peak {previous_peak * growth / 2**30:.1f} GiB > {share:.0%} of {memory_name}"
    return ""


def _step(contender: Contender, q, k, v, grad: torch.Tensor, causal: bool) -> None:
    """One forward+backward pass."""
    contender.attend(q, k, v, causal).backward(grad)
    q.grad = k.grad = v.grad = None


def _call(module: torch.nn.Module) -> Attend:
    return lambda q, k, v, causal: module(q, k, v, causal=causal)


# Variants whose options decide their cost are benched at settings worth comparing.
SPEC_EXPANSIONS = {
    "relative": [f"relative:kind={kind}" for kind in ("shaw", "t5", "alibi", "rope")],
    "local": ["local:window=256"],
    "sparse": [f"sparse:pattern={pattern}" for pattern in ("strided", "fixed", "longformer", "bigbird")],
}


def default_specs() -> list[str]:
    """Every registered variant: with its defaults, or at the settings in SPEC_EXPANSIONS."""
    return [spec for name in variants.list_variants() for spec in SPEC_EXPANSIONS.get(name, [name])]


def run(*, specs: list[str], kernels: list[str] | None, lengths: list[int], causal_modes: list[bool],
        batch: int, heads: int, head_dim: int, repeats: int, budget: float, device: torch.device,
        out_dir: Path, quiet: bool) -> tuple[pd.DataFrame, Path]:
    dtype = torch.float32
    field = contenders(specs, kernels, heads, head_dim, device, max_len=max(lengths))
    rows = []
    last_measured: dict[tuple[str, str, bool], tuple[int, float, float]] = {}
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
                status = predicted_too_costly(last_measured.get(key), length, budget=budget,
                                              memory_at_hand=_available_bytes, share=0.6,
                                              memory_name="available memory")
                if status:
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
                last_measured[key] = (length, median, peak)
                rows.append({**row, "status": "ok", "ms": median * 1e3, "ms_min": min(timings[key]) * 1e3,
                             "repeats": len(timings[key]), "peak_mib": peak / 2**20})
    table = pd.DataFrame(rows)
    path = out_dir / f"variants-{time.strftime('%Y%m%d-%H%M%S')}.csv"
    atomic_write_text(path, table.to_csv(index=False))
    return table, path


def slopes(table: pd.DataFrame, low: int = 2048, high: int = 16384) -> pd.DataFrame:
    """Log-log slope of time against length over [low, high], per variant, kernel and causality."""
    ok = table[(table["status"] == "ok") & table["seq_len"].between(low, high)]
    rows = []
    for (variant, kernel, causal), group in ok.groupby(["variant", "kernel", "causal"]):
        if group["seq_len"].nunique() >= 2:
            slope = np.polyfit(np.log(group["seq_len"]), np.log(group["ms"]), 1)[0]
            rows.append({"variant": variant, "kernel": kernel, "causal": causal, "slope": slope,
                         "lengths": f"{group['seq_len'].min()}-{group['seq_len'].max()}"})
    return pd.DataFrame(rows, columns=["variant", "kernel", "causal", "slope", "lengths"])


def _auto(frame: pd.DataFrame, variant: str) -> pd.DataFrame:
    return frame[(frame["variant"] == variant) & frame["kernel"].str.startswith("auto")]


def acceptance(table: pd.DataFrame) -> list[str]:
    """The figures the variant issues set goals for, wherever the rows they need were measured."""
    lines = []
    ok = table[(table["status"] == "ok") & table["causal"]]

    def cell(frame: pd.DataFrame, length: int, column: str = "ms") -> float | None:
        frame = frame[frame["seq_len"] == length]
        return float(frame[column].iloc[0]) if len(frame) else None

    direct = ok[ok["variant"] == "torch-sdpa"]
    naive = ok[ok["variant"] == "tutorial-naive"]
    dense = _auto(ok, "dense")
    at = 4096
    if None not in (cell(dense, at), cell(direct, at)):
        lines.append(f"n={at} causal: dense (auto) / direct sdpa = {cell(dense, at) / cell(direct, at):.2f}x time"
                     " (goal <= 1.2)")
    if None not in (cell(dense, at), cell(naive, at)):
        lines.append(f"n={at} causal: naive / dense (auto) = {cell(naive, at) / cell(dense, at):.1f}x time"
                     " (goal >= 5)")
    at = 16384
    local = _auto(ok, "local_w256")
    masked = ok[(ok["variant"] == "local_w256") & (ok["kernel"] == "sdpa")]
    if None not in (cell(local, at), cell(masked, at)):
        lines.append(f"n={at} causal: local_w256 masked emulation (sdpa) / blocked = "
                     f"{cell(masked, at) / cell(local, at):.1f}x time (goal >= 10), "
                     f"{cell(masked, at, 'peak_mib') / cell(local, at, 'peak_mib'):.1f}x peak memory (goal >= 3)")
    if None not in (cell(local, at), cell(direct, at)):
        lines.append(f"n={at} causal: dense direct sdpa / local_w256 blocked = "
                     f"{cell(direct, at) / cell(local, at):.1f}x time (goal >= 4; 32x fewer attended pairs)")
    fitted = slopes(table)
    for row in fitted[fitted["kernel"].str.startswith("auto") & fitted["causal"]].itertuples():
        if row.variant.startswith(("local", "sparse_longformer", "sparse_bigbird")):
            lines.append(f"causal {row.variant} (auto): log-log slope of time over {row.lengths} = {row.slope:.2f}"
                         " (goal <= 1.15)")
    return lines


def run_and_print(**settings) -> None:
    """`attnlab bench-variants`: `run(**settings)`, then milliseconds per contender and length, the rows not
    timed and why, the log-log slopes, the figures the variant issues set goals for, and the CSV's path."""
    table, path = run(**settings)
    with_times = table[table["status"] == "ok"]
    print(with_times.pivot_table(index=["variant", "kernel", "causal"], columns="seq_len", values="ms")
          .round(1).to_string())
    for row in table[table["status"] != "ok"].itertuples():
        print(f"{row.variant}/{row.kernel} n={row.seq_len}: {row.status}")
    fitted = slopes(table)
    if len(fitted):
        print("log-log slope of time against length:")
        print(fitted.round(2).to_string(index=False))
    for line in acceptance(table):
        print(line)
    print(f"wrote {path}")
