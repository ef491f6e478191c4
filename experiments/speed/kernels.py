"""`make speed`: forward+backward time and peak memory per variant and kernel, in three sweeps of timed
cases (length, causality, batch, head_dim):
- `length`: every contender at --lengths, batch --batch, --heads of --head-dim;
- `dim`: the width d = heads * head_dim at each of --dims (heads fixed), --dim-length tokens;
- `steps`: at --step-lengths, the batch grown as the length shrinks so that batch * work(n) stays what it is at
  the longest length with --batch (work(n) ~ n^p, `fits.work_exponent`): time then grows with n only
  through what must run one position after another.
`dim` and `steps` time each variant on the kernel `auto` picks, and each baseline mixer. A case two sweeps
share is measured once, its row tagged with both (`sweep` = "length+dim"). What the table says (slopes, the
fitted n^a d^b beside each row's claimed complexity, the goals' ratios) is `experiments.speed.fits`.

Three direct contenders stand beside the variants: the tutorials' naive implementation (`tutorial-naive`:
matmul, masked_fill with a float mask, softmax, matmul), `torch.nn.functional.scaled_dot_product_attention`
called directly (`torch-sdpa`), and the same call handed an explicit boolean mask of the pairs attended
(`torch-sdpa-masked`), as the sdpa kernel runs a variant with a mask: the masked dense line. At each case the
contenders are timed in turns (warm-up, one memory run, then `repeats` timed rounds), so that ratios come from
the same minutes of a shared machine. A contender whose next case in a sweep is predicted (growth in the sweep's
variable by `experiments.speed.plan.GROWTH`) to take longer than `budget` seconds per call, or too much memory, is
skipped.

Variants are built per case with max_len = its length (Linformer sizes its projections by it). One that is
bidirectional in its paper (`supports_causal = False`) is measured non-causal whatever --causal asks, its
causal rows recorded as skipped with the reason. `family` says how a variant attends: dense, local, sparse (a
block layout), kernelised (the linear kernel runs it), low-rank (the lowrank kernel), or baseline: the token
mixers of `variants.baselines` (lstm, gru, conv, mamba), timed at width heads * head_dim, kernel `torch`.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from einops import rearrange
from tqdm import tqdm

import variants
from common.files import atomic_write_text
from common.options import closest
from experiments.run.timing import seconds
from experiments.speed import fits
from experiments.speed.memory import peak_memory_bytes, settled_allocator
from experiments.speed.plan import GROWTH, Attend, Contender, TimedCase, axis, plan
from variants import layouts
from variants.kernels import KERNELS
from variants.presets import expand
from variants.presets import parse as parse_spec  # 'relative:kind=t5' -> ('relative', {'kind': 't5'})


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


def torch_sdpa_masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """sdpa handed the (seq_q, seq_k) boolean mask of the pairs attended, as the sdpa kernel hands a variant's."""
    allowed = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.tril() if causal else allowed)


# The direct contenders by kernel label: (name, the call timed).
DIRECT = {"naive": ("tutorial-naive", tutorial_naive), "direct": ("torch-sdpa", torch_sdpa),
          "masked": ("torch-sdpa-masked", torch_sdpa_masked)}
MIXER_KERNEL = "torch"  # the label of the baselines' token mixers


def accepted_kernels() -> list[str]:
    """What --kernels takes: auto, every kernel's name, the direct contenders' labels and the mixers'."""
    return ["auto", *KERNELS, *DIRECT, MIXER_KERNEL]


def _direct(variant: str, kernel: str, attend: Attend, head_dim: int) -> Contender:
    return Contender(variant, kernel, lambda max_len, head_dim: attend, (None, head_dim), name=variant)


def family(module: variants.Attention) -> str:
    """How a variant attends, from what it runs on: kernelised (the linear kernel runs it), low-rank (the
    lowrank kernel), local (a band layout), sparse (another block layout), or dense."""
    if "linear" in module.kernels:
        return "kernelised"
    if "lowrank" in module.kernels:
        return "low-rank"
    if isinstance(module.block_layout, layouts.Local):
        return "local"
    return "dense" if module.block_layout is None else "sparse"


def contenders(specs: list[str], kernel_names: list[str] | None, heads: int, head_dim: int,
               device: torch.device, max_len: int | None = None) -> list[Contender]:
    """The direct baselines (kernels `naive`, `direct` and `masked`), then every spec on every kernel it lists,
    or only the kernels asked for. The kernel `auto` picks is timed once, labelled `auto=<kernel>`. `attend`
    is built at (max_len, head_dim); `build` builds at any other sizes."""
    chosen = [_direct(variant, kernel, attend, head_dim) for kernel, (variant, attend) in DIRECT.items()
              if kernel_names is None or kernel in kernel_names]
    for spec in specs:
        name, options = parse_spec(spec)
        if variants.is_baseline(name):
            if kernel_names is None or {"auto", MIXER_KERNEL} & set(kernel_names):
                chosen.append(mixer_contender(name, options, heads, head_dim, device))
            continue
        chosen.extend(_variant_contenders(name, options, kernel_names, heads, (max_len, head_dim), device))
    return chosen


def _variant_contenders(name: str, options: dict, kernel_names: list[str] | None, heads: int,
                        sizes: tuple[int | None, int], device: torch.device) -> list[Contender]:
    probe = variants.create(name, num_heads=heads, head_dim=sizes[1], max_len=sizes[0], **options).to(device)
    chosen = []
    for kernel in probe.kernels:
        if not KERNELS[kernel].runs_on(device):
            continue
        label = f"auto={kernel}" if kernel == probe.kernel else kernel
        if kernel_names is not None and kernel not in kernel_names and not (
                "auto" in kernel_names and kernel == probe.kernel):
            continue

        def build(max_len: int | None, head_dim: int, kernel: str = kernel) -> Attend:
            module = variants.create(name, num_heads=heads, head_dim=head_dim, kernel=kernel, max_len=max_len,
                                     **options).to(device)
            return lambda q, k, v, causal: module(q, k, v, causal=causal)

        chosen.append(Contender(probe.describe(), label, build, sizes, name=name, family=family(probe),
                                supports_causal=probe.supports_causal, swept=kernel == probe.kernel))
    return chosen


def mixer_contender(name: str, options: dict, heads: int, head_dim: int, device: torch.device) -> Contender:
    """A baseline's token mixer (`variants.baselines`) at width dim = heads * head_dim, on the same q tensor
    read as (batch, seq, dim): forward+backward of the mixer in attention's place, at the same sizes. Its
    causal and non-causal forms are built once each (they can differ in parameters). Kernel `torch`."""
    def build(max_len: int | None, head_dim: int) -> Attend:
        mixers = {causal: variants.create_baseline(name, dim=heads * head_dim, causal=causal, **options).to(device)
                  for causal in (True, False)}

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
            mixed = mixers[causal](rearrange(q, "b h t d -> b t (h d)"))
            return rearrange(mixed, "b t (h d) -> b h t d", h=heads)

        return attend

    described = variants.describe(name, options)
    return Contender(described, MIXER_KERNEL, build, (None, head_dim), name=name, family="baseline", swept=True)


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
                         memory_at_hand: Callable[[], float], share: float, memory_name: str,
                         power: float = 2) -> str:
    """A skip reason when growth as length^power (quadratic by default) from the last length measured, `last`
    = (length, seconds per call, peak bytes), would take longer than `budget` seconds per call or more than
    `share` of the memory at hand (`memory_at_hand()` bytes, of what `memory_name` says); "" when the next
    length may run. `attnlab speed` (on each sweep's variable) and gpu-check both decide with it."""
    if last is None:
        return ""
    previous_length, previous_seconds, previous_peak = last
    growth = (length / previous_length) ** power
    if previous_seconds * growth > budget:
        return f"skipped: predicted {previous_seconds * growth:.1f}s per call > budget {budget:g}s"
    if previous_peak * growth > share * memory_at_hand():
        return f"skipped: predicted peak {previous_peak * growth / 2**30:.1f} GiB > {share:.0%} of {memory_name}"
    return ""


# Variants whose options decide their cost are timed at settings worth comparing.
SPEC_EXPANSIONS = {
    "relative": [f"relative:kind={kind}" for kind in ("shaw", "t5", "alibi", "rope")],
    "local": ["local:window=256"],
    "sparse": [f"sparse:pattern={pattern}" for pattern in ("strided", "fixed", "longformer", "bigbird")],
}


def default_specs() -> list[str]:
    """Every registered variant, with its defaults or at the settings in SPEC_EXPANSIONS, then every baseline."""
    return [*(spec for name in variants.list_variants() for spec in SPEC_EXPANSIONS.get(name, [name])),
            *variants.list_baselines()]


def chosen_specs(given: list[str] | None) -> list[str]:
    """The specs --variants names (presets, and sets expanded: `variants.presets`), else `default_specs`."""
    return list(expand(",".join(given or []), tuple(default_specs())))


Key = tuple[str, str, bool, str]  # (variant, kernel, causal, sweep)


def _skip_reason(contender: Contender, tags: list[str], case: TimedCase, last: dict[Key, tuple[int, float, float]],
                 budget: float) -> str:
    if case.causal and not contender.supports_causal:
        return "skipped: bidirectional in its paper (supports_causal = False); measured non-causal only"
    for sweep in tags:
        reason = predicted_too_costly(last.get((contender.variant, contender.kernel, case.causal, sweep)),
                                      axis(sweep, case), budget=budget, memory_at_hand=_available_bytes,
                                      share=0.6, memory_name="available memory", power=GROWTH[sweep])
        if reason:
            return reason
    return ""


def _step(attend: Attend, q, k, v, grad: torch.Tensor, causal: bool) -> None:
    """One forward+backward pass."""
    attend(q, k, v, causal).backward(grad)
    q.grad = k.grad = v.grad = None


def measure_case(case: TimedCase, entries: list[tuple[Contender, list[str]]], *, heads: int, repeats: int,
                 budget: float, device: torch.device, last: dict[Key, tuple[int, float, float]],
                 done: Callable[[str], None]) -> list[dict]:
    """One row per contender at `case`: timed in turns with the others, or skipped with the reason. `last`
    holds each (variant, kernel, causal, sweep)'s last measurement, for the skip prediction; `done` is called
    with a label after each contender's first call."""
    dtype, shape = torch.float32, (case.batch, heads, case.seq_len, case.head_dim)
    generator = torch.Generator(device=device).manual_seed(case.seq_len)
    q, k, v = (torch.randn(shape, generator=generator, device=device, dtype=dtype).requires_grad_() for _ in range(3))
    grad = torch.randn(shape, generator=generator, device=device, dtype=dtype)
    rows, active = [], []
    for contender, tags in entries:
        row = {"variant": contender.variant, "name": contender.name, "family": contender.family,
               "kernel": contender.kernel, "sweep": "+".join(tags), "seq_len": case.seq_len, "causal": case.causal,
               "batch": case.batch, "heads": heads, "head_dim": case.head_dim, "dim": heads * case.head_dim,
               "dtype": str(dtype).removeprefix("torch."), "device": device.type}
        status, attend = _skip_reason(contender, tags, case, last, budget), None
        if not status:
            try:
                attend = contender.build(case.seq_len, case.head_dim)
            except ValueError as error:  # a kernel that refuses these sizes (a head_dim it cannot fit, say)
                status = f"skipped: {error}"
        if status:
            rows.append({**row, "status": status})
            done(f"{contender.variant}/{contender.kernel}")
            continue
        call = functools.partial(_step, attend, q, k, v, grad, case.causal)
        with settled_allocator():
            warmup = seconds(call, device)
        peak = peak_memory_bytes(call, device)
        active.append((contender, tags, row, call, peak, [] if warmup < budget else [warmup]))
        done(f"{contender.variant}/{contender.kernel}")
    with settled_allocator():
        for _ in range(repeats):
            for *_, call, _, timings in active:
                if len(timings) < repeats:
                    timings.append(seconds(call, device))
    for contender, tags, row, _, peak, timings in active:
        median = statistics.median(timings)
        for sweep in tags:
            last[(contender.variant, contender.kernel, case.causal, sweep)] = (axis(sweep, case), median, peak)
        rows.append({**row, "status": "ok", "ms": median * 1e3, "ms_min": min(timings) * 1e3,
                     "repeats": len(timings), "peak_mib": peak / 2**20})
    return rows


def _check_settings(*, kernels: list[str] | None, batch: int, heads: int, head_dim: int, repeats: int,
                    budget: float, dims: list[int], lengths: list[int]) -> None:
    """Refuse, in one sentence, a setting at which no case could be timed."""
    for flag, value in (("--batch", batch), ("--heads", heads), ("--head-dim", head_dim), ("--repeats", repeats)):
        if value < 1:
            raise ValueError(f"{flag} got {value}; accepted: an integer >= 1.")
    if not budget > 0:
        raise ValueError(f"--budget got {budget:g}; accepted: a number of seconds > 0 (inf: no budget).")
    for kernel in kernels or []:
        if kernel not in accepted_kernels():
            raise ValueError(f"--kernels got {kernel!r}{closest(kernel, accepted_kernels())}; accepted: "
                             f"{', '.join(accepted_kernels())}.")
    for dim in dims:
        if dim < heads or dim % heads:
            raise ValueError(f"--dims got {dim}, which {heads} heads cannot share; accepted: multiples of --heads "
                             f"({heads}).")
    for length in lengths:
        if length < 1:
            raise ValueError(f"A length of {length} tokens cannot be measured; accepted: integers >= 1.")


def run(*, specs: list[str], kernels: list[str] | None, lengths: list[int], causal_modes: list[bool],
        batch: int, heads: int, head_dim: int, repeats: int, budget: float, device: torch.device,
        out_dir: Path, quiet: bool, dims: list[int] = (), dim_length: int = 1024,
        step_lengths: list[int] = ()) -> tuple[pd.DataFrame, Path]:
    """Measure the three sweeps (`dims` and `step_lengths` empty: the length sweep only) and write the table
    to out_dir/variants-<time>.csv."""
    every_length = [*lengths, *([dim_length] if dims else []), *step_lengths]
    _check_settings(kernels=kernels, batch=batch, heads=heads, head_dim=head_dim, repeats=repeats, budget=budget,
                    dims=list(dims), lengths=every_length)
    field = contenders(specs, kernels, heads, head_dim, device, max_len=max(every_length))
    if not field:
        raise ValueError(f"--kernels {' '.join(kernels or [])} runs none of the variants asked for on {device.type}; "
                         "accepted: a kernel they list that runs there (`attnlab list` names each variant's).")
    cases = plan(field, lengths=lengths, causal_modes=causal_modes, batch=batch, heads=heads, head_dim=head_dim,
                 dims=list(dims), dim_length=dim_length, step_lengths=list(step_lengths))
    rows, last = [], {}
    total = sum(len(measured) for measured in cases.values())
    with tqdm(total=total, disable=quiet, unit="config", desc="speed") as bar:
        for case, measured in cases.items():
            def done(label: str, case: TimedCase = case) -> None:
                bar.set_postfix_str(f"n={case.seq_len} head_dim={case.head_dim} batch={case.batch} {label}")
                bar.update()

            rows += measure_case(case, [(field[index], tags) for index, tags in measured.items()], heads=heads,
                                 repeats=repeats, budget=budget, device=device, last=last, done=done)
    table = pd.DataFrame(rows)
    path = out_dir / f"variants-{time.strftime('%Y%m%d-%H%M%S')}.csv"
    atomic_write_text(path, table.to_csv(index=False))
    return table, path


def run_and_print(**settings) -> None:
    """`attnlab speed`: `run(**settings)`, then milliseconds per contender in each sweep, the rows not
    timed and why, the log-log slopes, the claimed complexities beside the measured ones (also written to
    complexity-<time>.csv beside the table) with a sentence for each disagreement, the figures the variant
    issues set goals for, and the CSVs' paths."""
    table, path = run(**settings)
    for printed in fits.sweep_tables(table):
        print(printed)
    for row in table[table["status"] != "ok"].itertuples():
        print(f"{row.variant}/{row.kernel} n={row.seq_len} head_dim={row.head_dim} causal={row.causal}: {row.status}")
    fitted = fits.slopes(table)
    if len(fitted):
        print("log-log slope of time against length:")
        print(fitted.round(2).to_string(index=False))
    summary = fits.complexity(table)
    if len(summary):
        print("claimed complexity per layer / measured time ~ n^a d^b / sequential steps (time ~ n^s at fixed work):")
        print(summary[["variant", "kernel", "causal", "claimed", "measured", "claimed_sequential", "steps_exponent"]]
              .round(2).to_string(index=False))
        for sentence in fits.disagreements(summary):
            print(sentence)
        summary_path = path.with_name(path.name.replace("variants-", "complexity-", 1))
        atomic_write_text(summary_path, summary.to_csv(index=False))
        print(f"wrote {summary_path}")
    for line in fits.acceptance(table):
        print(line)
    print(f"wrote {path}")
