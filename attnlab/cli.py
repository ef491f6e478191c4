"""attnlab's command line: `python -m attnlab <command>` (installed as `attnlab`).

    attnlab run --variant dense,local --task passkey --profile quick --set variant.window=32
    attnlab sweep --variant local --task passkey --trials 30 --space variant.window=16:64
    attnlab report --filter task=passkey
    attnlab benchmark --variant dense,local,linear --task mqar:num_pairs=16,listops --seeds 6 --workers 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnlab import catalogue, experiment_file, speed_flags
from attnlab.arguments import (
    QUIET,
    RUNS_DIR_OPTION,
    SETS,
    CommandParser,
    add_launcher,
    add_run_place,
    add_run_selection,
    runs_dir,
)
from common.files import refusal, writable_folder
from common.schema import add_flags, from_flags
from experiments.run import launch
from experiments.schemas.benchmark import BenchmarkOptions
from experiments.schemas.calibration import CalibrationOptions
from experiments.schemas.reproduce import ReproduceOptions
from experiments.schemas.sweep import SweepOptions
from experiments.slurm import Slurm, SlurmUnavailable, run_device

# Each command reads its arguments here and hands the work to the module of its job, imported by the command only.


def _run(args: argparse.Namespace) -> int:
    return launch.run(variant_names=args.variant, task_names=args.task, profile=args.profile, seed=args.seed,
                      device=args.device, kernel=args.kernel, sets=args.set or [],
                      runs_dir=writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION), quiet=args.quiet)


def _resume(args: argparse.Namespace) -> int:
    return launch.resume(args.run_id, writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION), args.quiet)


def _sweep(args: argparse.Namespace) -> int:
    from experiments import sweep

    plan = sweep.build(from_flags(SweepOptions, vars(args)), device=run_device(args),
                       runs_dir=writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION))
    return sweep.run(plan, workers=args.workers, quiet=args.quiet, slurm=Slurm.from_args(args, plan.device))


def _benchmark(args: argparse.Namespace) -> int:
    from analysis.benchmark import page
    from analysis.benchmark.suite import selection
    from experiments import benchmark
    from experiments.benchmark import check, command, estimate

    runs = writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION)
    named = from_flags(BenchmarkOptions, {key: vars(args)[key] for key in ("name", "profile", "protocol", "storage")})
    if args.status:  # what the storage holds of benchmark NAME: the rest of the command line does not count
        return command.status(named.name, named.storage_url, runs)
    chosen = selection(args.task, args.variant, args.set or [], args.task_seeds, protocol=named.protocol,
                       profile=named.profile)  # the flags' values, or protocol 2's suite where no task is named
    options = from_flags(BenchmarkOptions, {**vars(args), **chosen})
    plan = benchmark.build(options, device=run_device(args), runs_dir=runs)
    if args.estimate:
        return estimate.run(plan, workers=args.workers, quiet=args.quiet)
    if args.estimate_check:
        return check.run(plan, workers=args.workers)
    slurm = Slurm.from_args(args, plan.device)  # asked of SLURM before anything is created
    out = writable_folder(Path(args.out), "--out")  # the page, written once every run has trained
    check.keep_estimate(plan)
    exit_code, state = benchmark.run(plan, workers=args.workers, quiet=args.quiet, slurm=slurm)
    if state is None:  # submitted to SLURM: the same command writes the page once every job has settled
        return exit_code
    index, board = page.write(state, out)
    print(board.to_string(index=False), f"wrote {index}", sep="\n")
    return exit_code


def _sample(args: argparse.Namespace) -> int:
    images = writable_folder(Path(args.images), "--images") if args.images else None
    catalogue.print_samples(args.task, profile=args.profile, sets=args.set or [], count=args.count, seed=args.seed,
                            format=args.format, images=images)
    return 0


def _list(args: argparse.Namespace) -> int:
    from analysis import claims

    catalogue.print_catalogue()
    print("\nClaims (`make reproduce CLAIM=...`):", *(f"  {name}: {claims.CLAIMS.summary(name)}"
                                                   for name in claims.list_claims()), sep="\n")
    return 0


def _report(args: argparse.Namespace) -> int:
    from analysis import build_report

    index = build_report(Path(args.runs_dir), writable_folder(Path(args.out), "--out"), study=args.study,
                         filters=args.filter, name=args.name, table_format=args.format)
    print(f"wrote {index}")
    return 0


def _saturation(args: argparse.Namespace) -> int:
    from analysis.saturation import readback
    from experiments import saturation

    workers = saturation.default_workers() if args.workers is None else args.workers
    if workers < 1:
        raise ValueError(f"--workers got {workers}; accepted: an integer >= 1.")
    out = (writable_folder(Path(args.out), "--out") if args.out
           else writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION) / "saturation" / args.setting)
    problems = saturation.run(saturation.setting_named(args.setting), out, workers=workers, quiet=args.quiet)
    written = readback.write(out)  # the read-back: tables, figures and findings of what ran
    for problem in problems:
        print(f"run {problem}", file=sys.stderr)
    print(f"wrote {len(written)} tables and figures under {out}/")
    return 1 if problems else 0


def _calibration(args: argparse.Namespace) -> int:
    from analysis.calibration import table
    from experiments.calibration import runs as calibration
    options, device = from_flags(CalibrationOptions, vars(args)), run_device(args)
    runs = writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION)
    writable_folder(Path(args.out).parent, "The folder of --out")
    table.read_record(Path(args.out).with_suffix(".csv"))  # a record it could not merge into is refused before training
    problems = calibration.run(options, device=device, runs_dir=runs, quiet=args.quiet,
                               slurm=Slurm.from_args(args, device))
    if problems is None:  # submitted to SLURM: the same command writes the table once its runs have completed
        return 0
    written = table.write(calibration.runs_folder(runs, options.profile), Path(args.out))
    for problem in problems:
        print(f"run {problem}", file=sys.stderr)
    print(f"wrote {written}")
    return 1 if problems else 0


def _results(args: argparse.Namespace) -> int:
    from analysis import results_doc

    print(*results_doc.regenerate(args.keep, Path(args.runs_dir), writable_folder(Path(args.out), "--out")), sep="\n")
    return 0


def _speed(args: argparse.Namespace) -> int:
    import torch

    from experiments.speed import kernels

    device = torch.device(launch.checked_device(args.device))
    kernels.run_and_print(
        specs=kernels.chosen_specs(args.variants), kernels=args.kernels, lengths=args.lengths,
        causal_modes={"yes": [True], "no": [False], "both": [False, True]}[args.causal], batch=args.batch,
        heads=args.heads, head_dim=args.head_dim, repeats=args.repeats, budget=args.budget, device=device,
        out_dir=writable_folder(Path(args.out), "--out"), quiet=args.quiet, dims=args.dims,
        dim_length=args.dim_length, step_lengths=args.step_lengths,
    )
    return 0


def _speed_train(args: argparse.Namespace) -> int:
    from experiments.speed import training

    training.run_and_print(variant=args.variant, task=args.task, steps=args.steps, rounds=args.rounds,
                           device=launch.checked_device(args.device))
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    from attnlab import reproduce

    options = from_flags(ReproduceOptions, vars(args))
    return reproduce.run(options.claims, workers=args.workers, device=run_device(args),
                         storage=options.storage_url, runs_dir=writable_folder(Path(args.runs_dir), RUNS_DIR_OPTION),
                         out=writable_folder(Path(args.out), "--out"), quiet=args.quiet,
                         estimate_only=args.estimate, lr_multiples=options.lr_multiples,
                         slurm=Slurm.from_args(args, run_device(args)))


def _gpu_check(args: argparse.Namespace) -> int:
    from attnlab import gpu_check

    return gpu_check.run(writable_folder(Path(args.out), "--out"), budget=args.seconds)


# -- the parser: one function per command ---------------------------------------------------------

def _add_run(commands) -> None:
    run = commands.add_parser("run", help="train variants on tasks and print the results table")
    add_run_selection(run, variant=("dense", "variants, presets (relative:kind=alibi), sets (core), comma-separated"),
                       task=(None, "a task or a comma-separated list (default: the default suite)"))
    run.set_defaults(func=_run)


def _add_resume(commands) -> None:
    resume = commands.add_parser("resume", help="continue an interrupted run from its last checkpoint")
    resume.add_argument("run_id")
    runs_dir(resume)
    resume.add_argument("--quiet", **QUIET)
    resume.set_defaults(func=_resume)


def _add_sample(commands) -> None:
    sample = commands.add_parser("sample", help="print examples of a task, one per line")
    sample.add_argument("task")
    sample.add_argument("--count", type=int, default=5)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--profile", default="quick")
    sample.add_argument("--format", choices=["text", "json"], default="text")
    sample.add_argument("--images", metavar="DIR", help="also save the examples as PNG images (pathfinder)")
    sample.add_argument("--set", **SETS)
    sample.set_defaults(func=_sample)


def _add_sweep(commands) -> None:
    sweep = commands.add_parser(
        "sweep", help="an Optuna hyperparameter sweep of one variant on one task; each trial is a run",
        description="Search a variant's declared options and the training hyperparameters (lr, weight_decay, "
                    "warmup_steps) with a seeded TPE sampler, pruning on the validation accuracy of each "
                    "evaluation. Each trial is an ordinary run under the runs folder. Running the same command "
                    "again continues the study until --trials trials are complete; at the end the best trial "
                    "(chosen on the validation set, with its test accuracy) and the command that reruns it are "
                    "printed.")
    add_flags(sweep, SweepOptions)
    add_run_place(sweep)
    sweep.add_argument("--workers", type=int,
                       help="worker processes on this machine, one study (default: one per GPU with cuda, else 1)")
    add_launcher(sweep)
    sweep.set_defaults(func=_sweep)


def _add_benchmark(commands) -> None:
    bench = commands.add_parser(
        "benchmark", help="variants on every task, tuned and confirmed by one protocol; resumable, any workers",
        description="Tunes each (variant, task) cell over a shared learning-rate grid on the validation set, trains "
                    "the best with fresh seeds, then at other model widths and task sizes (capacity), and writes the "
                    "leaderboard (test accuracy, mean and 95% interval) and its axes to OUT/benchmark-NAME/ "
                    "(docs/benchmark.md). Every run is a job in one Optuna storage: the same command continues it, "
                    "and on other machines with the same --storage joins it.")
    add_flags(bench, BenchmarkOptions)
    add_run_place(bench)
    bench.add_argument("--workers", type=int, help="worker processes here (default: one per GPU with cuda, else one "
                       "per CPU core, each with one thread)")
    bench.add_argument("--estimate-check", action="store_true", help="train nothing: compare a benchmark whose every "
                       "job has settled with the estimate made before it ran (estimate-check.csv, a record)")
    bench.add_argument("--status", action="store_true", help="train nothing: what the storage holds of benchmark "
                       "--name (default: as the benchmark's), with --storage and --runs-dir: jobs settled, running and "
                       "left")
    add_launcher(bench)
    bench.add_argument("--estimate", action="store_true", help="train nothing: time a few steps and one evaluation "
                       "of every size the benchmark trains at, and print how long what remains of it will take "
                       "with --workers (the table: RUNS_DIR/benchmark/NAME/estimate.csv)")
    bench.add_argument("--out", default="reports", help="the folder of the page (default: reports)")
    bench.set_defaults(func=_benchmark)


def _add_report(commands) -> None:
    report = commands.add_parser("report", help="the analysis report of the runs: HTML, Markdown and CSV (or Parquet) "
                                 "tables")
    runs_dir(report)
    report.add_argument("--study", help="only this sweep study (RUNS_DIR/sweeps/STUDY.journal) in the sweep sections")
    report.add_argument("--filter", metavar="COLUMN=VALUE[,COLUMN=VALUE]",
                        help="only runs whose columns match, e.g. task=passkey,variant=local")
    report.add_argument("--out", default="reports", help="the folder reports go into (default: reports)")
    report.add_argument("--name", help="the report's folder name (default: the study, the filters, or all)")
    report.add_argument("--format", choices=("csv", "parquet"), default="csv",
                        help="the files under tables/: csv (default) or parquet (dtypes kept; analysis.read_table)")
    report.set_defaults(func=_report)


def _add_saturation(commands) -> None:
    saturation = commands.add_parser(
        "saturation", help="the softmax saturation studies: tables and figures under RUNS_DIR/saturation/SETTING",
        description="Study A (q.k statistics at initialisation, per normaliser), B (training dynamics of dense, "
                    "unscaled, learned temperature, qknorm, softcap, additive attention at head dims 16, 64, 256 and "
                    "dense with sparsemax, entmax15, sigmoid), C (entropy collapse against the learning rate, dense "
                    "and qknorm) and D (fading with length: softmax against ssmax, linear attention and Performer, "
                    "and accuracy at longer evaluation lengths). Finished runs are kept: running it again resumes "
                    "where it stopped. `make report` shows the results.")
    saturation.add_argument("--setting", default="quick", help="quick (under 10 minutes on CPU) or full")
    saturation.add_argument("--workers", type=int, help="runs trained at once, one thread each (default: 2, or 1 "
                                                        "on a single core)")
    saturation.add_argument("--out", help="the study folder (default: RUNS_DIR/saturation/SETTING)")
    runs_dir(saturation)
    saturation.add_argument("--quiet", **QUIET)
    saturation.set_defaults(func=_saturation)


def _add_calibration(commands) -> None:
    calibration = commands.add_parser(
        "calibration", help="train the reference variants on the suite and write the calibration table",
        description="Trains each (variant, task) at the profile's defaults under RUNS_DIR/calibration/PROFILE (a run "
                    "that completed is kept, an interrupted one resumes), then writes the table of what each "
                    "reached, with chance and the commands, to --out.")
    add_flags(calibration, CalibrationOptions)
    add_run_place(calibration)
    calibration.add_argument("--out", default="docs/calibration.md", help="default: docs/calibration.md")
    add_launcher(calibration)
    calibration.set_defaults(func=_calibration)


def _add_results(commands) -> None:
    results = commands.add_parser("results", help="write docs/results.md, README.md's results table and each "
                                  "benchmark of record's page from the committed records (docs/calibration.csv, "
                                  "docs/records/)")
    results.add_argument("--keep", metavar="NAME", help="first keep benchmark NAME (settled, under --runs-dir) as the "
                         "record docs/records/benchmark-NAME.journal")
    runs_dir(results)
    results.add_argument("--out", default="reports", help="the folder of the pages (default: reports)")
    results.set_defaults(func=_results)


def _add_reproduce(commands) -> None:
    reproduce = commands.add_parser("reproduce", help="published claims beside attnlab's measurement, each with its "
                                    "verdict (docs/reproductions.md)")
    add_flags(reproduce, ReproduceOptions)
    reproduce.add_argument("--workers", type=int, help="worker processes here (default: as the benchmark's)")
    reproduce.add_argument("--estimate", action="store_true", help="train nothing: time every claim's runs")
    reproduce.add_argument("--device", choices=["cpu", "cuda"], default=None)
    reproduce.add_argument("--out", default="reports", help="the folder of the page (default: reports)")
    runs_dir(reproduce)
    reproduce.add_argument("--quiet", **QUIET)
    add_launcher(reproduce)
    reproduce.set_defaults(func=_reproduce)


def _add_speed_train(commands) -> None:
    speed_train = commands.add_parser("speed-train", aliases=["bench-train"],
                                      help="training throughput against a minimal PyTorch loop")
    speed_train.add_argument("--variant", default="dense")
    speed_train.add_argument("--task", default="passkey")
    speed_train.add_argument("--steps", type=int, default=100)
    speed_train.add_argument("--rounds", type=int, default=3)
    speed_train.add_argument("--device", choices=["cpu", "cuda"])
    speed_train.set_defaults(func=_speed_train)


def _add_gpu_check(commands) -> None:
    gpu_check = commands.add_parser(
        "gpu-check", help="on CUDA: the gpu tests (every kernel against the reference), then a bf16 timing table",
        description="Runs the tests marked gpu, then times causal forward+backward per variant and kernel at 1K to "
                    "32K tokens in bf16 and prints milliseconds and TFLOP/s on attended pairs beside dense flash "
                    "SDPA. Without CUDA it says so and exits 0.")
    gpu_check.add_argument("--out", default="runs/speed", help="folder of gpu_check.csv (default: runs/speed)")
    gpu_check.add_argument("--seconds", type=float, default=300.0,
                           help="time for the whole check; timing rows past it are skipped (default: 300)")
    gpu_check.set_defaults(func=_gpu_check)


def _add_list(commands) -> None:
    commands.add_parser("list", help="list the variants, tasks and profiles").set_defaults(func=_list)


def _add_data_check(commands) -> None:
    from attnlab import data_check

    check = commands.add_parser("data-check", help="which LRA data sets a folder holds: examples per split, lengths "
                                "(encoded into their cache once; trains nothing)")
    check.add_argument("folder", help="the data folder: lra_release/, aclImdb/, cifar-10-batches-py/ (docs/lra.md)")
    check.add_argument("--cache-dir", default="", help="the encoded data's cache (default: FOLDER/.attnlab-cache)")
    check.set_defaults(func=lambda args: data_check.run(Path(args.folder), cache_dir=args.cache_dir))


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="attnlab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (_add_run, _add_resume, _add_sample, _add_sweep, _add_benchmark, _add_list,
                lambda commands: speed_flags.add_speed(commands, _speed),
                _add_report, _add_saturation, _add_calibration, _add_results, _add_speed_train, _add_gpu_check,
                _add_data_check, _add_reproduce):
        add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "config", None):
            args = experiment_file.apply(parser, argv, args)
        return args.func(args)
    except ValueError as error:  # a user's bad value (variant, task, option, run id, checkpoint): one sentence
        print(f"attnlab {args.command}: {error}", file=sys.stderr)
        return 2
    except SlurmUnavailable as error:  # valid input that this machine cannot submit to SLURM: a sentence
        print(f"attnlab {args.command}: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # the filesystem refused (read-only, full, not permitted): the environment's, a sentence
        print(f"attnlab {args.command}: {refusal(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C, before the checkpoint the first asked for: what was written is kept
        print(f"attnlab {args.command}: stopped by a second interrupt; {launch.KEPT_AND_CONTINUED}", file=sys.stderr)
        return 130
