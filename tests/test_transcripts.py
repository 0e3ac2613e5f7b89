"""SAGE transcript files: import into a real store, scoring, export round trip, bad lines, re-import."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.evaluation import transcripts
from simulator.evaluation.scoring import sentient_summary
from simulator.personas.io import BadFileError
from storage import Dialogue, Turn, read_scope
from storage.dialogues import add_turn, finish_dialogue, load_dialogue, start_dialogue


def record(rid: str, final: int, n_policy: int = 2, **kw) -> dict:
    history = [{"role": "user", "content": "最近有点烦。", "emotion-point": 40}]
    emotion = 40
    step = (final - 40) / n_policy
    for i in range(n_policy):
        emotion_next = round(40 + step * (i + 1))
        history.append({"role": "assistant", "content": f"reply {i}"})
        history.append({"role": "user", "content": f"user {i}", "thinking": f"plan {i}",
                        "emotion-point": emotion_next,
                        "planning": {"activity": "a", "TargetCompletion": "t", "content": "c", "analyse": "x",
                                     "change": emotion_next - emotion}})
        emotion = emotion_next
    base = {"id": rid, "emo_point": final, "emo_state": "Emotion-B", "target": "eq", "player": "* 姓名：李雷\n",
            "scene": "背景", "character": "被动型", "topic": "工作-加班", "task": "你希望对方用心倾听你的情绪宣泄",
            "history": history}
    base.update(kw)
    return base


def write(path: Path, *lines) -> Path:
    path.write_bytes(b"".join(line if isinstance(line, bytes) else
                              (json.dumps(line, ensure_ascii=False) + "\n").encode() for line in lines))
    return path


def test_import_keeps_emotion_thinking_and_planning(store, tmp_path: Path):
    path = write(tmp_path / "m_result.jsonl", record("a", 100, n_policy=2, extra_key={"k": 1}), record("b", 5, 3),
                 record("c", 60, 10), record("d", 60, 4))
    report = transcripts.import_file(store, path)
    assert report.ok and len(report.dialogue_ids) == 4 and report.collection == "m_result.jsonl"
    d = load_dialogue(store, report.dialogue_ids[0])
    assert (d["source"], d["collection"], d["external_id"], d["policy_ref"]) == ("import", "m_result.jsonl", "a", "m")
    assert d["final_emotion"] == 100 and d["outcome"] == "success" and d["n_turns"] == 2
    assert d["persona_snapshot"]["name"] == "李雷" and d["persona_snapshot"]["personality"] == "passive"
    assert d["persona_snapshot"]["need_category"] == "just_listen"
    assert d["persona_snapshot"]["extra"] == {"extra_key": {"k": 1}, "target": "eq", "topic": "工作-加班"}
    assert d["config"]["sha256"] and d["code_version"]
    user = [t for t in d["turns"] if t["role"] == "user"]
    assert user[0]["emotion"] == 40 and user[0]["delta"] is None and user[0]["inner"] == {}
    assert user[1]["emotion"] == 70 and user[1]["delta"] == 30
    assert user[1]["inner"] == {"planning": "plan 0", "analysis": {"activity": "a", "TargetCompletion": "t",
                                                                   "content": "c", "analyse": "x", "change": 30}}
    outcomes = [load_dialogue(store, i)["outcome"] for i in report.dialogue_ids]
    assert outcomes == ["success", "failure", "max_turns", "goodbye"]


def test_reimport_skips_and_reports_duplicates(store, tmp_path: Path):
    path = write(tmp_path / "m_result.jsonl", record("a", 100), record("b", 5))
    assert len(transcripts.import_file(store, path).dialogue_ids) == 2
    write(path, record("a", 100), record("b", 5), record("c", 50))
    again = transcripts.import_file(store, path)
    assert again.duplicates == ["a", "b"] and len(again.dialogue_ids) == 1
    assert "2 already in the store" in again.summary()
    with read_scope(store) as s:
        assert s.query(Dialogue).count() == 3
    # the same records under another file name are another collection
    assert len(transcripts.import_file(store, path, collection="copy.jsonl").dialogue_ids) == 3
    assert transcripts.delete_collection(store, "m_result.jsonl") == 3
    with read_scope(store) as s:
        assert s.query(Dialogue).count() == 3 and s.query(Turn).count() == 3 * len(record("a", 1)["history"])
    assert len(transcripts.import_file(store, path).dialogue_ids) == 3  # importable again after deleting


def test_bad_lines_store_nothing_unless_keep_valid(store, tmp_path: Path):
    bad_history = record("h", 50)
    bad_history["history"][1] = {"role": "bot", "content": "x"}
    path = write(tmp_path / "bad_result.jsonl",
                 record("a", 80),
                 {k: v for k, v in record("m", 50).items() if k != "emo_point"},
                 b"{oops\n",
                 record("t", 50, emo_point="high"),
                 bad_history,
                 record("a", 10),
                 record("p", 50, history="none"))
    report = transcripts.import_file(store, path)
    assert [(e.line, e.field) for e in report.errors] == [
        (2, "emo_point"), (3, "json"), (4, "emo_point"), (5, "history[1].role"), (6, "id"), (7, "history")]
    assert report.dialogue_ids == []
    with read_scope(store) as s:
        assert s.query(Dialogue).count() == 0
    with pytest.raises(BadFileError) as e:
        transcripts.summarize_file(path)
    assert "line 2: emo_point: is required (missing)" in str(e.value)
    kept = transcripts.import_file(store, path, keep_valid=True)
    assert len(kept.dialogue_ids) == 1 and kept.errors


def test_empty_and_non_utf8_files(store, tmp_path: Path):
    assert [e.field for e in transcripts.import_file(store, write(tmp_path / "e.jsonl", b"")).errors] == ["file"]
    latin = write(tmp_path / "l.jsonl", json.dumps(record("a", 50), ensure_ascii=False).encode("gb18030") + b"\n")
    assert [(e.line, e.field) for e in transcripts.import_file(store, latin).errors] == [(1, "encoding")]
    with pytest.raises(ValueError, match="collection"):
        transcripts.import_file(store, b"{}")


def test_errored_dialogues_round_trip_as_errors(store, tmp_path: Path):
    """A dialogue recorded by the live recorder (storage.dialogues) exports to SAGE and scores the same."""
    ids = []
    for final, status, error in ((100.0, "finished", ""), (55.0, "finished", ""), (35.0, "failed", "simulator timeout")):
        did = start_dialogue(store, persona_id="maya", persona_snapshot={
            "id": "maya", "name": "Maya", "persona": "Maya, 29", "background": "night shifts",
            "hidden_need": "be told she was right", "personality": "avoidant", "extra": {"topic": "work"}},
            source="benchmark")
        add_turn(store, did, 0, "user", "Hi.", emotion=40.0)
        add_turn(store, did, 1, "assistant", "Hello, what happened?", think_text="be kind")
        add_turn(store, did, 2, "user", "My shifts changed.", emotion=50.0, delta=10.0,
                 inner={"analysis": {"analyse": "ok"}, "planning": "be short"})
        finish_dialogue(store, did, status, final, outcome="error" if error else "max_turns", error=error)
        ids.append(did)
    out = tmp_path / "run_result.jsonl"
    assert transcripts.export_sage_jsonl(store, ids, out) == 3
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert records[0]["character"] == "回避型" and records[0]["topic"] == "work" and records[0]["emo_state"] == "Emotion-S"
    assert records[0]["history"][1] == {"role": "assistant", "content": "Hello, what happened?", "think": "be kind"}
    assert records[0]["history"][2]["planning"] == {"analyse": "ok", "change": 10}
    assert records[0]["history"][2]["thinking"] == "be short"
    assert records[2]["error"] == "simulator timeout"
    assert [r["id"] for r in records] == ["maya", f"maya#{ids[1]}", f"maya#{ids[2]}"]  # one profile, 3 plays
    s = transcripts.summarize_file(out)
    assert s == sentient_summary([100.0, 55.0, None])
    assert (s.n, s.n_errors, s.failure) == (3, 1, 1)
    with pytest.raises(KeyError):
        transcripts.export_sage_jsonl(store, [999], tmp_path / "x.jsonl")
    imported = transcripts.import_file(store, out)
    assert transcripts.collection_summary(store, imported.collection) == s


@pytest.mark.parametrize("name,want", [("gpt-4.1", (68.2, 35, 13)), ("qwen2.5-72b", (19.1, 4, 70))])
def test_published_files(store, shared_data: Path, tmp_path: Path, name: str, want):
    path = shared_data / "sage" / f"{name}_result.jsonl"
    s = transcripts.summarize_file(path)
    assert (s.score, s.success, s.failure, s.n) == (*want, 100)
    report = transcripts.import_file(store, path)
    assert report.ok and len(report.dialogue_ids) == 100
    assert transcripts.collection_summary(store, report.collection) == s
    assert [c["collection"] for c in transcripts.list_collections(store)] == [path.name]
    rows = transcripts.list_dialogues(store, path.name)
    assert len(rows) == 100 and all(r["name"] for r in rows)
    d = load_dialogue(store, report.dialogue_ids[0])
    user = [t for t in d["turns"] if t["role"] == "user"]
    assert all(t["emotion"] is not None for t in user)
    assert all(set(t["inner"]) == {"analysis", "planning"} for t in user[1:])
    assert all(t["delta"] == t["inner"]["analysis"]["change"] for t in user[1:])
    out = tmp_path / f"{name}_result.jsonl"
    transcripts.export_sage_jsonl(store, report.dialogue_ids, out)
    original = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == original
    assert transcripts.summarize_file(out) == s
    again = transcripts.import_file(store, path)
    assert again.dialogue_ids == [] and len(again.duplicates) == 100
