"""The store: SQLite pragmas, PostgreSQL's write lock, the RLVER_LAB_DB setting, and real processes sharing one
store; on both backends (`db_url` here is `any_db_url`: a SQLite file, then a database on the test PostgreSQL)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from storage import (
    EvalRun,
    Job,
    Metric,
    Turn,
    as_dict,
    default_url,
    get_or_raise,
    make_store,
    read_scope,
    session_scope,
)

REPO = Path(__file__).resolve().parent.parent

WRITER = textwrap.dedent("""
    import json, sys
    from storage import Job, Metric, make_store, session_scope
    store = make_store(sys.argv[1])
    job_id, rows, batch = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    for start in range(0, rows, batch):  # one short transaction per batch
        with session_scope(store) as s:
            s.add_all(Metric(job_id=job_id, step=i, name="reward", value=i / rows) for i in range(start, start + batch))
    print(json.dumps({"written": rows}))
""")

READER = textwrap.dedent("""
    import json, sys, time
    from datetime import datetime
    from sqlalchemy import func, select
    from storage import Job, Metric, make_store, read_scope, session_scope
    store = make_store(sys.argv[1])
    job_id, rows = int(sys.argv[2]), int(sys.argv[3])
    counts, writes, deadline = [], 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        with read_scope(store) as s:  # what the app does while a job writes
            n = s.scalar(select(func.count(Metric.id)).where(Metric.job_id == job_id))
            s.execute(select(Metric).where(Metric.job_id == job_id).order_by(Metric.step.desc()).limit(50)).all()
        counts.append(n)
        if len(counts) % 10 == 0:  # and the app writes now and then, too
            with session_scope(store) as s:
                s.get(Job, job_id).heartbeat_at = datetime.now()
            writes += 1
        if n >= rows:
            break
    print(json.dumps({"reads": len(counts), "writes": writes, "counts": counts}))
""")


@pytest.fixture
def db_url(any_db_url: str) -> str:
    return any_db_url


def test_sqlite_pragmas(tmp_path: Path):
    store = make_store(f"sqlite:///{tmp_path / 'pragmas.db'}")
    with store.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    store.dispose()


@pytest.mark.postgres
def test_postgres_write_transactions_hold_the_write_lock_and_readers_do_not(postgres_url: str):
    """PostgreSQL writers run one at a time, as SQLite's BEGIN IMMEDIATE makes them: a write scope holds the
    advisory lock until it commits; a read scope takes none."""
    store = make_store(postgres_url)
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = " \
           "(SELECT oid FROM pg_database WHERE datname = current_database())"
    with read_scope(store) as r:
        assert r.execute(text(held)).scalar() == 0
    with session_scope(store) as w:
        w.add(Job(kind="train", name="locked"))
        w.flush()
        with read_scope(store) as r:
            assert r.execute(text(held)).scalar() == 1
    with read_scope(store) as r:
        assert r.execute(text(held)).scalar() == 0
        assert r.execute(text("SHOW lock_timeout")).scalar() == "30s"
    store.dispose()


def test_foreign_keys_are_enforced(store):
    with pytest.raises(IntegrityError):
        with session_scope(store) as s:
            s.add(Turn(dialogue_id=12345, index=0, role="user", text="orphan"))
    with read_scope(store) as s:
        assert s.query(Turn).count() == 0


def test_rows_become_dicts_and_a_missing_id_a_named_error(store):
    """storage.rows: every column of a row in table order (the defaults as stored), less what is excluded; the
    row of an id, or the error the caller names with a message naming the thing and the id."""
    with session_scope(store) as s:
        s.add(EvalRun(name="probe", seed=7))
    with read_scope(store) as s:
        run = get_or_raise(s, EvalRun, 1)
        row = as_dict(run)
        assert len(row) == 21 and list(row)[:3] == ["id", "job_id", "name"]
        assert list(row)[-4:] == ["seed", "code_version", "created_at", "finished_at"]  # the mixin's columns last
        assert (row["id"], row["name"], row["seed"], row["status"], row["code_version"], row["finished_at"]) == \
            (1, "probe", 7, "running", "", None)
        assert row["created_at"] is not None
        assert list(as_dict(run, exclude=("created_at", "finished_at"))) == list(row)[:-2]
        with pytest.raises(LookupError, match="^eval run 999 does not exist$"):
            get_or_raise(s, EvalRun, 999)
        with pytest.raises(KeyError, match="job 5 does not exist"):
            get_or_raise(s, Job, 5, KeyError)
        with pytest.raises(ValueError, match="^run: 5 does not exist$"):
            get_or_raise(s, EvalRun, 5, ValueError, what="run:")
        with pytest.raises(ValueError, match="^5 does not exist$"):
            get_or_raise(s, EvalRun, 5, ValueError, what="")


def test_rlver_lab_db_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    url = f"sqlite:///{tmp_path / 'sub' / 'from_env.db'}"
    monkeypatch.setenv("RLVER_LAB_DB", url)
    assert default_url() == url
    store = make_store()
    with session_scope(store) as s:
        s.add(Job(kind="train", name="env"))
    store.dispose()
    assert (tmp_path / "sub" / "from_env.db").exists()
    monkeypatch.delenv("RLVER_LAB_DB")
    assert default_url().endswith("lab.db") and str(tmp_path / "lab_home") in default_url()


@pytest.mark.process
def test_writer_and_reader_processes_never_hit_locked(db_url: str, tmp_path: Path):
    rows, batch = 5000, 5
    store = make_store(db_url)
    with session_scope(store) as s:
        job = Job(kind="train", name="concurrency")
        s.add(job)
        s.flush()
        job_id = job.id
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    py = sys.executable
    reader = subprocess.Popen([py, "-c", READER, db_url, str(job_id), str(rows)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = subprocess.Popen([py, "-c", WRITER, db_url, str(job_id), str(rows), str(batch)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w_out, w_err = writer.communicate(timeout=180)
    r_out, r_err = reader.communicate(timeout=180)
    assert "locked" not in w_err + r_err
    assert writer.returncode == 0, w_err
    assert reader.returncode == 0, r_err
    assert json.loads(w_out) == {"written": rows}
    seen = json.loads(r_out)
    counts = seen["counts"]
    assert counts == sorted(counts) and counts[-1] == rows  # committed batches only, never a partial one
    assert all(c % batch == 0 for c in counts)
    assert any(0 < c < rows for c in counts), "the reader never ran while the writer was writing"
    assert seen["writes"] >= 1
    with read_scope(store) as s:
        assert s.query(Metric).filter_by(job_id=job_id).count() == rows
        assert s.get(Job, job_id).heartbeat_at is not None
        if store.dialect.name == "sqlite":
            assert s.execute(text("PRAGMA integrity_check")).scalar() == "ok"
    store.dispose()


@pytest.mark.process
def test_two_processes_create_a_fresh_store_at_once(db_url: str):
    """The app and a job starting together on a new store must both get a working store (the schema's
    revisions run once, under the write lock)."""
    url = db_url
    code = "import sys; from storage import make_store, session_scope, Job\n" \
           "e = make_store(sys.argv[1])\n" \
           "with session_scope(e) as s: s.add(Job(kind='train'))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code, url], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errs
    store = make_store(url)
    with read_scope(store) as s:
        assert s.query(Job).count() == 3
    store.dispose()


def test_db_takes_a_plain_file_path_or_a_url(tmp_path, monkeypatch):
    """`--db lab.db` is a SQLite file (made absolute, so a job process started elsewhere opens the same file);
    a URL stays as it is; every command rewrites its --db first (db_arguments), and RLVER_LAB_DB likewise."""
    from storage.db import db_arguments, default_url, store_url

    monkeypatch.chdir(tmp_path)
    assert store_url("lab.db") == f"sqlite:///{tmp_path / 'lab.db'}"
    assert store_url("sqlite:///x.db") == "sqlite:///x.db"
    assert store_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert db_arguments(["benchmark", "--db", "lab.db", "--quick"]) == ["benchmark", "--db",
                                                                        f"sqlite:///{tmp_path / 'lab.db'}", "--quick"]
    assert db_arguments(["--db=sub/lab.db"]) == [f"--db=sqlite:///{tmp_path / 'sub' / 'lab.db'}"]
    monkeypatch.setenv("RLVER_LAB_DB", "env.db")
    assert default_url() == f"sqlite:///{tmp_path / 'env.db'}"
    store = make_store("plain.db")
    store.dispose()
    assert (tmp_path / "plain.db").exists()


def test_a_cancelled_training_dialogue_without_a_reply_is_not_kept(store):
    """Cancelling a training job mid-rollout ends its dialogues; those in which the policy never spoke are
    dropped (clutter in Transcripts), the others and every other source's are kept."""
    from types import SimpleNamespace

    from simulator.personas.builtin import builtin_profiles
    from storage.dialogues import load_dialogue
    from storage.recorder import DialogueRecorder
    from trainer.rollout.types import RolloutConfig

    profile = builtin_profiles()[0]
    recorder = DialogueRecorder(store)

    def started(source: str) -> int:
        return recorder.dialogue_started(SimpleNamespace(
            config=RolloutConfig(source=source), profile=profile, policy_ref="default", simulator_fingerprint={},
            fingerprint_hash="fp", group_id=0, seed=0, policy={}))

    cancelled = SimpleNamespace(status="cancelled", final_emotion=None, outcome="cancelled", error="stopped")
    silent, spoke, live = started("train"), started("train"), started("rollout")
    for d in (silent, spoke, live):
        recorder.turn_recorded(d, {"role": "user", "index": 0, "text": "hi", "emotion": 40.0})
    recorder.turn_recorded(spoke, {"role": "assistant", "index": 1, "text": "hello"})
    for d in (silent, spoke, live):
        recorder.dialogue_finished(d, cancelled)
    assert load_dialogue(store, silent) is None
    assert load_dialogue(store, spoke)["status"] == "cancelled" and load_dialogue(store, live)["status"] == "cancelled"
