"""attnlab's command line: `python -m experiments <command>` (installed as `attnlab`).

    attnlab run --variant dense,local --task passkey --profile quick --set variant.window=32
    attnlab resume <run_id>
    attnlab sweep --variant local --task passkey --trials 30 --space variant.window=16:64
    attnlab sample passkey --count 5 --seed 0
    attnlab list
    attnlab report --filter task=passkey
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
            row.update({split: accuracy for split, accuracy in summary.get("accuracy_by_split", {}).items()})
            row.update({f"n={entry['length']}": entry["accuracy"] for entry in summary.get("accuracy_by_length", [])})
            tokens_per_second = summary["tokens_per_second"]
            row.update({"steps": summary["steps"], "wall_s": round(summary["wall_seconds"], 1),
                        "tokens/s": round(tokens_per_second) if tokens_per_second else None,
                        "run": summary["run_id"]})
            rows.append(row)
        table = pd.DataFrame(rows).to_string(index=False, float_format=lambda value: f"{value:.3f}", na_rep="-")
        blocks.append(f"task {task} (accuracy at scored positions; dN-M = dependency distance N..M; "
                      f"n=L = at eval length L; other columns: extra eval splits)\n{table}")
    return "\n\n".join(blocks)


def start_record(runs_dir: Path, config: configs.RunConfig) -> RunRecord:
    """A new run folder for `config`, named after the variant as it describes itself, the task and the
    seed, holding the resolved config."""
    record = RunRecord.create(runs_dir, new_run_id(configs.described_variant(config), config.task, config.seed))
    record.write_config(config.to_dict())
    return record


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
                        kernel=args.kernel, overrides=configs.for_variant(overrides, name, names))
        for name in names for task in task_names
    ]
    pending = [(config, start_record(runs_dir, config)) for config in resolved]
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


def _sweep_worker_command(args: argparse.Namespace, plan) -> list[str]:
    """The sweep `plan` (from these arguments) as the command of one worker process; the parent adds
    --worker-index."""
    command = [sys.executable, "-m", "experiments", "sweep", "--variant", plan.variant, "--task", plan.task,
               "--profile", plan.profile, "--seed", str(plan.seed), "--trials", str(plan.trials),
               "--study", plan.study_name, "--device", plan.device, "--kernel", plan.kernel,
               "--pruner", plan.pruner, "--prune-after", str(plan.prune_after),
               "--heartbeat-seconds", str(plan.heartbeat_seconds), "--runs-dir", str(plan.runs_dir), "--workers", "1"]
    command += [item for assignment in args.set or [] for item in ("--set", assignment)]
    command += [item for assignment in args.space or [] for item in ("--space", assignment)]
    command += ["--space-file", args.space_file] if args.space_file else []
    command += ["--storage", plan.storage_url] if plan.storage_url else []
    return command + (["--quiet"] if args.quiet else [])


def _sweep(args: argparse.Namespace) -> int:
    from experiments import sweep

    device = args.device or _default_device()
    _check_device(device)
    plan = sweep.prepare(
        variant=args.variant, task=args.task, profile=args.profile, seed=args.seed, device=device,
        kernel=args.kernel, sets=args.set or [], space_args=args.space or [], space_file=args.space_file,
        study=args.study, storage=args.storage, runs_dir=Path(args.runs_dir), trials=args.trials,
        pruner=args.pruner, prune_after=args.prune_after, heartbeat_seconds=args.heartbeat_seconds,
    )
    workers = args.workers
    if workers is None:
        workers = max(1, torch.cuda.device_count()) if device == "cuda" else 1
    if workers < 1:
        raise ValueError(f"--workers got {workers}; accepted: an integer >= 1.")
    study = sweep.open_study(plan)
    if args.worker_index is not None:
        stop = StopFlag()
        stop.install()
        return sweep.work(plan, study, worker=args.worker_index, quiet=args.quiet, should_stop=stop)
    print(f"sweep {plan.study_name}: {plan.trials} complete trials of {plan.variant} on {plan.task} "
          f"({plan.profile}), {workers} worker{'s' if workers > 1 else ''}, storage {plan.storage_shown}; searching:")
    print("\n".join(f"  {param.describe()}" for param in plan.space.params))
    if workers == 1:
        stop = StopFlag()
        stop.install()
        exit_code = sweep.work(plan, study, quiet=args.quiet, should_stop=stop)
    else:
        exit_code = sweep.run_workers(plan, study, _sweep_worker_command(args, plan), workers)
    print(sweep.report(plan, study))
    return exit_code


def _sample(args: argparse.Namespace) -> int:
    overrides = configs.parse_sets(args.set or [])
    task = tasks.create_task(args.task, profile=args.profile, **overrides["task"])
    generator = torch.Generator().manual_seed(args.seed)
    batch = task.batch(args.count, generator, torch.device("cpu"))
    written = task.save_images(batch, args.images, args.count) if args.images else []
    for index in range(args.count):
        print(json.dumps(task.example(batch, index)) if args.format == "json" else task.text(batch, index))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    print("Variants (--variant NAME, options with --set variant.OPTION=VALUE):")
    print(variants.describe_variants())
    print("\nKernels (--kernel NAME; auto takes the first a variant lists that runs on the device):")
    for kernel in KERNELS.values():
        print(f"{kernel.name}: {kernel.summary}")
    print("\nTasks (--task NAME, options with --set task.OPTION=VALUE; default suite: "
          f"{','.join(tasks.DEFAULT_SUITE)}):")
    print(tasks.describe_tasks())
    print(f"\nProfiles (--profile NAME): {', '.join(tasks.PROFILES)}; quick for CPU minutes, standard for "
          "one GPU, long for LRA-scale lengths.")
    return 0


def _report(args: argparse.Namespace) -> int:
    from analysis import build_report

    index = build_report(Path(args.runs_dir), Path(args.out), study=args.study, filters=args.filter, name=args.name)
    print(f"wrote {index}")
    return 0


def _saturation(args: argparse.Namespace) -> int:
    from analysis import saturation_readback
    from experiments import saturation

    workers = saturation.default_workers() if args.workers is None else args.workers
    if workers < 1:
        raise ValueError(f"--workers got {workers}; accepted: an integer >= 1.")
    out = Path(args.out) if args.out else Path(args.runs_dir) / "saturation" / args.setting
    problems = saturation.run(saturation.setting_named(args.setting), out, workers=workers, quiet=args.quiet)
    written = saturation_readback.write(out)  # the read-back: tables, figures and findings of what ran
    for problem in problems:
        print(f"run {problem}", file=sys.stderr)
    print(f"wrote {len(written)} tables and figures under {out}/")
    return 1 if problems else 0


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


def _gpu_check(args: argparse.Namespace) -> int:
    from experiments import gpu_check

    return gpu_check.run(Path(args.out), budget=args.seconds)


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
    run.add_argument("--kernel", "--backend", default="auto", help="attention kernel (default: auto)")
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
    sample.add_argument("--images", metavar="DIR", help="also save the examples as PNG images (pathfinder)")
    sample.add_argument("--set", **sets)
    sample.set_defaults(func=_sample)

    sweep = commands.add_parser(
        "sweep", help="an Optuna hyperparameter sweep of one variant on one task; each trial is a run",
        description="Search a variant's declared options and the training hyperparameters (lr, weight_decay, "
                    "warmup_steps) with a seeded TPE sampler, pruning on the eval accuracy of each evaluation. "
                    "Each trial is an ordinary run under the runs folder. Running the same command again "
                    "continues the study until --trials trials are complete; at the end the best trial and the "
                    "command that reruns it are printed.")
    sweep.add_argument("--variant", default="dense", help="the variant to tune (default: dense)")
    sweep.add_argument("--task", default=tasks.DEFAULT_SUITE[0], help=f"default: {tasks.DEFAULT_SUITE[0]}")
    sweep.add_argument("--profile", default="quick", help=f"one of {', '.join(tasks.PROFILES)} (default: quick)")
    sweep.add_argument("--seed", type=int, default=0, help="the runs' seed, and the sampler's (default: 0)")
    sweep.add_argument("--trials", type=int, default=20,
                       help="complete trials the study should hold in total (default: 20); pruned and failed "
                            "trials do not count")
    sweep.add_argument("--study", help="the study's name (default: VARIANT-TASK-PROFILE-sSEED)")
    sweep.add_argument("--storage", metavar="URL",
                       help="an Optuna RDB storage URL, e.g. postgresql://user@host/db, for workers on several "
                            "machines (default: the embedded journal runs/sweeps/STUDY.journal)")
    sweep.add_argument("--workers", type=int,
                       help="worker processes on this machine, one study (default: one per GPU with cuda, else 1)")
    sweep.add_argument("--space", action="append", metavar="SECTION.NAME=VALUE|LOW:HIGH|A,B",
                       help="narrow or fix a searched name, e.g. variant.window=16:64, train.lr=1e-3 (repeatable)")
    sweep.add_argument("--space-file", metavar="TOML",
                       help="the same from a TOML file: [variant] window = [16, 64], [train] lr = 1e-3")
    sweep.add_argument("--set", **sets)
    sweep.add_argument("--pruner", default="median", help="median (default) or none")
    sweep.add_argument("--prune-after", type=int, default=5,
                       help="complete trials before the pruner may stop a trial (default: 5)")
    sweep.add_argument("--heartbeat-seconds", type=int, default=60,
                       help="heartbeat interval of a running trial; one silent for twice as long is failed and "
                            "retried (default: 60)")
    sweep.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when present")
    sweep.add_argument("--kernel", "--backend", default="auto", help="attention kernel (default: auto)")
    sweep.add_argument("--runs-dir", **runs_dir)
    sweep.add_argument("--quiet", **quiet)
    sweep.add_argument("--worker-index", type=int, metavar="I",
                       help="run as worker I of a sweep started with --workers: no summary at the end")
    sweep.set_defaults(func=_sweep)

    commands.add_parser("list", help="list the variants, tasks and profiles").set_defaults(func=_list)

    bench = commands.add_parser("bench-variants", help="time forward+backward and peak memory per variant and kernel")
    bench.add_argument("--variants", nargs="+", metavar="SPEC",
                       help="variant specs, name[:option=value...] (default: every variant, at settings worth "
                            "comparing)")
    bench.add_argument("--kernels", nargs="+",
                       help="only these kernels: auto, a kernel name, naive (the tutorials' naive implementation), "
                            "direct (torch sdpa); "
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

    report = commands.add_parser("report", help="the analysis report of the runs: HTML, Markdown and CSV tables")
    report.add_argument("--runs-dir", **runs_dir)
    report.add_argument("--study", help="only this sweep study (RUNS_DIR/sweeps/STUDY.journal) in the sweep sections")
    report.add_argument("--filter", metavar="COLUMN=VALUE[,COLUMN=VALUE]",
                        help="only runs whose columns match, e.g. task=passkey,variant=local")
    report.add_argument("--out", default="reports", help="the folder reports go into (default: reports)")
    report.add_argument("--name", help="the report's folder name (default: the study, the filters, or all)")
    report.set_defaults(func=_report)

    saturation = commands.add_parser(
        "saturation", help="the softmax saturation studies: tables and figures under RUNS_DIR/saturation/SETTING",
        description="Study A (q.k statistics at initialisation), B (training dynamics of dense, unscaled, learned "
                    "temperature, qknorm, softcap and additive attention at head dims 16, 64, 256), C (entropy "
                    "collapse against the learning rate, dense and qknorm) and D (fading with length: softmax "
                    "against ssmax, and accuracy at longer evaluation lengths). Finished runs are kept: running "
                    "it again resumes where it stopped. `make report` shows the results.")
    saturation.add_argument("--setting", default="quick", help="quick (under 10 minutes on CPU) or full")
    saturation.add_argument("--workers", type=int, help="runs trained at once, one thread each (default: 2, or 1 "
                                                        "on a single core)")
    saturation.add_argument("--out", help="the study folder (default: RUNS_DIR/saturation/SETTING)")
    saturation.add_argument("--runs-dir", **runs_dir)
    saturation.add_argument("--quiet", **quiet)
    saturation.set_defaults(func=_saturation)

    bench_train = commands.add_parser("bench-train", help="training throughput against a minimal PyTorch loop")
    bench_train.add_argument("--variant", default="dense")
    bench_train.add_argument("--task", default="passkey")
    bench_train.add_argument("--steps", type=int, default=100)
    bench_train.add_argument("--rounds", type=int, default=3)
    bench_train.add_argument("--device", choices=["cpu", "cuda"])
    bench_train.set_defaults(func=_bench_train)

    gpu_check = commands.add_parser(
        "gpu-check", help="on CUDA: the gpu tests (every kernel against the reference), then a bf16 timing table",
        description="Runs the tests marked gpu, then times causal forward+backward per variant and kernel at 1K to "
                    "32K tokens in bf16 and prints milliseconds and TFLOP/s on attended pairs beside dense flash "
                    "SDPA. Without CUDA it says so and exits 0.")
    gpu_check.add_argument("--out", default="runs/bench", help="folder of gpu_check.csv (default: runs/bench)")
    gpu_check.add_argument("--seconds", type=float, default=300.0,
                           help="time for the whole check; timing rows past it are skipped (default: 300)")
    gpu_check.set_defaults(func=_gpu_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as error:  # a user's bad value (variant, task, option, run id, checkpoint): one sentence
        print(f"attnlab {args.command}: {error}", file=sys.stderr)
        return 2
