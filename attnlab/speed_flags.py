"""The flags of `attnlab speed`: which variants, kernels and sizes it times. Apart from `attnlab.cli`, so that
the command line stays short to read."""

from __future__ import annotations

from attnlab.arguments import QUIET


def add_speed(commands, run) -> None:
    """`attnlab speed`, whose work `run` does."""
    speed = commands.add_parser("speed", aliases=["bench-variants"],
                                help="time forward+backward and peak memory per variant and kernel")
    speed.add_argument("--variants", nargs="+", metavar="SPEC",
                       help="variant specs, name[:option=value...] (default: every variant, at settings worth "
                            "comparing, and every baseline)")
    speed.add_argument("--kernels", nargs="+",
                       help="only these kernels: auto, a kernel name, naive (the tutorials' naive implementation), "
                            "direct (torch sdpa), masked (torch sdpa with an explicit mask), torch (the baselines' "
                            "mixers); default: all")
    speed.add_argument("--lengths", nargs="+", type=int, default=[512, 1024, 2048, 4096, 8192, 16384],
                       help="sequence lengths; quadratic kernels stop where time or memory would run out")
    speed.add_argument("--dims", nargs="*", type=int, default=[64, 128, 256, 512, 1024],
                       help="widths d = heads * head_dim of the sweep against d (heads fixed), for the kernel auto "
                            "picks and the baselines (default: 64 to 1024; the flag alone: no such sweep)")
    speed.add_argument("--dim-length", type=int, default=1024, help="sequence length of the sweep against d")
    speed.add_argument("--step-lengths", nargs="*", type=int, default=[256, 512, 1024, 2048],
                       help="lengths of the sweep at fixed total work, batch * work(n) held at its value at the "
                            "longest with --batch, whose exponent of time in n counts sequential steps (default: "
                            "256 to 2048; the flag alone: no such sweep)")
    speed.add_argument("--causal", choices=["yes", "no", "both"], default="yes")
    speed.add_argument("--batch", type=int, default=1)
    speed.add_argument("--heads", type=int, default=4)
    speed.add_argument("--head-dim", type=int, default=64)
    speed.add_argument("--repeats", type=int, default=3, help="timed rounds per case (median reported)")
    speed.add_argument("--budget", type=float, default=30.0,
                       help="skip a contender whose next call is predicted to take longer (seconds)")
    speed.add_argument("--device", choices=["cpu", "cuda"])
    speed.add_argument("--out", default="runs/speed")
    speed.add_argument("--quiet", **QUIET)
    speed.set_defaults(func=run)
