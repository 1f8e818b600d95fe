"""A throwaway Postgres server from Debian's packages, on 127.0.0.1, for the shared-profile tests.

Why a real server and not a mock: what the shared profile must survive (DuckLake's optimistic
commits, catalog races between processes, dagster-postgres' schema) only happens in Postgres.
``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user that
Debian's package creates (``runuser``); as any other user it is that user's. ``fsync`` is off:
the tests measure correctness, not durability (benchmarks/storage.py turns it back on).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


class PostgresUnavailable(RuntimeError):
    pass


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise PostgresUnavailable("Postgres server binaries not found (apt-get install postgresql; .ci/run does)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """``with LocalPostgres() as pg: pg.url('db')`` -- a cluster in a temporary directory, removed after."""

    def __init__(self, fsync: bool = False, max_connections: int = 200):
        self.bin = _bin_dir()
        self.port = _free_port()
        self.fsync = fsync
        self.max_connections = max_connections
        self.root = Path(tempfile.mkdtemp(prefix="envduels-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        full = ["runuser", "-u", self.user, "--", *cmd] if self.user else list(cmd)
        proc = subprocess.run(full, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(cmd[:2])} failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
        return proc

    def start(self) -> LocalPostgres:
        if self.user:
            try:
                shutil.chown(self.root, user=self.user)
            except (LookupError, PermissionError) as exc:
                raise PostgresUnavailable(f"no {self.user!r} user to own the cluster: {exc}") from exc
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync",
                  "-E", "UTF8", "--locale", "C")
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync={'on' if self.fsync else 'off'} "
                   f"-c max_connections={self.max_connections} -c synchronous_commit={'on' if self.fsync else 'off'}")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.root / "log"), "-w",
                  "-t", "60", "start")
        return self

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        import psycopg2

        conn = psycopg2.connect(self.url())
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return self.url(name)

    def stop(self) -> None:
        data = self.root / "data"
        if (data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for(predicate, timeout_s: float = 30.0, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return False


@pytest.fixture(scope="module")
def pg():
    pytest.importorskip("psycopg2", reason="the shared profile needs the [shared] extra (psycopg2-binary)")
    pytest.importorskip("duckdb_extension_ducklake", reason="the shared profile needs the [shared] extra")
    server = LocalPostgres()
    try:
        server.start()
    except PostgresUnavailable as exc:
        server.stop()
        pytest.skip(f"no local Postgres server (Debian's postgresql package; .ci/run installs it): {exc}")
    yield server
    server.stop()
