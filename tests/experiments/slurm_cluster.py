"""A throwaway single-node SLURM cluster for tests: munged, slurmctld and slurmd on this machine, 2 CPUs, in a
temporary folder, on free ports, with no cgroups (proctrack/linuxproc, task/none), so it starts in a container.

Its partitions: `debug`, the default, without a time limit, and `short`, whose limit is 10 minutes and refuses a
longer job at submission (EnforcePartLimits=ALL). SLURM_CONF points every SLURM command at it while it runs.

The programs come from Debian's slurm-wlm and munge, which `.ci/run` installs; as root with apt-get, a machine
without them installs them here first. Where they are missing in CI the test fails; where the cluster cannot start,
it is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
SBIN = "/usr/sbin:/sbin"

CONFIG = """ClusterName=attnlab-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort={controller_port}
SlurmdPort={node_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/munge.socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
EnforcePartLimits=ALL
KillWait=30
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=localhost MaxTime=10 State=UP
"""


def which(program: str) -> str | None:
    return shutil.which(program, path=f"{os.environ.get('PATH', '')}:{SBIN}")


def install_where_missing() -> list[str]:
    """The programs still missing after installing slurm-wlm and munge where this process may (root, apt-get)."""
    missing = [program for program in PROGRAMS if which(program) is None]
    if missing and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update", "-q"],
                        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "slurm-wlm", "munge"]):
            subprocess.run(command, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
        missing = [program for program in PROGRAMS if which(program) is None]
    return missing


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop(pid_file: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 20
        while time.time() < deadline:
            os.kill(pid, 0)  # OSError once it is gone
            time.sleep(0.2)


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return lines[-1] if lines else f"{path.name} is empty"


@contextlib.contextmanager
def slurm_cluster() -> Iterator[Path]:
    """Start the cluster, yield its slurm.conf (SLURM_CONF names it meanwhile), then stop it and delete it."""
    missing = install_where_missing()
    if missing:
        message = f"SLURM cannot be started here: {', '.join(missing)} not installed (.ci/run installs them)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    if os.geteuid() != 0:
        pytest.skip("SLURM cannot be started here: slurmd must run as root to start jobs, and this is not root")
    folder = Path(tempfile.mkdtemp(prefix="attnlab-slurm-"))
    for name in ("munge", "state", "spool"):
        (folder / name).mkdir(mode=0o700)
    (folder / "munge" / "munge.key").write_bytes(os.urandom(1024))
    (folder / "munge" / "munge.key").chmod(0o600)
    conf = folder / "slurm.conf"
    conf.write_text(CONFIG.format(folder=folder, controller_port=free_port(), node_port=free_port()))
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    munge = folder / "munge"
    daemons = [([which("munged"), "--force", f"--socket={munge}/munge.socket", f"--key-file={munge}/munge.key",
                 f"--log-file={folder}/munged.log", f"--pid-file={munge}/munged.pid", f"--seed-file={munge}/seed"],
                munge / "munged.pid", folder / "munged.log"),
               ([which("slurmctld"), "-c"], folder / "slurmctld.pid", folder / "slurmctld.log"),
               ([which("slurmd"), "-N", "localhost"], folder / "slurmd.pid", folder / "slurmd.log")]
    try:
        for command, _, log in daemons:
            started = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
            if started.returncode != 0:
                pytest.skip(f"SLURM cannot be started here: {Path(command[0]).name} failed "
                            f"({(started.stderr.strip() or _last_line(log)).splitlines()[-1]})")
        deadline = time.time() + 60
        while "idle" not in subprocess.run([which("sinfo"), "--noheader", "--format=%T"], capture_output=True,
                                           text=True).stdout:
            if time.time() > deadline:
                pytest.skip(f"SLURM cannot be started here: its node never became idle ({_last_line(daemons[2][2])})")
            time.sleep(0.5)
        yield conf
    finally:
        subprocess.run([which("scancel") or "scancel", "--full", "--user=root"], capture_output=True)
        for _, pid_file, _ in reversed(daemons):
            _stop(pid_file)
        os.environ.pop("SLURM_CONF") if before is None else os.environ.update(SLURM_CONF=before)
        shutil.rmtree(folder, ignore_errors=True)
