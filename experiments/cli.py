"""attnlab's command line: `python -m experiments <command>` (installed as `attnlab`).

    attnlab run --variant dense,local --task passkey --profile quick --set variant.window=32
    attnlab resume <run_id>
    attnlab sample passkey --count 5 --seed 0
    attnlab list
    attnlab bench-variants --variants local:window=256 --lengths 2048 16384
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

import pandas as pd
import torch

import variants
from experiments import config as configs
from experiments import tasks
from experiments.records import RecordError, RunRecord, new_run_id
from variants.kernels import KERNELS


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_device(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("Device 'cuda' was asked for but this machine has no CUDA device; accepted: cpu.")


class StopFlag:
    """SIGINT/SIGTERM ask the running training loop to checkpoint and stop, marking the run interrupted."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, step: int) -> bool:
        return self.signal is not None

    def install(self) -> None:
        def handler(signum, frame):
            if self.signal is not None:  # a second signal: stop now
                raise KeyboardInterrupt
            self.signal = signum

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)


def _results_table(summaries: list[dict]) -> str:
    """One table per task: a row per run, accuracy per distance bucket as columns."""
    blocks = []
    for task in dict.fromkeys(summary["task"] for summary in summaries):
        rows = []
        for summary in (s for s in summaries if s["task"] == task):
            row = {"variant": summary["variant_name"], "status": summary["status"],
                   "eval_acc": summary["eval_accuracy"], "chance": summary["chance_accuracy"]}
            for bucket in summary["accuracy_by_distance"]:
                row[f"d{bucket['lo']}-{bucket['hi']}"] = bucket["accuracy"]
            tokens_per_second = summary["tokens_per_second"]
            row.update({"steps": summary["steps"], "wall_s": round(summary["wall_seconds"], 1),
                        "tokens/s": round(tokens_per_second) if tokens_per_second else None,
                        "run": summary["run_id"]})
            rows.append(row)
        table = pd.DataFrame(rows).to_string(index=False, float_format=lambda value: f"{value:.3f}", na_rep="-")
        blocks.append(f"task {task} (accuracy at scored positions; dN-M = dependency distance N..M)\n{table}")
    return "\n\n".join(blocks)


def _train_runs(pending: list[tuple[configs.RunConfig, RunRecord]], runs_dir: Path, quiet: bool) -> int:
    from experiments.train import train

    stop = StopFlag()
    stop.install()
    summaries, exit_code = [], 0
    for config, record in pending:
        try:
            summary = train(config, record, quiet=quiet, should_stop=stop)
        except ValueError as error:  # inputs were validated before training: this is a bug, show its trace
            raise RuntimeError(f"run {record.run_id} failed") from error
        summaries.append(summary)
        if summary["status"] == "interrupted":
            print(f"run {record.run_id} interrupted at step {summary['steps']}; continue it with: "
                  f"attnlab resume {record.run_id} --runs-dir {runs_dir}", file=sys.stderr)
            exit_code = 130
            break
        if summary["status"] != "completed":
            exit_code = 1
            print(f"run {record.run_id} {summary['status']}: {summary['error']}", file=sys.stderr)
    print(_results_table(summaries))
    print(f"runs saved under {runs_dir}/")
    return exit_code


def _run(args: argparse.Namespace) -> int:
    device = args.device or _default_device()
    _check_device(device)
    overrides = configs.parse_sets(args.set or [])
    names = [name for name in args.variant.split(",") if name]
    task_names = [name for name in args.task.split(",") if name] if args.task else tasks.DEFAULT_SUITE
    runs_dir = Path(args.runs_dir)
    # Resolve every config before training anything, so a typo in the last one costs nothing.
    resolved = [
        configs.resolve(variant=name, task=task, profile=args.profile, seed=args.seed, device=device,
                        backend=args.backend, overrides=configs.for_variant(overrides, name, names))
        for name in names for task in task_names
    ]
    pending = []
    for config in resolved:
        described = variants.create(config.variant, num_heads=config.model.heads,
                                    head_dim=config.model.dim // config.model.heads,
                                    **config.variant_options).describe()
        record = RunRecord.create(runs_dir, new_run_id(described, config.task, config.seed))
        record.write_config(config.to_dict())
        pending.append((config, record))
    return _train_runs(pending, runs_dir, args.quiet)


def _resume(args: argparse.Namespace) -> int:
    runs_dir = Path(args.runs_dir)
    record = RunRecord.open(runs_dir, args.run_id)
    config = configs.from_dict(record.read_config())
    _check_device(config.device)
    if (record.path / "summary.json").exists() and record.read_summary()["status"] == "completed":
        raise RecordError(f"Run {args.run_id!r} is already completed; accepted: a run that is interrupted, "
                          "failed or was killed.")
    record.load_checkpoint()  # a corrupt checkpoint is the user's to know about before anything runs
    return _train_runs([(config, record)], runs_dir, args.quiet)


def _sample(args: argparse.Namespace) -> int:
    overrides = configs.parse_sets(args.set or [])
    task = tasks.create_task(args.task, profile=args.profile, **overrides["task"])
    generator = torch.Generator().manual_seed(args.seed)
    batch = task.batch(args.count, generator, torch.device("cpu"))
    for index in range(args.count):
        example = task.example(batch, index)
        if args.format == "json":
            print(json.dumps(example))
        else:
            print(f"{' '.join(example['input'])} -> {task.label_text(batch, index)}")
    return 0


def _list(args: argparse.Namespace) -> int:
    print("Variants (--variant NAME, options with --set variant.OPTION=VALUE):")
    print(variants.describe_variants())
    print("\nKernels (--backend NAME; auto takes the first a variant lists that runs on the device):")
    for kernel in KERNELS.values():
        print(f"{kernel.name}: {kernel.summary}")
    print("\nTasks (--task NAME, options with --set task.OPTION=VALUE; default suite: "
          f"{','.join(tasks.DEFAULT_SUITE)}):")
    print(tasks.describe_tasks())
    print(f"\nProfiles (--profile NAME): {', '.join(tasks.PROFILES)}; quick for CPU minutes, standard for "
          "one GPU, long for LRA-scale lengths.")
    return 0


def _bench_variants(args: argparse.Namespace) -> int:
    from experiments import bench

    device = torch.device(args.device or _default_device())
    _check_device(device.type)
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
    for row in table[table["status"] != "ok"].itertuples():
        print(f"{row.variant}/{row.kernel} n={row.seq_len}: {row.status}")
    fitted = bench.slopes(table)
    if len(fitted):
        print("log-log slope of time against length:")
        print(fitted.round(2).to_string(index=False))
    for line in bench.acceptance(table):
        print(line)
    print(f"wrote {path}")
    return 0


def _bench_train(args: argparse.Namespace) -> int:
    from experiments import bench_train

    device = args.device or _default_device()
    _check_device(device)
    result = bench_train.run(variant=args.variant, task=args.task, steps=args.steps, rounds=args.rounds,
                             device=device)
    print(f"{args.variant} on {args.task} ({device}, {args.steps} steps, median of {args.rounds} alternating rounds):")
    print(f"  harness  {result['harness_tokens_per_second']:,.0f} tokens/s")
    print(f"  minimal  {result['minimal_tokens_per_second']:,.0f} tokens/s")
    print(f"  harness / minimal = {result['ratio']:.3f} (goal >= 0.9)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnlab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    quiet = {"action": "store_true", "default": bool(os.environ.get("CI")),
             "help": "no progress bar (the default when CI is set)"}
    runs_dir = {"default": os.environ.get("RUNS_DIR", "runs"), "help": "the runs folder (default: $RUNS_DIR or runs)"}
    sets = {"action": "append", "metavar": "SECTION.FIELD=VALUE",
            "help": "override any config field: variant.*, task.*, model.*, train.* (repeatable)"}

    run = commands.add_parser("run", help="train variants on tasks and print the results table")
    run.add_argument("--variant", default="dense", help="a variant or a comma-separated list (default: dense)")
    run.add_argument("--task", help="a task or a comma-separated list (default: the default suite)")
    run.add_argument("--profile", default="quick", help=f"one of {', '.join(tasks.PROFILES)} (default: quick)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when present")
    run.add_argument("--backend", default="auto", help="attention kernel (default: auto)")
    run.add_argument("--set", **sets)
    run.add_argument("--runs-dir", **runs_dir)
    run.add_argument("--quiet", **quiet)
    run.set_defaults(func=_run)

    resume = commands.add_parser("resume", help="continue an interrupted run from its last checkpoint")
    resume.add_argument("run_id")
    resume.add_argument("--runs-dir", **runs_dir)
    resume.add_argument("--quiet", **quiet)
    resume.set_defaults(func=_resume)

    sample = commands.add_parser("sample", help="print examples of a task, one per line")
    sample.add_argument("task")
    sample.add_argument("--count", type=int, default=5)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--profile", default="quick")
    sample.add_argument("--format", choices=["text", "json"], default="text")
    sample.add_argument("--set", **sets)
    sample.set_defaults(func=_sample)

    commands.add_parser("list", help="list the variants, tasks and profiles").set_defaults(func=_list)

    bench = commands.add_parser("bench-variants", help="time forward+backward and peak memory per variant and kernel")
    bench.add_argument("--variants", nargs="+", metavar="SPEC",
                       help="variant specs, name[:option=value...] (default: every variant, at settings worth "
                            "comparing)")
    bench.add_argument("--kernels", nargs="+",
                       help="only these kernels: auto, a kernel name, naive (the seeds' code), direct (torch sdpa); "
                            "default: all")
    bench.add_argument("--lengths", nargs="+", type=int, default=[512, 1024, 2048, 4096, 8192, 16384],
                       help="sequence lengths; quadratic kernels stop where time or memory would run out")
    bench.add_argument("--causal", choices=["yes", "no", "both"], default="yes")
    bench.add_argument("--batch", type=int, default=1)
    bench.add_argument("--heads", type=int, default=4)
    bench.add_argument("--head-dim", type=int, default=64)
    bench.add_argument("--repeats", type=int, default=3, help="timed rounds per length (median reported)")
    bench.add_argument("--budget", type=float, default=30.0,
                       help="skip a contender whose next call is predicted to take longer (seconds)")
    bench.add_argument("--device", choices=["cpu", "cuda"])
    bench.add_argument("--out", default="runs/bench")
    bench.add_argument("--quiet", **quiet)
    bench.set_defaults(func=_bench_variants)

    bench_train = commands.add_parser("bench-train", help="training throughput against a minimal PyTorch loop")
    bench_train.add_argument("--variant", default="dense")
    bench_train.add_argument("--task", default="passkey")
    bench_train.add_argument("--steps", type=int, default=100)
    bench_train.add_argument("--rounds", type=int, default=3)
    bench_train.add_argument("--device", choices=["cpu", "cuda"])
    bench_train.set_defaults(func=_bench_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as error:  # a user's bad value (variant, task, option, run id, checkpoint): one sentence
        print(f"attnlab {args.command}: {error}", file=sys.stderr)
        return 2
