"""attnlab's command line: `python -m experiments <command>` (installed as `attnlab`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

import variants


def _list(args: argparse.Namespace) -> None:
    print("Variants (create with variants.create(name, num_heads=..., head_dim=..., **options)):")
    print(variants.describe_variants())


def _bench_variants(args: argparse.Namespace) -> None:
    from experiments import bench

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    specs = args.variants or bench.default_specs()
    causal_modes = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    table, path = bench.run(
        specs=specs, kernels=args.kernels, lengths=args.lengths, causal_modes=causal_modes, batch=args.batch,
        heads=args.heads, head_dim=args.head_dim, repeats=args.repeats, budget=args.budget, device=device,
        out_dir=Path(args.out), quiet=args.quiet,
    )
    with_times = table[table["status"] == "ok"]
    print(with_times.pivot_table(index=["variant", "kernel", "causal"], columns="seq_len", values="ms")
          .round(1).to_string())
    skipped = table[table["status"] != "ok"]
    for row in skipped.itertuples():
        print(f"{row.variant}/{row.kernel} n={row.seq_len}: {row.status}")
    for line in bench.acceptance(table):
        print(line)
    print(f"wrote {path}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnlab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("list", help="list the attention variants and their options").set_defaults(func=_list)

    bench = commands.add_parser("bench-variants", help="time forward+backward and peak memory per variant and kernel")
    bench.add_argument("--variants", nargs="+", metavar="SPEC",
                       help="variant specs, name[:option=value...] (default: every variant, every relative kind)")
    bench.add_argument("--kernels", nargs="+", help="only these kernels ('auto' included); default: all")
    bench.add_argument("--lengths", nargs="+", type=int, default=[512, 1024, 2048, 4096, 8192])
    bench.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    bench.add_argument("--batch", type=int, default=1)
    bench.add_argument("--heads", type=int, default=4)
    bench.add_argument("--head-dim", type=int, default=64)
    bench.add_argument("--repeats", type=int, default=3, help="timed rounds per length (median reported)")
    bench.add_argument("--budget", type=float, default=20.0,
                       help="skip a contender whose next call is predicted to take longer (seconds)")
    bench.add_argument("--device", choices=["cpu", "cuda"])
    bench.add_argument("--out", default="runs/bench")
    bench.add_argument("--quiet", action="store_true", default=bool(os.environ.get("CI")),
                       help="no progress bar (the default when CI is set)")
    bench.set_defaults(func=_bench_variants)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except ValueError as error:  # a user's bad value: one sentence, no traceback
        print(f"attnlab {args.command}: {error}", file=sys.stderr)
        return 2
    return 0
