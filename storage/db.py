"""The store (a SQLAlchemy Engine) and session setup. A SQLite file by default (WAL, foreign keys, busy
timeout), or PostgreSQL (psycopg 3) for a team server; see docs/store.md.

The store is shared by the app and by job processes, so every write is a short transaction and write
transactions run one at a time (SQLite BEGIN IMMEDIATE, a PostgreSQL advisory lock): a writer waits
(busy_timeout / lock_timeout) instead of failing at once.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from storage.migrate import StoreError, upgrade_store
from storage.models import StoreMeta

Store = Engine  # the store as services take it (`store: Store`), made by make_store
PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUSY_TIMEOUT_MS = 30_000
POSTGRES_WRITE_LOCK = 0x726C766572  # the advisory lock key of write transactions ("rlver")


def lab_home() -> Path:
    """Folder for the default database, logs and checkpoints (RLVER_LAB_HOME, default ./lab_data)."""
    home = Path(os.environ.get("RLVER_LAB_HOME", PROJECT_ROOT / "lab_data"))
    home.mkdir(parents=True, exist_ok=True)
    return home


def default_url() -> str:
    """RLVER_LAB_DB (a SQLAlchemy URL or a SQLite file's path) or a SQLite file in lab_home()."""
    env = os.environ.get("RLVER_LAB_DB")
    return store_url(env) if env else f"sqlite:///{lab_home() / 'lab.db'}"


def store_url(value: str) -> str:
    """A store as given: a SQLAlchemy URL (kept as it is) or a plain file path, a SQLite file (made
    sqlite:///ABSOLUTE-PATH, so that the lab's job processes, started elsewhere, open the same file)."""
    if "://" in value or value.startswith("sqlite:"):
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


def db_arguments(argv: list[str]) -> list[str]:
    """A command line with the value of every `--db VALUE` / `--db=VALUE` made a URL (store_url): what each of
    the lab's commands does first, so `--db lab.db` works wherever `--db sqlite:///lab.db` does."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--db" and i + 1 < len(out):
            out[i + 1] = store_url(out[i + 1])
        elif arg.startswith("--db="):
            out[i] = "--db=" + store_url(arg[len("--db="):])
    return out


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _enable_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _enable_wal(cur) -> None:
    """Switch the file to WAL once. Several processes opening a fresh file at the same moment race for
    this switch, and SQLite answers the loser "database is locked" at once (the busy handler is not
    consulted for a journal-mode change), so the loser retries until the winner is done."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.01
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _sqlite_begin(conn) -> None:
    """Writers take the write lock at BEGIN (IMMEDIATE): a deferred transaction that reads and then
    writes fails at once with "database is locked" when another process wrote in between, whatever the
    busy timeout. Read-only scopes (read_scope) begin DEFERRED and never block a writer in WAL mode."""
    writer = conn.get_execution_options().get("store_write_lock", True)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN DEFERRED")


def _postgres_begin(conn) -> None:
    """The same guarantee on PostgreSQL: a write transaction takes one transaction-level advisory lock of
    this database first, so write transactions run one at a time, as on SQLite (the lab's claims, e.g. a
    job's turn in the queue, read and then write in one transaction). Readers take no lock."""
    if conn.get_execution_options().get("store_write_lock", True):
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({POSTGRES_WRITE_LOCK})")


def normalize_url(url: str) -> str:
    """`postgresql://` and `postgres://` mean psycopg 3 (the `postgres` extra), not SQLAlchemy's default
    psycopg2."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def masked(url: str) -> str:
    """The URL as messages show it: the password replaced by ***."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.split("://", 1)[0] + "://..."


def make_store(url: Optional[str] = None, create: bool = True) -> Engine:
    """Open the store at `url` (default_url() when None). create=True: connect now (StoreError, one line
    naming the URL without its password, when the store cannot be reached) and bring the schema to the head
    revision (storage.migrate), saying on stderr in one line what an upgrade of an existing store did."""
    url = normalize_url(store_url(url) if url else default_url())
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        Path(url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict = {}
    if url.startswith("sqlite"):
        # isolation_level=None: the driver issues no BEGIN of its own; _sqlite_begin below does.
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False,
                                  "isolation_level": None}
    elif url.startswith("postgresql"):
        # a writer waits for the write lock as long as SQLite's busy timeout, then fails instead of hanging
        kwargs["connect_args"] = {"connect_timeout": 10, "options": f"-c lock_timeout={BUSY_TIMEOUT_MS}"}
        kwargs["pool_pre_ping"] = True  # a team server restarts; the app outlives its connections
    try:
        store = create_engine(url, **kwargs)
    except (ArgumentError, ImportError) as exc:
        hint = " (pip install 'rlver-lab[postgres]' for PostgreSQL)" if "psycopg" in str(exc) else ""
        raise StoreError(f"cannot open the store {masked(url)}: {exc}{hint}") from None
    if url.startswith("sqlite"):
        event.listen(store, "connect", _sqlite_pragmas)
        event.listen(store, "begin", _sqlite_begin)
    elif store.dialect.name == "postgresql":
        event.listen(store, "begin", _postgres_begin)
    if create:
        check_reachable(store, url)
        done = upgrade_store(store, masked(url))
        if done is not None and not done.created:
            print(done.describe(masked(url)), file=sys.stderr, flush=True)
    return store


def check_reachable(store: Engine, url: str) -> None:
    """Connect once; StoreError (one line, the URL without its password) when the store cannot be reached."""
    try:
        with store.connect().execution_options(store_write_lock=False) as conn:
            conn.exec_driver_sql("SELECT 1")
    except DBAPIError as exc:
        store.dispose()
        reason = " ".join(str(exc.orig).split()) or type(exc.orig).__name__
        password = make_url(url).password
        if password:
            reason = reason.replace(str(password), "***")
        raise StoreError(f"cannot open the store {masked(url)}: {reason}") from None


@lru_cache(maxsize=8)
def _sessionmaker(store: Engine) -> sessionmaker:
    return sessionmaker(store, expire_on_commit=False)


@contextmanager
def session_scope(store: Engine) -> Iterator[Session]:
    """One short write transaction: commit on success, roll back on error."""
    session = _sessionmaker(store)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@contextmanager
def read_scope(store: Engine) -> Iterator[Session]:
    """A read-only transaction (SQLite: BEGIN DEFERRED; PostgreSQL: no write lock), so it never waits for
    writers."""
    session = _sessionmaker(_reader(store))()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


@lru_cache(maxsize=8)
def _reader(store: Engine) -> Engine:
    return store.execution_options(store_write_lock=False)


def store_id(store: Engine) -> str:
    """This store's id: 12 hex digits made once (a random id, so two stores never share job folders
    even when they share RLVER_LAB_HOME)."""
    with session_scope(store) as s:  # the write lock: two processes agree on the first id
        row = s.get(StoreMeta, "store_id")
        if row is None:
            row = StoreMeta(key="store_id", value=uuid.uuid4().hex[:12])
            s.add(row)
        return row.value


@lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit of the code (with '+dirty' when the tree has changes), or 'unknown'."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (rev + ("+dirty" if dirty else "")) if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
