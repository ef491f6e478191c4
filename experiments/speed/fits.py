"""What a `make speed` table says: log-log slopes against length, the fitted exponents of
time ~ n^a d^b beside the complexity each row claims, the exponent of time against n at fixed total work, and
the figures the variant issues set goals for. The report's cost section computes its tables with these same
functions.

The claims are each variant's and baseline's `complexity`, declared beside its code: the tutorials' table, per
layer, in the sequence length n and the width d (Vaswani et al. 2017, Table 1: self-attention O(n^2 d),
recurrent O(n d^2), convolutional O(k n d^2), restricted self-attention of window w O(n w d)), and the
kernelised, low-rank and state-space rows from their papers (linear attention O(n d^2), Performer O(n m d),
Linformer O(n r d), Mamba O(n d N), N the state size). Its third column, sequential operations, is
read as a measurement: with batch * work(n) held fixed, a layer that must step through time one position
after another takes time ~ n^1, a parallel one ~ n^0. `make speed` times attention without its q/k/v and output
projections (the table's self-attention row) and a baseline mixer whole, its projections included.

Each exponent is the least-squares slope of log time against log x over the top TOP_OCTAVES octaves of x
measured (for the default lengths, 2048 to 16384), where fixed per-call costs weigh least. A measurement
agrees with its claim when it rounds to the claimed exponent.
"""

from __future__ import annotations

import pandas as pd

import variants
from common.statistics import loglog_slope
from variants.base import Complexity

SWEEPS = ("length", "dim", "steps")  # the sweeps of `attnlab speed`, in the order a row's `sweep` names them
TOP_OCTAVES = 3


def claim(name: str) -> Complexity | None:
    """The complexity a registered variant or baseline declares (its class's `complexity`); None for a name
    that declares none or is not registered (the tutorials' naive implementation, torch's sdpa called directly)."""
    try:
        return variants.variant_class(name).complexity
    except ValueError:
        return None


def work_exponent(name: str, family: str) -> int:
    """p in work(n) ~ n^p, what the sweep at fixed total work holds batch * n^p constant by: the claim's
    exponent of n where the row has one, else 2 for dense attention (n x n pairs) and 1 for every other
    family (a window, a block pattern, feature maps, a low rank, a mixer)."""
    declared = claim(name)
    if declared is not None:
        return declared.n
    return 2 if family == "dense" else 1


def in_sweep(table: pd.DataFrame, sweep: str) -> pd.DataFrame:
    """The rows measured in `sweep` ("length", "dim" or "steps"); a table without a `sweep` column (written
    before there were three) holds the length sweep only."""
    if "sweep" not in table:
        return table if sweep == "length" else table.iloc[0:0]
    tags = table["sweep"].fillna("length").astype(str).str.split("+")
    return table[tags.apply(lambda names: sweep in names)]


def column_or(table: pd.DataFrame, column: str, default: str) -> pd.Series:
    """A text column, or `default` where a table written before it was added lacks it."""
    if column not in table:
        return pd.Series(default, index=table.index, dtype=object)
    return table[column].fillna(default).astype(str)


def fit(x: pd.Series, y: pd.Series) -> tuple[float | None, str]:
    """The slope of log y against log x over the top TOP_OCTAVES octaves of x, and the range it spans
    ("2048-16384"); (None, "") with fewer than two distinct x there."""
    keep = (x >= x.max() / 2**TOP_OCTAVES) & (y > 0)
    x, y = x[keep].astype(float), y[keep].astype(float)
    slope = loglog_slope(x, y)
    return (None, "") if slope is None else (slope, f"{int(x.min())}-{int(x.max())}")


def sweep_tables(table: pd.DataFrame) -> list[str]:
    """Milliseconds per (variant, kernel, causality) in each sweep measured, as printable tables with titles."""
    ok, printed = table[table["status"] == "ok"], []
    for sweep, column, title in (
            ("length", "seq_len", "milliseconds per forward+backward against length n:"),
            ("dim", "dim", "milliseconds against width d = heads * head_dim:"),
            ("steps", "seq_len", "milliseconds against n at fixed total work (batch * work(n) constant):")):
        measured = in_sweep(ok, sweep)
        if len(measured):
            grid = measured.pivot_table(index=["variant", "kernel", "causal"], columns=column, values="ms")
            printed.append(f"{title}\n{grid.round(1).to_string()}")
    return printed


def slopes(table: pd.DataFrame, low: int = 2048, high: int = 16384) -> pd.DataFrame:
    """Log-log slope of time against length over [low, high] in the length sweep, per variant, kernel and
    causality."""
    ok = in_sweep(table[table["status"] == "ok"], "length")
    ok = ok[ok["seq_len"].between(low, high)]
    rows = []
    for (variant, kernel, causal), group in ok.groupby(["variant", "kernel", "causal"]):
        slope = loglog_slope(group["seq_len"], group["ms"])
        if slope is not None:
            rows.append({"variant": variant, "kernel": kernel, "causal": causal, "slope": slope,
                         "lengths": f"{group['seq_len'].min()}-{group['seq_len'].max()}"})
    return pd.DataFrame(rows, columns=["variant", "kernel", "causal", "slope", "lengths"])


COMPLEXITY_COLUMNS = ["variant", "name", "kernel", "causal", "device", "family", "claimed", "measured", "a", "lengths",
                      "b", "dims", "claimed_sequential", "steps_exponent", "step_lengths"]


def complexity(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, kernel, causality, device) measured against d or at fixed work: the claimed
    complexity, the measured "n^a d^b" (a from the length sweep, b from the sweep against d), and the exponent
    of time against n at fixed total work (time divided by batch * n^p, p = `work_exponent`)."""
    ok = table[table["status"] == "ok"]
    names = column_or(ok, "name", "")
    ok = ok.assign(name=names.where(names != "", ok["variant"].astype(str)), family=column_or(ok, "family", ""))
    swept = pd.concat([in_sweep(ok, "dim"), in_sweep(ok, "steps")])
    rows = []
    for (variant, kernel, causal, device), _ in swept.groupby(["variant", "kernel", "causal", "device"]):
        rows_of = ok[(ok["variant"] == variant) & (ok["kernel"] == kernel) & (ok["causal"] == causal)
                     & (ok["device"] == device)]
        name, family = rows_of["name"].iloc[0], rows_of["family"].iloc[0]
        claimed = claim(name)
        lengths, dims, steps = (in_sweep(rows_of, sweep) for sweep in SWEEPS)
        a, length_range = fit(lengths["seq_len"], lengths["ms"])
        b, dim_range = fit(dims["heads"] * dims["head_dim"], dims["ms"])
        work = steps["batch"] * steps["seq_len"].astype(float) ** work_exponent(name, family)
        s, step_range = fit(steps["seq_len"], steps["ms"] / work * work.max())
        rows.append({"variant": variant, "name": name, "kernel": kernel, "causal": causal, "device": device,
                     "family": family, "claimed": claimed.text if claimed else "not declared",
                     "measured": _power_text(a, b), "a": a, "lengths": length_range, "b": b, "dims": dim_range,
                     "claimed_sequential": claimed.sequential if claimed else "not declared",
                     "steps_exponent": s, "step_lengths": step_range})
    return pd.DataFrame(rows, columns=COMPLEXITY_COLUMNS)


def _power_text(a: float | None, b: float | None) -> str:
    parts = [f"{symbol}^{value:.2f}" for symbol, value in (("n", a), ("d", b)) if value is not None]
    return " ".join(parts) or "not measured"


def disagreements(summary: pd.DataFrame) -> list[str]:
    """One sentence per measured exponent that does not round to its claim (rows without a claim are left
    out), or one sentence saying that every one does."""
    sentences, checked = [], 0
    for row in summary.itertuples():
        declared = claim(row.name)
        if declared is None:
            continue
        who = f"{row.variant} ({row.kernel}, {'causal' if row.causal else 'bidirectional'}, {row.device})"
        for symbol, measured, claimed, span in (("n", row.a, declared.n, row.lengths),
                                                ("d", row.b, declared.d, row.dims)):
            if measured is None or pd.isna(measured):
                continue
            checked += 1
            if round(measured) != round(claimed):
                sentences.append(f"{who}: time grows as {symbol}^{measured:.2f} over {symbol} = {span}, not "
                                 f"{symbol}^{claimed:g} as {declared.text} claims.")
        if row.steps_exponent is not None and not pd.isna(row.steps_exponent):
            checked += 1
            if round(row.steps_exponent) != declared.step_exponent:
                sentences.append(f"{who}: at fixed total work time grows as n^{row.steps_exponent:.2f} over n = "
                                 f"{row.step_lengths}, where {declared.sequential} sequential steps predict "
                                 f"n^{declared.step_exponent}.")
    if checked and not sentences:
        sentences.append(f"Every one of the {checked} measured exponents rounds to its claim.")
    return sentences


GOAL_LENGTH = 16384


def _cell(frame: pd.DataFrame, length: int, column: str = "ms") -> float | None:
    frame = frame[frame["seq_len"] == length]
    return float(frame[column].iloc[0]) if len(frame) else None


def _auto(frame: pd.DataFrame, variant: str) -> pd.DataFrame:
    return frame[(frame["variant"] == variant) & frame["kernel"].str.startswith("auto")]


def acceptance(table: pd.DataFrame) -> list[str]:
    """The figures the variant issues set goals for, from the length sweep, wherever the rows they need were
    measured."""
    ok = in_sweep(table[table["status"] == "ok"], "length")
    causal = ok[ok["causal"].astype(bool)]
    return [*_dense_and_local_goals(causal), *_slope_goals(table), *_linear_goals(causal)]


def _dense_and_local_goals(ok: pd.DataFrame) -> list[str]:
    """Dense (auto) against the direct sdpa call and the naive implementation; local_w256 on blocked against
    its masked emulation and dense sdpa. Causal rows only."""
    lines = []
    direct = ok[ok["variant"] == "torch-sdpa"]
    naive = ok[ok["variant"] == "tutorial-naive"]
    dense = _auto(ok, "dense")
    at = 4096
    if None not in (_cell(dense, at), _cell(direct, at)):
        lines.append(f"n={at} causal: dense (auto) / direct sdpa = {_cell(dense, at) / _cell(direct, at):.2f}x time"
                     " (goal <= 1.2)")
    if None not in (_cell(dense, at), _cell(naive, at)):
        lines.append(f"n={at} causal: naive / dense (auto) = {_cell(naive, at) / _cell(dense, at):.1f}x time"
                     " (goal >= 5)")
    at = GOAL_LENGTH
    local = _auto(ok, "local_w256")
    masked = ok[(ok["variant"] == "local_w256") & (ok["kernel"] == "sdpa")]
    if None not in (_cell(local, at), _cell(masked, at)):
        lines.append(f"n={at} causal: local_w256 masked emulation (sdpa) / blocked = "
                     f"{_cell(masked, at) / _cell(local, at):.1f}x time (goal >= 10), "
                     f"{_cell(masked, at, 'peak_mib') / _cell(local, at, 'peak_mib'):.1f}x peak memory (goal >= 3)")
    if None not in (_cell(local, at), _cell(direct, at)):
        lines.append(f"n={at} causal: dense direct sdpa / local_w256 blocked = "
                     f"{_cell(direct, at) / _cell(local, at):.1f}x time (goal >= 4; 32x fewer attended pairs)")
    return lines


def _slope_goals(table: pd.DataFrame) -> list[str]:
    """Slopes on the kernel auto picks: causal local, Longformer and BigBird (goal <= 1.15), and every
    kernelised and low-rank variant in each causality it was measured in (goal <= 1.1)."""
    families = dict(zip(table["variant"], column_or(table, "family", ""), strict=True))
    lines = []
    for row in slopes(table).itertuples():
        if not row.kernel.startswith("auto"):
            continue
        family = families.get(row.variant, "")
        if row.causal and row.variant.startswith(("local", "sparse_longformer", "sparse_bigbird")):
            lines.append(f"causal {row.variant} (auto): log-log slope of time over {row.lengths} = {row.slope:.2f}"
                         " (goal <= 1.15)")
        elif family in ("kernelised", "low-rank"):
            mode = "causal" if row.causal else "bidirectional"
            lines.append(f"{mode} {row.variant} ({row.kernel}, {family}): log-log slope of time over {row.lengths}"
                         f" = {row.slope:.2f} (goal <= 1.1)")
    return lines


def _sizes(frame: pd.DataFrame) -> str:
    row = frame.iloc[0]
    return f"batch {row['batch']}, {row['heads']} heads of {row['head_dim']}, {row['dtype']}, {row['device']}"


def _linear_goals(ok: pd.DataFrame) -> list[str]:
    """At GOAL_LENGTH, causal: linear attention (auto) against dense (auto: sdpa's flash kernel on a CPU) in
    time, and against masked dense in peak memory: sdpa with an explicit boolean mask (what a dense kernel
    handed a mask takes; it fits at 16K, where the naive implementation's n x n float matrices, 4 GiB each for
    4 heads, may not), and the naive implementation where it was measured too."""
    at, lines = GOAL_LENGTH, []
    dense = _auto(ok, "dense")
    masked_dense = (("masked dense (torch-sdpa-masked: sdpa with an explicit boolean mask)",
                     ok[ok["variant"] == "torch-sdpa-masked"]),
                    ("the naive implementation (tutorial-naive)", ok[ok["variant"] == "tutorial-naive"]))
    linear = ok[(column_or(ok, "name", "") == "linear") & ok["kernel"].str.startswith("auto")]
    for variant, rows in linear[linear["seq_len"] == at].groupby("variant"):
        label = f"{variant} ({rows['kernel'].iloc[0]})"
        if _cell(dense, at) is not None:
            lines.append(f"n={at} causal ({_sizes(rows)}): dense ({dense['kernel'].iloc[0]}) / {label} = "
                         f"{_cell(dense, at) / _cell(rows, at):.1f}x time (goal >= 4)")
        peak = _cell(rows, at, "peak_mib")
        for what, other in masked_dense:
            if _cell(other, at, "peak_mib") is not None and peak > 0:
                lines.append(f"n={at} causal: {label} peak memory = 1/{_cell(other, at, 'peak_mib') / peak:.1f} of "
                             f"{what} (goal <= 1/4)")
    return lines
