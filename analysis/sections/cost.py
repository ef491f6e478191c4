"""The report's cost section: time and peak memory against sequence length from `make bench-variants`,
with the fitted exponent of each line."""

from __future__ import annotations

import pandas as pd

from analysis import figures
from analysis.context import Context
from analysis.render import Block, Figure, Table, Text
from analysis.sections import shared
from analysis.sections.registry import section


@section("cost", "Cost: time and memory against sequence length")
def cost(context: Context) -> list[Block]:
    bench = context.bench
    blocks: list[Block] = [Text(
        "Forward+backward time and peak memory per variant and kernel from `make bench-variants`, log-log; the "
        "exponent k of a least-squares fit time ∝ n^k (and memory ∝ n^k) over each line's measured lengths is "
        "printed on the line. Files read: " + (", ".join(path.name for path in context.bench_files) or "none") + "."
    )]
    if bench is None:
        blocks.append(Text(f"No benchmark table in {context.runs_dir / 'bench'}: `make bench-variants` writes one."))
        return blocks
    measured = bench[bench["status"] == "ok"].copy()
    exponents = []
    kernels = sorted(measured["kernel"].astype(str).unique())
    markers = dict(zip(kernels, "osD^v<>ph*Xd" * 3, strict=False))
    for index, ((causal, device), frame) in enumerate(measured.groupby(["causal", "device"], sort=True)):
        fig, axes = figures.figure(1, 2, width=14.0, height=5.5)
        for (variant, kernel), line in frame.groupby(["variant", "kernel"], sort=True):
            line = line.sort_values("seq_len")
            colour = context.colour(str(variant))
            time_exponent = figures.fit_exponent(line["seq_len"], line["ms"])
            memory_exponent = figures.fit_exponent(line["seq_len"], line["peak_mib"])
            exponents.append({"variant": variant, "kernel": kernel, "causal": causal, "device": device,
                              "lengths": f"{line['seq_len'].min()}-{line['seq_len'].max()}",
                              "time_exponent": time_exponent, "memory_exponent": memory_exponent,
                              "ms_at_longest": line["ms"].iloc[-1], "peak_mib_at_longest": line["peak_mib"].iloc[-1]})
            for ax, column, exponent in ((axes[0, 0], "ms", time_exponent), (axes[0, 1], "peak_mib", memory_exponent)):
                shown = f"n^{exponent:.2f}" if exponent is not None else "one length"
                ax.plot(line["seq_len"], line[column], color=colour, marker=markers[str(kernel)], markersize=5,
                        label=f"{variant} / {kernel} ({shown})")
                ax.annotate(shown, (line["seq_len"].iloc[-1], line[column].iloc[-1]), textcoords="offset points",
                            xytext=(4, 0), fontsize=8, color=colour, va="center")
        mode = "causal" if causal else "bidirectional"
        for ax, ylabel, what in ((axes[0, 0], "time per forward+backward (ms, log scale)", "time"),
                                 (axes[0, 1], "peak memory (MiB, log scale)", "peak memory")):
            figures.log_axes(ax, frame["seq_len"])
            ax.set_xlabel("sequence length n (tokens, log scale)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{what} against length ({mode}, {device})")
        for ax in axes[0]:
            ax.margins(x=0.15)  # room for the exponent printed after each line's last point
        axes[0, 1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
        blocks.append(Figure(f"cost-{index:02d}-{'causal' if causal else 'bidirectional'}-{shared.slug(device)}",
                             f"Time and peak memory against sequence length ({mode}, {device}); the fitted exponent "
                             "is printed on each line", fig, frame))
    if exponents:
        blocks.append(Table("cost-exponents", "Fitted exponents (time ∝ n^k, memory ∝ n^k) per variant and kernel",
                            pd.DataFrame(exponents)))
    skipped = bench[bench["status"] != "ok"]
    if len(skipped):
        blocks.append(Table("cost-skipped", "Measurements the benchmark skipped, and why",
                            skipped[["variant", "kernel", "seq_len", "causal", "device", "status"]]))
    return blocks
