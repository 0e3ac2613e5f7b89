"""Engine and session setup. SQLite file by default (WAL, foreign keys, busy timeout); any URL by setting.

The store is shared by the app and by job processes, so every write is a short transaction and SQLite
waits (busy_timeout) instead of failing with "database is locked".
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import time
import uuid
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from storage.models import Base, StoreMeta

Store = Engine  # the store as services take it (`store: Store`), made by make_engine
PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUSY_TIMEOUT_MS = 30_000


def lab_home() -> Path:
    """Folder for the default database, logs and checkpoints (RLVER_LAB_HOME, default ./lab_data)."""
    home = Path(os.environ.get("RLVER_LAB_HOME", PROJECT_ROOT / "lab_data"))
    home.mkdir(parents=True, exist_ok=True)
    return home


def default_url() -> str:
    """RLVER_LAB_DB (any SQLAlchemy URL) or a SQLite file in lab_home()."""
    return os.environ.get("RLVER_LAB_DB") or f"sqlite:///{lab_home() / 'lab.db'}"


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
    conn.exec_driver_sql("BEGIN " + conn.get_execution_options().get("sqlite_begin", "IMMEDIATE"))


def make_engine(url: Optional[str] = None, create: bool = True) -> Engine:
    """Create an engine for `url` (default_url() when None) and create missing tables."""
    url = url or default_url()
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        Path(url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    kwargs = {}
    if url.startswith("sqlite"):
        # isolation_level=None: the driver issues no BEGIN of its own; _sqlite_begin below does.
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False,
                                  "isolation_level": None}
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    if create:
        Base.metadata.create_all(engine)
        add_missing_columns(engine)
    return engine


def add_missing_columns(engine: Engine) -> list[str]:
    """Upgrade a store made by an older version: add the nullable columns its tables lack (create_all makes
    missing tables only). Returns "table.column" for each column added. Only nullable columns are ever added
    this way, so old rows read as NULL and no data is rewritten."""
    from sqlalchemy import inspect, text

    existing_tables = set(inspect(engine).get_table_names())
    added = []
    for table in Base.metadata.sorted_tables:
        if table.name not in existing_tables:
            continue
        have = {c["name"] for c in inspect(engine).get_columns(table.name)}
        for column in table.columns:
            if column.name in have or not column.nullable or column.primary_key:
                continue
            kind = column.type.compile(dialect=engine.dialect)
            with engine.begin() as conn:
                conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}'))
            added.append(f"{table.name}.{column.name}")
    return added


@lru_cache(maxsize=8)
def _sessionmaker(engine: Engine) -> sessionmaker:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One short write transaction: commit on success, roll back on error."""
    session = _sessionmaker(engine)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@contextmanager
def read_scope(engine: Engine) -> Iterator[Session]:
    """A read-only transaction (SQLite: BEGIN DEFERRED, so it never waits for writers)."""
    session = _sessionmaker(_reader(engine))()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


@lru_cache(maxsize=8)
def _reader(engine: Engine) -> Engine:
    return engine.execution_options(sqlite_begin="DEFERRED")


def store_id(engine: Engine) -> str:
    """This store's id: 12 hex digits made once (a random id, so two stores never share job folders
    even when they share RLVER_LAB_HOME)."""
    with session_scope(engine) as s:  # BEGIN IMMEDIATE: two processes agree on the first id
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
