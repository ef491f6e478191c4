"""`--launcher slurm` (`LAUNCHER=slurm`): the workers of a sweep or a benchmark submitted through submitit as one
SLURM job array, a worker per task, instead of processes on this machine.

    attnlab benchmark --launcher slurm --workers 8 --partition gpu --storage postgresql://user@host/db

Each array task runs today's worker command (`WorkerSettings.command`, its index the task's) as a child process,
which reads its jobs or trials from the shared storage, so a task is a worker like any other. The command checks
the options with `sbatch --test-only` before anything is created, submits, prints the job's id, where its logs go
and the command that shows progress, and returns: the storage is the state, not this process.

A task that SLURM times out or preempts is sent SIGUSR2 ahead of the end (submitit asks for it): its worker gets
SIGTERM, checkpoints its run and queues the job again, and submitit requeues the task, whose worker takes that job
again and resumes the run from its checkpoint. A task killed outright (scancel, a lost node) leaves its job
running in the storage; another worker finds it stale and resumes the run from its checkpoint, as it does for a
killed local worker.

Only this module imports submitit, and only when a command asks for SLURM (`pip install -e '.[slurm]'`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.options import OptionError
from experiments.run.launch import checked_device

if TYPE_CHECKING:
    from experiments.sweep.pool import WorkerSettings

DEFAULT_TIME_LIMIT = 24 * 60  # minutes
DEFAULT_CPUS_PER_TASK = 4  # a GPU worker's data, evaluation and Python
DEFAULT_MEM = "16G"
REQUEUES = 100  # times a task is requeued after reaching its time limit: a benchmark outlives many limits
STOP_SECONDS = 60  # how long a worker told to stop may take to checkpoint its run before it is killed


class SlurmUnavailable(RuntimeError):
    """This machine cannot submit to SLURM (no submitit, no sbatch, no controller): the environment's failure."""


@dataclass(frozen=True)
class Slurm:
    """What each array task asks SLURM for; `gpus_per_task` 1 on cuda and 0 on the CPU unless given."""

    partition: str | None
    time_limit: int  # minutes
    gpus_per_task: int
    cpus_per_task: int
    mem: str | None
    sbatch: tuple[tuple[str, str], ...]  # more sbatch options: (name, value)

    @classmethod
    def from_args(cls, args: Any, device: str) -> Slurm | None:
        """The options of `attnlab.arguments.add_launcher` as given, asked of SLURM (`check`), or None for the
        local launcher; a value out of range is a one-sentence error."""
        if args.launcher == "local":
            return None
        for option, value, least in (("--time-limit", args.time_limit, 1), ("--cpus-per-task", args.cpus_per_task, 1),
                                     ("--gpus-per-task", args.gpus_per_task, 0)):
            if value is not None and value < least:
                raise OptionError(f"{option} got {value}; accepted: an integer >= {least}.")
        words = shlex.split(args.sbatch or "")
        pairs = [word.partition("=") for word in words]
        bad = [word for word, (name, equals, value) in zip(words, pairs, strict=True)
               if not (name and equals and value) or name.startswith("-")]
        if bad:
            raise OptionError(f"--sbatch got {bad[0]!r}; accepted: sbatch options as NAME=VALUE without the dashes, "
                              "separated by spaces, e.g. 'account=lab qos=high'.")
        gpus = args.gpus_per_task if args.gpus_per_task is not None else int(device == "cuda")
        mem = None if args.mem in (None, "", "none") else args.mem
        slurm = cls(args.partition, args.time_limit, gpus, args.cpus_per_task, mem,
                    tuple((name, value) for name, _, value in pairs))
        check(slurm)
        return slurm

    def parameters(self) -> dict[str, Any]:
        """submitit's `SlurmExecutor` parameters (each an sbatch option of the same name)."""
        given = {"partition": self.partition, "gpus_per_task": self.gpus_per_task or None, "mem": self.mem}
        return {"time": self.time_limit, "cpus_per_task": self.cpus_per_task,
                "additional_parameters": dict(self.sbatch),
                **{name: value for name, value in given.items() if value is not None}}

    def flags(self) -> list[str]:
        """The same options as sbatch's flags."""
        options = self.parameters()
        options.update(options.pop("additional_parameters"))
        return [f"--{name.replace('_', '-')}={value}" for name, value in options.items()]

    def shown(self) -> str:
        return (f"partition {self.partition or 'the default'}, {self.time_limit} minutes, {self.cpus_per_task} CPUs, "
                f"{self.gpus_per_task} GPUs, memory {self.mem or 'the default'} each")


def run_device(args: Any) -> str:
    """The device the runs train on: for the local launcher, this machine's (`launch.checked_device`); for SLURM,
    the nodes' (default cuda, a GPU per task), which this machine, a login node say, need not have."""
    return (args.device or "cuda") if args.launcher == "slurm" else checked_device(args.device)


def submitit_module():
    try:
        import submitit
    except ModuleNotFoundError:
        raise SlurmUnavailable("LAUNCHER=slurm needs submitit, which is not installed; install it with "
                               "pip install -e '.[slurm]', or use LAUNCHER=local.") from None
    return submitit


def _slurm(*command: str) -> subprocess.CompletedProcess:
    if shutil.which(command[0]) is None:
        raise SlurmUnavailable(f"LAUNCHER=slurm needs SLURM's {command[0]}, which is not on PATH; accepted: a machine "
                               "that submits to a SLURM cluster, or LAUNCHER=local.")
    return subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def partition_limits() -> dict[str, str]:
    """Each partition of the cluster and its time limit, as sinfo shows them."""
    lines = _slurm("sinfo", "--noheader", "--format=%R %l").stdout.split("\n")
    return dict(line.split(" ", 1) for line in lines if " " in line)


def check(slurm: Slurm) -> None:
    """Ask SLURM whether it would run a task with these options (`sbatch --test-only`, which submits nothing):
    an unknown partition, a time limit the partition refuses or other options it refuses are one sentence
    each; no submitit, no sbatch or no controller to answer is the environment's failure."""
    submitit_module()
    answer = _slurm("sbatch", "--test-only", *slurm.flags(), "--wrap=true")
    if answer.returncode == 0:
        return
    lines = [line.strip() for line in answer.stderr.splitlines() if line.strip()]
    reason = lines[-1] if lines else f"exit code {answer.returncode}"
    if "partition" in reason.lower():
        existing = ", ".join(partition_limits())
        raise OptionError(f"Partition {slurm.partition!r} is refused by SLURM ({reason}); accepted: {existing}.")
    if "time limit" in reason.lower():
        limit = partition_limits().get(slurm.partition or "", "the partition's limit")
        raise OptionError(f"--time-limit {slurm.time_limit} (minutes) is refused by SLURM on partition "
                          f"{slurm.partition or 'the default'} ({reason}); accepted: at most {limit}.")
    if "contact" in reason.lower() or "connection" in reason.lower():
        raise SlurmUnavailable(f"SLURM's controller does not answer ({reason}); accepted: a running cluster, or "
                               "LAUNCHER=local.")
    raise OptionError(f"SLURM refuses a task with {shlex.join(slurm.flags())} ({reason}); accepted: options this "
                      "cluster's nodes can satisfy (sinfo lists them).")


def submit(slurm: Slurm, task: Callable[[int], Any], count: int, folder: Path, *, name: str) -> str:
    """Submit `count` array tasks named `name`, task i calling `task(i)` (`WorkerTask`, or a plan's); the job's id."""
    submitit = submitit_module()
    executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=REQUEUES)
    executor.update_parameters(**slurm.parameters(), job_name=name, array_parallelism=count)
    try:
        jobs = executor.map_array(task, range(count))
    except (submitit.core.utils.FailedJobError, submitit.core.utils.FailedSubmissionError, OSError) as error:
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise SlurmUnavailable(f"sbatch failed to submit {name} ({reason}); accepted: a cluster that takes it, or "
                               "LAUNCHER=local.") from None
    return jobs[0].job_id.split("_")[0]


class WorkerTask:
    """One array task: worker `index` of `settings` as a child process, on the CPU with the task's CPUs as its
    threads. submitit calls `checkpoint` when SLURM warns of the end: the worker is stopped at a checkpoint and the
    same task is submitted again."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.worker: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:  # pickled for the task, and again when requeued: no process
        return {"settings": self.settings, "worker": None}

    def __call__(self, index: int) -> int:
        env = dict(os.environ)
        if self.settings.device == "cpu":
            env["OMP_NUM_THREADS"] = env.get("SLURM_CPUS_PER_TASK", "1")
        self.worker = subprocess.Popen(self.settings.command(index), env=env, stdin=subprocess.DEVNULL)
        while (code := self.worker.poll()) is None:  # polled, so that `checkpoint` may wait for it in a handler
            time.sleep(1.0)
        return code

    def checkpoint(self, index: int):
        from submitit.helpers import DelayedSubmission

        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)  # the worker checkpoints its run and queues its job again
            try:
                self.worker.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.worker.kill()
        return DelayedSubmission(WorkerTask(self.settings), index)


def announce(slurm: Slurm, job_id: str, count: int, folder: Path, *, label: str, status: str,
             each: str = "a worker") -> str:
    """What the command prints once it has submitted: the job, its logs, how to watch and how to go on."""
    return "\n".join([
        f"{label}: submitted SLURM job {job_id}, an array of {count} task{'s' if count > 1 else ''}, each {each} "
        f"({slurm.shown()})",
        f"  logs: {folder}/{job_id}_<task>_0_log.out and .err (squeue -j {job_id} lists its tasks)",
        f"  progress: {status}",
        "  the same command again, once every job has settled, writes the results without submitting; before, it "
        "submits workers for what remains"])
