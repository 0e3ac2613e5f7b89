"""A real PostgreSQL server in a temporary folder, for tests: initdb and pg_ctl of the installed server
(Debian's postgresql package: `make test` installs it), run as an unprivileged user when we are root
(PostgreSQL refuses to run as root), listening on 127.0.0.1 only, password (SCRAM) authentication over TCP.
One server per test session; each test gets a database of its own (CREATE DATABASE is fast).
"""
from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

USER = "lab"
PASSWORD = "lab-test-secret"  # a throwaway server's, on 127.0.0.1 only; tests check it never shows


def server_bindir() -> Optional[Path]:
    """The folder holding initdb, pg_ctl and postgres: PATH first, then Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def missing_reason() -> Optional[str]:
    """Why no server can be started here, or None."""
    if server_bindir() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: `apt-get install postgresql` (make test does)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg (PostgreSQL driver) not installed: pip install 'psycopg[binary]' (requirements.txt)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """A started server; `new_database()` gives the URL of a fresh, empty database."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="rlver-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.run_as = None
        if os.geteuid() == 0:  # PostgreSQL never runs as root: the Debian package's user, else nobody
            self.run_as = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
            pw = pwd.getpwnam(self.run_as)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._counter = itertools.count(1)
        self._admin = None

    def _run(self, *args: str) -> None:
        cmd = [str(a) for a in args]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--"] + cmd
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = (self.root / "server.log")
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()} {tail}")

    def start(self) -> "PostgresServer":
        pwfile = self.root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.run_as:
            pw = pwd.getpwnam(self.run_as)
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        self._run(self.bindir / "initdb", "-D", self.data, "-U", USER, f"--pwfile={pwfile}", "-E", "UTF8",
                  "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync")
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-l", self.root / "server.log", "-w", "-t", "60",
                  "-o", options, "start")
        return self

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql+psycopg://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def new_database(self, template: str = "template0") -> str:
        """CREATE DATABASE test_N (from `template`); its URL."""
        from sqlalchemy import create_engine

        if self._admin is None:
            self._admin = create_engine(self.url(), isolation_level="AUTOCOMMIT", poolclass=_null_pool())
        name = f"test_{next(self._counter)}"
        with self._admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE {template}')
        return self.url(name)

    def psql(self, database: str, sql_file: Path) -> None:
        """Run a SQL file (a pg_dump) with psql, stopping at the first error."""
        env = dict(os.environ, PGPASSWORD=PASSWORD)
        done = subprocess.run([str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                               "-p", str(self.port), "-U", USER, "-d", database, "-f", str(sql_file)],
                              capture_output=True, text=True, timeout=120, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"psql -f {sql_file} failed: {done.stderr.strip()}")

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.dispose()
        try:
            self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _null_pool():
    from sqlalchemy.pool import NullPool

    return NullPool
