"""Schema migrations (storage/migrate.py, storage/migrations): the migrated schema is the models' schema; a store
made before migrations (tests/data/store_before_migrations.*.sql, made by main at d29f43a with
tests/data/make_store_fixture.py) and an older one lacking later columns and tables are adopted with every row;
later revisions run on open, those waiting for the owner refuse with the command to run; a store from a newer
version is refused; an unreachable store is one line without its password. On SQLite and PostgreSQL."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, select, text

from storage import Base, Dialogue, StoreError, Turn, make_store, read_scope
from storage.migrate import MIGRATIONS, head_revision, upgrade_store

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def db_url(any_db_url: str) -> str:
    return any_db_url


def schema_diffs(store) -> list:
    with store.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), Base.metadata)


def all_rows(store) -> dict[str, list[tuple]]:
    """table -> (its columns, its rows in key order as plain tuples), for every table of the store."""
    rows = {}
    with store.connect() as conn:
        for table in sorted(inspect(conn).get_table_names()):
            if table == "alembic_version":
                continue
            cols = [c["name"] for c in inspect(conn).get_columns(table)]
            listed = ", ".join(f'"{c}"' for c in cols)
            rows[table] = cols, [tuple(r) for r in conn.execute(
                text(f'SELECT {listed} FROM "{table}" ORDER BY "{cols[0]}"'))]
    return rows


def load_store_before_migrations(url: str, request: pytest.FixtureRequest) -> None:
    """The shipped dump of a store made before migrations, loaded into the empty store at `url`."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///"):]) as conn:
            conn.executescript((DATA / "store_before_migrations.sqlite.sql").read_text(encoding="utf-8"))
    else:
        request.getfixturevalue("postgres_server").psql(url.rsplit("/", 1)[1],
                                                         DATA / "store_before_migrations.postgres.sql")


def test_the_migrated_schema_is_the_models_schema(db_url: str):
    """Every change to the models needs a revision: a model changed without one fails here (docs/store.md)."""
    store = make_store(db_url)
    assert schema_diffs(store) == []
    with store.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == head_revision()
    store.dispose()


def test_a_store_made_before_migrations_is_adopted_with_every_row(db_url: str, request, capsys):
    load_store_before_migrations(db_url, request)
    plain = create_engine(db_url)
    before = all_rows(plain)
    assert sum(len(r[1]) for r in before.values()) >= 25 and len(before) == 17  # every table of d29f43a
    store = make_store(db_url)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "adopted a store made before migrations" in err[0] and head_revision() in err[0]
    assert "lab-test-secret" not in err[0]
    after = all_rows(plain)
    for table, (cols, rows) in before.items():  # every value kept (later revisions may add columns)
        keep = [after[table][0].index(c) for c in cols]
        assert [tuple(r[i] for i in keep) for r in after[table][1]] == rows, table
    assert all(not after[table][1] for table in set(after) - set(before))  # tables of later revisions: empty
    assert schema_diffs(store) == []
    with read_scope(store) as s:  # and the lab reads it through the models
        dialogue = s.scalars(select(Dialogue).where(Dialogue.persona_id == "tom-ü")).one()
        assert [t.text for t in dialogue.turns] == ["Hi. Rough day.", "That sounds hard — what happened?",
                                                    "我被跳过了。"]
        assert dialogue.turns[1].policy_version == 1 and dialogue.final_emotion == 68.0
    make_store(db_url).dispose()  # at head now: nothing to say
    assert capsys.readouterr().err == ""
    store.dispose()
    plain.dispose()


def test_an_older_store_gets_its_missing_columns_and_tables(db_url: str, request, capsys):
    """A store made before turn.policy_version and the comparison tables existed (what the hand-written
    column adder handled): the baseline adds them, old turns read NULL, every other value is kept."""
    load_store_before_migrations(db_url, request)
    plain = create_engine(db_url)
    with plain.begin() as conn:
        conn.execute(text("DROP TABLE comparison_pair"))
        conn.execute(text("DROP TABLE comparison"))
        conn.execute(text("ALTER TABLE turn DROP COLUMN policy_version"))
    before = all_rows(plain)
    store = make_store(db_url)
    err = capsys.readouterr().err
    assert "added column turn.policy_version" in err and "created table comparison" in err
    after = all_rows(plain)
    for table, (cols, rows) in before.items():
        keep = [after[table][0].index(c) for c in cols]
        assert [tuple(r[i] for i in keep) for r in after[table][1]] == rows, table
    assert schema_diffs(store) == []
    with read_scope(store) as s:
        assert {t.policy_version for t in s.scalars(select(Turn))} == {None}
    store.dispose()
    plain.dispose()


def next_revisions() -> tuple[str, str]:
    """The two revision ids after the shipped head (revisions are numbered 0001, 0002, ...)."""
    head = int(head_revision())
    return f"{head + 1:04d}", f"{head + 2:04d}"


def later_revisions(tmp_path: Path, with_owner_decision: bool) -> Path:
    """A copy of the shipped migrations plus later revisions: head+1 renames persona.name (which the hand-written
    adder could never do) and runs on open; head+2 (with_owner_decision) drops persona.source and waits for the
    owner."""
    folder = tmp_path / f"migrations-{int(with_owner_decision)}"
    shutil.copytree(MIGRATIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    head = head_revision()
    first, second = next_revisions()
    (folder / "versions" / f"{first}_rename.py").write_text(textwrap.dedent(f'''
        """rename persona.name to display_name"""
        from alembic import op
        revision, down_revision, branch_labels, depends_on = "{first}", "{head}", None, None
        def upgrade():
            with op.batch_alter_table("persona") as batch:
                batch.alter_column("name", new_column_name="display_name")
        '''))
    if not with_owner_decision:
        return folder
    (folder / "versions" / f"{second}_drop.py").write_text(textwrap.dedent(f'''
        """drop persona.source"""
        from alembic import op
        revision, down_revision, branch_labels, depends_on = "{second}", "{first}", None, None
        OWNER_DECISION = "drops persona.source"
        def upgrade():
            with op.batch_alter_table("persona") as batch:
                batch.drop_column("source")
        '''))
    return folder


def test_later_revisions_run_and_one_needing_the_owner_refuses_with_the_command(db_url: str, tmp_path: Path):
    store = make_store(db_url)
    with store.begin() as conn:
        conn.execute(text("INSERT INTO persona (id, name, language, persona, background, explicit_goal, hidden_need, "
                          "need_category, personality, traits, first_line, difficulty, source, extra, created_at, "
                          "updated_at) VALUES ('p1', 'Ana', 'en', '', '', '', '', '', '', '[]', '', 'standard', "
                          "'user', '{}', '2026-01-01', '2026-01-01')"))
    done = upgrade_store(store, "the-url", script_location=later_revisions(tmp_path, False))
    first, second = next_revisions()
    assert (done.before, done.after, done.adopted) == (head_revision(), first, False)
    assert "upgraded the schema from revision" in done.describe("the-url")
    with store.connect() as conn:
        assert conn.execute(text("SELECT display_name FROM persona")).scalar() == "Ana"
    folder = later_revisions(tmp_path, True)
    with pytest.raises(StoreError) as refused:
        upgrade_store(store, "the-url", script_location=folder)
    message = str(refused.value)
    assert "drops persona.source" in message and "python -m storage upgrade --db 'the-url'" in message
    with store.connect() as conn:  # nothing done
        assert "source" in {c["name"] for c in inspect(conn).get_columns("persona")}
    done = upgrade_store(store, "the-url", allow_owner_decisions=True, script_location=folder)
    assert done.after == second
    with store.connect() as conn:
        assert "source" not in {c["name"] for c in inspect(conn).get_columns("persona")}
        assert conn.execute(text("SELECT display_name FROM persona")).scalar() == "Ana"
    store.dispose()


def test_a_store_from_a_newer_version_is_refused(db_url: str):
    make_store(db_url).dispose()
    plain = create_engine(db_url)
    with plain.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreError, match="revision 9999, which this code does not know.*update the lab's code"):
        make_store(db_url)
    plain.dispose()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.process
def test_storage_status_and_upgrade_commands(tmp_path: Path, request):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    load_store_before_migrations(url, request)
    status = run_cli("storage", "status", "--db", url)
    assert status.returncode == 0, status.stderr
    assert "made before migrations" in status.stdout and "pending 0001" in status.stdout
    assert status.stdout.rstrip().endswith(head_revision())  # every revision up to the head is pending
    up = run_cli("storage", "upgrade", "--db", url)
    assert up.returncode == 0 and "adopted a store made before migrations" in up.stdout, up.stderr
    again = run_cli("storage", "status", "--db", url)
    assert f"revision {head_revision()}" in again.stdout and "pending none" in again.stdout


@pytest.mark.process
@pytest.mark.postgres
def test_unreachable_store_or_wrong_password_is_one_line_without_the_password(postgres_server, tmp_path: Path):
    wrong = postgres_server.url(password="not-the-password")
    refused = postgres_server.url().replace(f":{postgres_server.port}/", ":1/")
    for command in (("trainer", "jobs", "--db", wrong),
                    ("app", "--port", "1", "--db", wrong), ("storage", "status", "--db", refused)):
        done = run_cli(*command)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (command, done.stderr)
        said = lines[0].removeprefix("RLVER Lab cannot start: ").removeprefix("error: ")  # the app's words, the others'
        assert said.startswith("cannot open the store postgresql+psycopg://lab:***@127.0.0.1:"), lines
        assert "password authentication failed" in lines[0] or "refused" in lines[0]
        assert "not-the-password" not in done.stderr + done.stdout and "lab-test-secret" not in done.stderr
        assert "serving" not in done.stdout
