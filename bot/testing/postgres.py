"""A real, throwaway PostgreSQL server for tests: Debian's binaries, a temp cluster, one port.

``.ci/run`` installs the ``postgresql`` package; this starts a private cluster from it (as the
``postgres`` user when we run as root, as PostgreSQL refuses root) with trust auth on loopback,
so no server configuration on the machine is touched. ``CI_REQUIRE_POSTGRES=1`` turns a missing
installation into a failure instead of a skip.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bot.testing.process import free_port


class PostgresUnavailable(RuntimeError):
    pass


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    """``with PostgresServer() as pg: pg.url("dbname")`` — a database per test module."""

    def __init__(self):
        bindir = _bindir()
        if bindir is None:
            raise PostgresUnavailable("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        self.bin = bindir
        self.port = free_port()
        self._tmp = Path(tempfile.mkdtemp(prefix="pgtest-"))
        self.data = self._tmp / "data"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self._tmp, "postgres", "postgres")
        self._started = False

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, cwd=self._tmp)

    def start(self) -> PostgresServer:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--no-sync")
        return self.resume()

    def halt(self) -> None:
        """Stop the server, keeping its data (a database outage)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)
        self._started = False

    def resume(self) -> PostgresServer:
        opts = f"-p {self.port} -k {self._tmp} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        res = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self._tmp / "log"),
                        "-w", "-t", "60", "start", check=False)
        if res.returncode != 0:
            log = (self._tmp / "log").read_text(errors="replace") if (self._tmp / "log").exists() else ""
            raise PostgresUnavailable(f"pg_ctl start failed: {res.stderr}\n{log[-2000:]}")
        self._started = True
        return self

    def create_database(self, name: str) -> str:
        self._run(str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-c",
                  f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, name: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self._started:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
            self._started = False
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

