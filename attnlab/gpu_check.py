"""`make gpu-check`: on a CUDA machine, every kernel against the reference, then the fused kernels' speed.

1. `pytest -m gpu -q`: the tests marked gpu (tests/variants/test_gpu_kernels.py: every kernel against
   the float64 reference on fresh random inputs, outputs and gradients, float32 and bfloat16 with the
   tolerances documented there; and the training steps on CUDA), given TEST_SECONDS at most.
2. Forward+backward time per variant and kernel at 1K to 32K tokens in bf16 (autocast, float32
   parameters, as in training), causal, through `attnlab speed`'s contenders and timing, with batch *
   length = TOKENS so that every length fills the chip (16 heads of 64). Achieved TFLOP/s counts the
   attended pairs only: pairs x 4 x head_dim for the forward pass (q.k and p.v, a multiply and an add
   each per dimension) x 3.5 for forward+backward (the backward pass recomputes q.k and computes four
   more products of the same size: 2.5 forward passes). The direct flash SDPA call (`torch-sdpa`,
   kernel `direct`) on dense causal attention is the reference line; the goals compare local and sparse
   on flex at 16K with it, and those rows are timed first. Rows that would exceed the time left (the
   whole check is held to SECONDS), or that are predicted to outgrow the per-call budget or the free GPU
   memory, are recorded as skipped. The table is printed and written to runs/speed/gpu_check.csv.

Without CUDA it says so and returns 0: there is nothing to check on CPU that `make test` does not.
"""

from __future__ import annotations

import functools
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

import variants
from common.files import atomic_write_text
from experiments.run.timing import seconds
from experiments.speed import kernels as speed
from experiments.speed.memory import peak_memory_bytes
from variants import layouts

SECONDS = 300  # the whole check, tests and timing
TEST_SECONDS = 190  # the tests marked gpu, at most
LENGTHS = (1024, 4096, 16384, 32768)
TOKENS = 1 << 16  # batch * length at every length
HEADS, HEAD_DIM = 16, 64
REPEATS = 3
CALL_BUDGET = 2.0  # seconds per forward+backward call; a contender predicted to exceed it is skipped
SPECS = ["dense", "relative:kind=alibi", "relative:kind=t5", "softcap", "ssmax", "qknorm", "local:window=256",
         "sparse:pattern=longformer:window=256", "sparse:pattern=bigbird:block_size=128"]
KERNELS = ["direct", "sdpa", "flex", "xformers", "blocked"]  # the fused ones, and blocked to compare
GOAL_LENGTH, GOAL_FRACTION = 16384, 0.6
GOAL_SPECS = ("local:window=256", "sparse:pattern=longformer:window=256", "sparse:pattern=bigbird:block_size=128")
FLOPS_PER_PAIR_PER_DIM = 4 * 3.5  # forward: 4 per pair and dimension; forward+backward: 3.5 times that


def training_flops(pairs: int, head_dim: int) -> float:
    """Floating-point operations of one forward+backward pass over `pairs` attended (query, key) pairs."""
    return pairs * head_dim * FLOPS_PER_PAIR_PER_DIM


def described(spec: str) -> str:
    """The self-describing name a spec's module gives itself (the `variant` column of the table)."""
    name, options = speed.parse_spec(spec)
    return variants.describe(name, options, head_dim=HEAD_DIM)


def attended_pairs(spec: str, length: int, device: torch.device) -> int:
    """Pairs one head of one sequence attends, causal: from the variant's layout (`layouts.tiles`, no n^2
    mask) or n(n+1)/2 without one; the naive and direct baselines are dense."""
    if spec in ("tutorial-naive", "torch-sdpa"):
        return length * (length + 1) // 2
    name, options = speed.parse_spec(spec)
    layout = variants.create(name, num_heads=1, head_dim=HEAD_DIM, **options).block_layout
    return layouts.tiles(layout, length, length, True, 128, device).attended


def run_tests(seconds_left: float) -> tuple[int, str]:
    """`pytest -m gpu -q` in a subprocess: its exit status and the end of its output."""
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=seconds_left)
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        return 1, output[-4000:] + f"\ngpu tests stopped after {seconds_left:.0f}s (the check's budget)"
    return result.returncode, (result.stdout + result.stderr)[-4000:]


def _step(contender: speed.Contender, q, k, v, grad) -> None:
    """One causal forward+backward pass under bf16 autocast, as a training step runs attention."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = contender.attend(q, k, v, True)
    out.backward(grad)
    q.grad = k.grad = v.grad = None


def time_kernels(deadline: float, device: torch.device, specs: list[str] = SPECS, kernels: list[str] = KERNELS,
                 lengths: tuple[int, ...] = LENGTHS, done: frozenset = frozenset()) -> pd.DataFrame:
    """Milliseconds and TFLOP/s per contender and length until `deadline` (time.perf_counter()), leaving out
    the (variant, kernel, length) cells in `done`."""
    field = speed.contenders(specs, kernels, HEADS, HEAD_DIM, device)
    spec_of = {described(spec): spec for spec in specs}
    rows, last = [], {}
    for length in lengths:
        batch = max(1, TOKENS // length)
        generator = torch.Generator(device=device).manual_seed(length)
        q, k, v = (torch.randn(batch, HEADS, length, HEAD_DIM, generator=generator, device=device,
                               dtype=torch.bfloat16).requires_grad_() for _ in range(3))
        grad = torch.randn(batch, HEADS, length, HEAD_DIM, generator=generator, device=device, dtype=torch.bfloat16)
        pairs = {}
        for contender in field:
            if (contender.variant, contender.kernel, length) in done:
                continue
            row = {"variant": contender.variant, "kernel": contender.kernel, "seq_len": length, "batch": batch,
                   "heads": HEADS, "head_dim": HEAD_DIM, "dtype": "bfloat16"}
            key = (contender.variant, contender.kernel)
            status = "skipped: time budget" if time.perf_counter() > deadline else speed.predicted_too_costly(
                last.get(key), length, budget=CALL_BUDGET, memory_at_hand=lambda: torch.cuda.mem_get_info(device)[0],
                share=0.8, memory_name="free GPU memory")
            if status:
                rows.append({**row, "status": status})
                continue
            call = functools.partial(_step, contender, q, k, v, grad)
            try:
                peak = peak_memory_bytes(call, device)  # the first call: compiles, warms caches
                timings = [seconds(call, device) for _ in range(REPEATS)]
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                rows.append({**row, "status": "out of memory"})
                continue
            median = statistics.median(timings)
            last[key] = (length, median, peak)
            spec = spec_of.get(contender.variant, contender.variant)
            if spec not in pairs:
                pairs[spec] = attended_pairs(spec, length, device)
            flops = training_flops(pairs[spec] * batch * HEADS, HEAD_DIM)
            rows.append({**row, "status": "ok", "ms": median * 1e3, "tflops": flops / median / 1e12,
                         "attended_pairs": pairs[spec] * batch * HEADS, "peak_gib": peak / 2**30})
    return pd.DataFrame(rows)


def goals(table: pd.DataFrame) -> list[str]:
    """Local and sparse on flex at GOAL_LENGTH against the dense flash SDPA line, where both were timed."""
    ok = table[(table["status"] == "ok") & (table["seq_len"] == GOAL_LENGTH)]
    direct = ok[ok["variant"] == "torch-sdpa"]["tflops"]
    if direct.empty:
        return [f"n={GOAL_LENGTH}: the dense flash SDPA line was not timed; no goal can be checked"]
    lines = []
    for variant in map(described, GOAL_SPECS):
        flex = ok[(ok["variant"] == variant) & ok["kernel"].str.endswith("flex")]["tflops"]
        if flex.empty:
            lines.append(f"n={GOAL_LENGTH}: {variant} on flex was not timed")
            continue
        fraction = float(flex.iloc[0]) / float(direct.iloc[0])
        verdict = "met" if fraction >= GOAL_FRACTION else "NOT met"
        lines.append(f"n={GOAL_LENGTH}: {variant} on flex reaches {fraction:.0%} of dense flash SDPA's TFLOP/s on "
                     f"attended pairs (goal >= {GOAL_FRACTION:.0%}: {verdict})")
    return lines


def render(table: pd.DataFrame) -> str:
    """One row per (variant, kernel), one column per length: "ms / TFLOP/s", or why it was not timed."""
    cells = table.copy()
    timed = cells["status"] == "ok"
    cells["cell"] = cells["status"].str.replace("skipped: ", "", regex=False)
    cells.loc[timed, "cell"] = [f"{ms:.2f} ms / {tflops:.0f}" for ms, tflops in
                                zip(cells.loc[timed, "ms"], cells.loc[timed, "tflops"], strict=True)]
    grid = cells.pivot_table(index=["variant", "kernel"], columns="seq_len", values="cell", aggfunc="first",
                             sort=False)
    return "milliseconds per causal forward+backward / achieved TFLOP/s on attended pairs (bf16)\n" + grid.to_string()


def run(out_dir: Path, budget: float = SECONDS) -> int:
    """The whole check; 0 when there is no GPU or the gpu tests pass, 1 when they fail."""
    if not budget > 0:
        raise ValueError(f"--seconds got {budget:g}; accepted: a number of seconds > 0, the time for the whole check.")
    if not torch.cuda.is_available():
        print("gpu-check: no CUDA device on this machine, so there is nothing to check here "
              "(make test covers what runs on CPU).")
        return 0
    started = time.perf_counter()
    device = torch.device("cuda")
    print(f"gpu-check on {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    status, output = run_tests(min(TEST_SECONDS, budget / 2))
    print(output)
    print(f"gpu tests: {'passed' if status == 0 else 'FAILED'} in {time.perf_counter() - started:.0f}s")
    deadline = started + budget - 10  # 10 s to spare for the table and the file
    first = time_kernels(deadline, device, list(GOAL_SPECS), ["direct", "flex"], (GOAL_LENGTH,))
    done = frozenset((row.variant, row.kernel, row.seq_len) for row in first.itertuples() if row.status == "ok")
    table = pd.concat([first, time_kernels(deadline, device, done=done)], ignore_index=True)
    print(render(table))
    for line in goals(table):
        print(line)
    path = out_dir / "gpu_check.csv"
    atomic_write_text(path, table.to_csv(index=False))
    print(f"wrote {path} ({time.perf_counter() - started:.0f}s in all)")
    return 0 if status == 0 else 1
