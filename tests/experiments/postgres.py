"""A throwaway PostgreSQL server for tests: a fresh cluster in a temporary folder, on a free port.

The PostgreSQL server binaries (initdb, pg_ctl) are found on PATH, under `pg_config --bindir`, or in
/usr/lib/postgresql/<version>/bin (`.ci/run` installs them). Outside CI a machine without them skips
the test; in CI (CI set) their absence fails it. initdb refuses to run as root, so as root the
server runs as the `postgres` user, in a folder that user owns.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def server_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    candidates = [Path(found).parent for found in [shutil.which("initdb")] if found]
    if shutil.which("pg_config"):
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        candidates.append(Path(bindir))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda path: int(path.parent.name)
                         if path.parent.name.isdigit() else 0, reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a cluster, yield its URL (postgresql://attnlab@127.0.0.1:PORT/postgres), stop and delete it."""
    binaries = server_binaries()
    if binaries is None:
        message = "the PostgreSQL server binaries (initdb, pg_ctl) are not installed; .ci/run installs them"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    as_user: dict = {}
    folder = Path(tempfile.mkdtemp(prefix="attnlab-postgres-"))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            pytest.fail("running as root needs the 'postgres' user to run the server; the postgresql package "
                        "creates it")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
    data, port = folder / "data", free_port()

    def run(*command: str) -> None:
        result = subprocess.run([str(binaries / command[0]), *command[1:]], cwd=folder, capture_output=True,
                                text=True, **as_user)
        assert result.returncode == 0, f"{command[0]} failed: {result.stdout}{result.stderr}"

    try:
        run("initdb", "-D", str(data), "-U", "attnlab", "-A", "trust", "--no-sync", "--no-instructions")
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        run("pg_ctl", "-D", str(data), "-o", options, "-l", str(folder / "server.log"), "-w", "-t", "60", "start")
        try:
            yield f"postgresql://attnlab@127.0.0.1:{port}/postgres"
        finally:
            run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
