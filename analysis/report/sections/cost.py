"""The report's cost section, from `make speed`: time and peak memory against sequence length per
variant and kernel (every family: dense, local, sparse, kernelised, low-rank, and the baselines' mixers), time
against width d and against length at fixed total work, and the complexity table, claimed O(...) beside the
measured n^a d^b and sequential steps, computed by `experiments.speed.fits` as `make speed` prints it."""

from __future__ import annotations

import pandas as pd

from analysis.report import figures
from analysis.report.context import Context
from analysis.report.render import Block, Figure, Table, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section
from common.statistics import loglog_slope
from experiments.speed import fits


@section("cost", "Cost: time and memory against sequence length and width")
def cost(context: Context) -> list[Block]:
    speed = context.speed
    blocks: list[Block] = [Text(
        "Forward+backward time and peak memory per variant and kernel from `make speed`, log-log; the "
        "exponent k of a least-squares fit time ∝ n^k (and memory ∝ n^k) over each line's measured lengths is "
        "printed on the line. Files read: " + (", ".join(path.name for path in context.speed_files) or "none") + "."
    )]
    if speed is None:
        blocks.append(Text(f"No speed table in {context.runs_dir / 'speed'}: `make speed` writes one."))
        return blocks
    measured = speed[speed["status"] == "ok"].assign(family=fits.column_or(speed, "family", "not recorded"))
    blocks += _length_blocks(context, fits.in_sweep(measured, "length"))
    blocks += _width_and_steps_blocks(context, measured)
    blocks += _complexity_blocks(speed)
    skipped = speed[speed["status"] != "ok"]
    if len(skipped):
        blocks.append(Table("cost-skipped", "Measurements `make speed` skipped, and why",
                            skipped[["variant", "kernel", "seq_len", "head_dim", "causal", "device", "status"]]))
    return blocks


def _markers(frame: pd.DataFrame) -> dict[str, str]:
    kernels = sorted(frame["kernel"].astype(str).unique())
    return dict(zip(kernels, "osD^v<>ph*Xd" * 3, strict=False))


def _draw(context: Context, ax, line: pd.DataFrame, x: str, y: str, marker: str, label: str) -> float | None:
    """One line, log-log, labelled with its fitted exponent (also printed after its last point)."""
    colour = context.colour(str(line["variant"].iloc[0]))
    exponent = loglog_slope(line[x], line[y])
    shown = f"{'d' if x == 'dim' else 'n'}^{exponent:.2f}" if exponent is not None else "one point"
    ax.plot(line[x], line[y], color=colour, marker=marker, markersize=5, label=f"{label} ({shown})")
    ax.annotate(shown, (line[x].iloc[-1], line[y].iloc[-1]), textcoords="offset points", xytext=(4, 0), fontsize=8,
                color=colour, va="center")
    return exponent


def _length_blocks(context: Context, measured: pd.DataFrame) -> list[Block]:
    """Per causality and device, time and peak memory against length, and the table of fitted exponents."""
    blocks, exponents, markers = [], [], _markers(measured)
    for index, ((causal, device), frame) in enumerate(measured.groupby(["causal", "device"], sort=True)):
        fig, axes = figures.figure(1, 2, width=14.0, height=5.5)
        for (family, variant, kernel), line in frame.groupby(["family", "variant", "kernel"], sort=True):
            line = line.sort_values("seq_len")
            label = f"{variant} / {kernel} [{family}]"
            time_exponent = _draw(context, axes[0, 0], line, "seq_len", "ms", markers[str(kernel)], label)
            memory_exponent = _draw(context, axes[0, 1], line, "seq_len", "peak_mib", markers[str(kernel)], label)
            exponents.append({"variant": variant, "kernel": kernel, "family": family, "causal": causal,
                              "device": device, "lengths": f"{line['seq_len'].min()}-{line['seq_len'].max()}",
                              "time_exponent": time_exponent, "memory_exponent": memory_exponent,
                              "ms_at_longest": line["ms"].iloc[-1], "peak_mib_at_longest": line["peak_mib"].iloc[-1]})
        mode = "causal" if causal else "bidirectional"
        for ax, ylabel, what in ((axes[0, 0], "time per forward+backward (ms, log scale)", "time"),
                                 (axes[0, 1], "peak memory (MiB, log scale)", "peak memory")):
            figures.log_axes(ax, frame["seq_len"])
            ax.set_xlabel("sequence length n (tokens, log scale)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{what} against length ({mode}, {device})")
            ax.margins(x=0.15)  # room for the exponent printed after each line's last point
        axes[0, 1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
        blocks.append(Figure(f"cost-{index:02d}-{mode}-{shared.slug(device)}",
                             f"Time and peak memory against sequence length ({mode}, {device}), every family; the "
                             "fitted exponent is printed on each line", fig, frame))
    if exponents:
        blocks.append(Table("cost-exponents", "Fitted exponents (time ∝ n^k, memory ∝ n^k) per variant and kernel",
                            pd.DataFrame(exponents)))
    return blocks


def _width_and_steps_blocks(context: Context, measured: pd.DataFrame) -> list[Block]:
    """Per causality and device: time against width d at a fixed length, and time against length at fixed
    total work (batch * work(n) held constant), where the sweeps were measured."""
    against_d = fits.in_sweep(measured, "dim").assign(dim=lambda frame: frame["heads"] * frame["head_dim"])
    steps = fits.in_sweep(measured, "steps")
    both = pd.concat([against_d.assign(panel="d"), steps.assign(panel="steps")], ignore_index=True)
    blocks, markers = [], _markers(both)
    for index, ((causal, device), frame) in enumerate(both.groupby(["causal", "device"], sort=True)):
        fig, axes = figures.figure(1, 2, width=14.0, height=5.5)
        mode = "causal" if causal else "bidirectional"
        for ax, panel, x, title in ((axes[0, 0], "d", "dim", "time against width d"),
                                    (axes[0, 1], "steps", "seq_len", "time against n at fixed total work")):
            drawn = frame[frame["panel"] == panel]
            for (family, variant, kernel), line in drawn.groupby(["family", "variant", "kernel"], sort=True):
                _draw(context, ax, line.sort_values(x), x, "ms", markers[str(kernel)],
                      f"{variant} / {kernel} [{family}]")
            if len(drawn):
                figures.log_axes(ax, drawn[x])
                ax.margins(x=0.15)
            fixed = f"n = {', '.join(map(str, sorted(drawn['seq_len'].unique())))}" if panel == "d" else \
                "batch * work(n) fixed"
            ax.set_xlabel("width d = heads * head_dim (log scale)" if panel == "d" else "sequence length n (log scale)")
            ax.set_ylabel("time per forward+backward (ms, log scale)")
            ax.set_title(f"{title} ({fixed}; {mode}, {device})")
        axes[0, 1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
        blocks.append(Figure(f"cost-width-{index:02d}-{mode}-{shared.slug(device)}",
                             f"Time against width d at a fixed length, and against length at fixed total work "
                             f"({mode}, {device}): an exponent near 1 on the right means steps taken one position "
                             "after another", fig, frame))
    return blocks


def _complexity_blocks(speed: pd.DataFrame) -> list[Block]:
    summary = fits.complexity(speed)
    if summary.empty:
        return []
    shown = summary.rename(columns={
        "claimed": "claimed O(...)", "measured": "measured n^a d^b", "lengths": "n fitted", "dims": "d fitted",
        "claimed_sequential": "claimed sequential steps", "steps_exponent": "time ∝ n^s at fixed work: s",
        "step_lengths": "n fitted at fixed work"})
    sentences = fits.disagreements(summary)
    return [Table("cost-complexity", "The tutorials' complexity table, measured: claimed per layer beside the fitted "
                                     "time ∝ n^a d^b (a over the length sweep, b over the width sweep, each over its "
                                     "top three octaves), and sequential steps as the exponent s of time against n "
                                     "at fixed total work (about 1: one position after another; about 0: parallel)",
                  shown.drop(columns=["a", "b"]), data=summary),
            *([Text(" ".join(sentences))] if sentences else [])]
