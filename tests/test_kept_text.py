"""Every character kept (storage/kept_text.py): text with NUL, lone surrogates, U+FFFF and the escape's own
sequences is stored and read back equal on SQLite and PostgreSQL, through the models, in comparisons and LIKE
searches, after the revision that escapes U+FFFF written before it, and in a whole benchmark whose replies,
user lines and personas hold them: the same dialogues on both backends."""
from __future__ import annotations

import json
import sqlite3

import pytest
from sqlalchemy import create_engine, select, text

from helpers import BACKENDS
from storage import Dialogue, Job, Persona, Turn, make_store, read_scope, session_scope
from storage.kept_text import escape_text, unescape_text
from trainer.benchmarking import benchmark
from trainer.benchmarking.eval_runs import scored_dialogues

# what PostgreSQL's text or the drivers' UTF-8 refused before, and what the escaping itself uses
AWKWARD = ["a\x00b", "\x00", "\x00\x00end", "\uffff", "\uffff0", "\ufffff", "\uffffu0000", "\ud800", "x\udfffy",
           "\ud83d\ude00", "\U0001F600 ok", "plain", "", "\\0 \\x00 %_", "ü 我 \u200b \ufffe \U0010ffff"]


def test_escaping_is_reversible_and_leaves_plain_text_alone():
    for value in AWKWARD + ["".join(AWKWARD), "\uffff" * 5 + "\x00" * 3]:
        stored = escape_text(value)
        assert unescape_text(stored) == value
        assert "\x00" not in stored and not any(0xD800 <= ord(c) <= 0xDFFF for c in stored)
        stored.encode("utf-8")  # what both drivers must be able to send
    assert escape_text("plain ü 我") == "plain ü 我" and unescape_text("a\uffffzb") == "a\uffffzb"


@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_text_string_and_json_columns_read_back_every_character(store):
    with session_scope(store) as s:
        for i, value in enumerate(AWKWARD):
            s.add(Persona(id=f"p{i}", name=value, persona=value, first_line=value, traits=[value],
                          extra={"note": value}))
        job = Job(kind="benchmark", name="\x00job", config={"policy": "a\x00b\ud800"}, error="boom\x00")
        s.add(job)
        s.flush()
        dialogue = Dialogue(persona_id="p0", persona_snapshot={"persona": "\x00"}, job_id=job.id, error="\x00")
        dialogue.turns = [Turn(index=i, role="assistant", text=v, think_text=v, inner={"planning": v}, error=v)
                          for i, v in enumerate(AWKWARD)]
        s.add(dialogue)
    with read_scope(store) as s:
        personas = {p.id: p for p in s.scalars(select(Persona))}
        for i, value in enumerate(AWKWARD):
            p = personas[f"p{i}"]
            assert (p.name, p.persona, p.first_line) == (value, value, value)
            # JSON reads two surrogates that make a pair as the one character they encode, as JSON means them
            as_json = json.loads(json.dumps(value))
            assert (p.traits, p.extra) == ([as_json], {"note": as_json})
        turns = s.scalars(select(Turn).order_by(Turn.index)).all()
        assert [(t.text, t.think_text, t.error) for t in turns] == [(v,) * 3 for v in AWKWARD]
        assert [t.inner["planning"] for t in turns] == [json.loads(json.dumps(v)) for v in AWKWARD]
        job = s.scalars(select(Job)).one()
        assert (job.name, job.config, job.error) == ("\x00job", {"policy": "a\x00b\ud800"}, "boom\x00")
        # a comparison or a pattern is escaped like the column, so it finds the stored value
        assert s.scalars(select(Persona.id).where(Persona.name == "a\x00b")).all() == ["p0"]
        assert s.scalars(select(Persona.id).where(Persona.name == "\uffff0")).all() == ["p4"]
        assert s.scalars(select(Turn.index).where(Turn.text.contains("\ud800"))).all() == [7]


@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_a_store_written_before_the_escaping_keeps_its_uffff(db_url: str):
    """A value holding U+FFFF written by the code before revision 0004 (which stored text as given) reads back
    the same after the upgrade; the revision rewrites only such values."""
    from alembic import command

    from storage.migrate import alembic_config

    plain = create_engine(db_url)
    with plain.begin() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
        conn.execute(text("INSERT INTO persona (id, name, language, persona, background, explicit_goal, hidden_need,"
                          " need_category, personality, traits, first_line, difficulty, source, extra, created_at,"
                          " updated_at) VALUES (:id, :name, 'en', :persona, '', '', '', '', '', '[]', '', '', '',"
                          " '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
                     [{"id": "old", "name": "\uffff0 \uffffu0000", "persona": "plain"},
                      {"id": "other", "name": "no escape", "persona": "\uffff"}])
    store = make_store(db_url)
    with read_scope(store) as s:
        rows = {p.id: (p.name, p.persona) for p in s.scalars(select(Persona))}
    assert rows == {"old": ("\uffff0 \uffffu0000", "plain"), "other": ("no escape", "\uffff")}
    store.dispose()
    plain.dispose()


def _record(rid: str, opening: str, replies: list[str], user_lines: list[str]) -> dict:
    history = [{"role": "user", "content": opening, "emotion-point": 40}]
    for n, (reply, line) in enumerate(zip(replies, user_lines), start=1):
        history += [{"role": "assistant", "content": reply},
                    {"role": "user", "content": line, "emotion-point": 40 + 5 * n, "thinking": f"t\x00{n}",
                     "planning": {"activity": "a\x00", "TargetCompletion": "", "content": line, "analyse": "",
                                  "change": 5}}]
    return {"id": rid, "emo_point": history[-1]["emotion-point"], "emo_state": "B",
            "player": f"{rid}: a nurse of 34\x00 who likes hiking", "task": "你希望对方用心倾听你的情绪宣泄",
            "scene": "work \uffff0", "character": "被动型", "target": "eq", "history": history}


def _played(url: str, transcripts: str) -> tuple[list[dict], float]:
    store = make_store(url)
    config = benchmark.BenchmarkConfig(policy=f"replay:{transcripts}", simulator=f"replay:{transcripts}",
                                       profiles=transcripts)
    result = benchmark.run_benchmark(store, config, log=lambda _m: None)
    dialogues = []
    for d in sorted(scored_dialogues(store, result.eval_run_id), key=lambda d: d["persona_id"]):
        with read_scope(store) as s:
            row = s.get(Dialogue, d["id"])
            dialogues.append({"persona": row.persona_snapshot, "outcome": row.outcome, "status": row.status,
                              "final": row.final_emotion, "error": row.error,
                              "turns": [(t.role, t.text, t.think_text, t.emotion, t.inner, t.error)
                                        for t in row.turns]})
    store.dispose()
    return dialogues, result.summary.score


@pytest.mark.postgres
def test_a_benchmark_on_postgres_equals_the_same_benchmark_on_sqlite(postgres_url: str, tmp_path):
    """Scripted (replay) policy and simulated user: replies, user lines, inner thoughts and personas hold NUL
    and U+FFFF (an import refuses lone surrogates before anything is stored); PostgreSQL plays and stores every
    dialogue as SQLite does."""
    records = [_record("nul-reply", "I lost my job.", ["That hurts.\x00 Tell me more?", "I hear you\x00."],
                       ["It was sudden.", "Thanks, bye."]),
               _record("odd-user", "Rough week\x00.", ["What happened?"], ["My cat \x00 ran off \uffff0. Bye."]),
               _record("plain", "Hello.", ["Hi, how are you?"], ["Fine, bye."])]
    transcripts = tmp_path / "nul_result.jsonl"
    transcripts.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    on_sqlite, sqlite_score = _played(f"sqlite:///{tmp_path / 'lab.db'}", str(transcripts))
    on_postgres, postgres_score = _played(postgres_url, str(transcripts))
    assert [(d["status"], d["error"]) for d in on_sqlite] == [("finished", "")] * 3
    replies = [t[1] for d in on_sqlite for t in d["turns"] if t[0] == "assistant"]
    assert "That hurts.\x00 Tell me more?" in replies and "My cat \x00 ran off \uffff0. Bye." in \
        [t[1] for d in on_sqlite for t in d["turns"]]
    assert on_postgres == on_sqlite and postgres_score == sqlite_score


def test_sqlite_holds_the_escaped_form_only_where_needed(tmp_path):
    """What another reader of the file sees: plain text as given, the escaped characters as documented."""
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    store = make_store(url)
    with session_scope(store) as s:
        s.add_all([Persona(id="plain", name="ü 我"), Persona(id="nul", name="a\x00b")])
    store.dispose()
    with sqlite3.connect(tmp_path / "lab.db") as conn:
        assert dict(conn.execute("SELECT id, name FROM persona")) == {"plain": "ü 我", "nul": "a\uffff0b"}
