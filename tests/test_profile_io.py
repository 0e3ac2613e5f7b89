"""RLVER/SAGE and lab JSONL profile files: parsing, per-line errors, lossless export/import."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.personas.io import (
    LineError,
    dumps_profiles,
    export_profiles,
    import_profiles,
    name_from_persona,
    profile_to_rlver,
)
from simulator.personas.profile import MAX_FIELD_CHARS, Profile

RLVER_LINE = {
    "id": "p-1",
    "player": "* 姓名：王小云\n* 年龄：23岁\n* 职业：时尚博主",
    "scene": "## 剧本背景故事\n张浩的态度让她纠结。\n####隐藏主题:\n***你想分析事件中其他人物这么做的原因",
    "main_cha": "负面型",
    "cha_group": ["愤怒", "自私", "虚荣"],
    "task": "你想分析事件中其他人物这么做的原因",
    "first_talk": "最近有些事搞得我头大。",
}


def english_profile(pid: str = "maya", **kw) -> Profile:
    base = dict(id=pid, name="Maya Chen", persona="Maya, 29, nurse on night shifts; blunt, tired.",
                background="Her manager moved her to nights without asking. Fitting replies calm her; "
                           "generic comfort makes her curt.",
                hidden_need="She wants someone to say she was right to push back.",
                need_category="not_at_fault", personality="avoidant", traits=["blunt", "tired", "proud"],
                first_line="So my schedule changed again.", language="en", source="builtin",
                extra={"note": "written by the team", "tags": ["work", "night"]})
    base.update(kw)
    return Profile(**base)


def jsonl(*records) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def test_rlver_line_maps_every_field():
    report = import_profiles(jsonl({**RLVER_LINE, "topic": "恋爱矛盾"}))
    assert report.ok and report.errors == []
    (p,) = report.profiles
    assert p.id == "p-1" and p.name == "王小云"
    assert p.persona == RLVER_LINE["player"]
    assert p.background == RLVER_LINE["scene"]  # hidden theme kept intact in the scene
    assert p.hidden_need == RLVER_LINE["task"] and p.need_category == "explain_others"
    assert p.personality == "negative" and p.traits == ["愤怒", "自私", "虚荣"]
    assert p.first_line == "最近有些事搞得我头大。"
    assert p.language == "zh" and p.source == "rlver"
    assert p.extra == {"topic": "恋爱矛盾"}


@pytest.mark.parametrize("zh,key", [("负面型", "negative"), ("被动型", "passive"), ("回避型", "avoidant")])
def test_personality_types(zh, key):
    (p,) = import_profiles(jsonl({**RLVER_LINE, "main_cha": zh})).profiles
    assert p.personality == key


def test_name_from_persona():
    assert name_from_persona("* 姓名：张晓枫\n* 年龄：30岁") == "张晓枫"
    assert name_from_persona("Name: Sam Ortiz\nAge: 40") == "Sam Ortiz"
    assert name_from_persona("no name here") == ""


def errors_of(data: bytes) -> list[tuple[int, str]]:
    report = import_profiles(data)
    return [(e.line, e.field) for e in report.errors]


def test_bad_lines_are_each_reported_with_line_and_field():
    lab_ok = english_profile().to_dict()
    data = b"".join([
        jsonl(RLVER_LINE),                                      # 1 ok
        b'{"id": "x", "player": \n',                            # 2 malformed JSON
        jsonl({k: v for k, v in RLVER_LINE.items() if k != "scene"} | {"id": "p-3"}),  # 3 missing scene
        jsonl({**RLVER_LINE, "id": "p-4", "main_cha": "开朗型"}),  # 4 unknown personality
        jsonl({**RLVER_LINE, "id": "p-5", "task": "你想吃火锅"}),   # 5 unknown need category
        jsonl({**RLVER_LINE, "id": "p-6", "cha_group": "愤怒"}),   # 6 wrong type
        jsonl({**RLVER_LINE, "id": "p-7", "scene": "x" * (MAX_FIELD_CHARS + 1)}),  # 7 too long
        jsonl(RLVER_LINE),                                      # 8 duplicate id
        b"[1, 2]\n",                                            # 9 not an object
        b"\n",                                                  # blank: skipped
        jsonl({**lab_ok, "need_category": "cheer_up"}),         # 11 lab: unknown category
        jsonl({k: v for k, v in lab_ok.items() if k != "name"}),  # 12 lab: missing name
        jsonl({**lab_ok, "id": "m2", "traits": [1, 2]}),        # 13 lab: wrong type
        "{\"id\": \"é\"}\n".encode("latin-1"),                  # 14 not UTF-8
        jsonl({"id": "q", "foo": 1}),                           # 15 neither format
        jsonl({**lab_ok, "id": "m3"}),                          # 16 ok
    ])
    report = import_profiles(data)
    assert [p.id for p in report.profiles] == ["p-1", "m3"]
    assert [(e.line, e.field) for e in report.errors] == [
        (2, "json"), (3, "scene"), (4, "main_cha"), (5, "task"), (6, "cha_group"), (7, "scene"), (8, "id"),
        (9, "json"), (11, "need_category"), (12, "name"), (13, "traits"), (14, "encoding"), (15, "line")]
    msgs = {e.line: e.reason for e in report.errors}
    assert "duplicate id 'p-1' (first on line 1)" in msgs[8]
    assert str(MAX_FIELD_CHARS) in msgs[7]
    assert "开朗型" in msgs[4]
    assert "not UTF-8" in msgs[14]
    assert not report.ok
    assert report.n_lines == 15
    assert str(LineError(3, "scene", "is required (missing)")) == "line 3: scene: is required (missing)"


def test_lab_overrides_in_rlver_lines_are_checked():
    report = import_profiles(jsonl({**RLVER_LINE, "lab": {"need_category": "hugs", "language": "fr"}},
                                   {**RLVER_LINE, "id": "p-2", "lab": {"colour": "red"}},
                                   {**RLVER_LINE, "id": "p-3", "lab": "en"},
                                   {**RLVER_LINE, "id": "p-4", "cha_group": ["x" * (MAX_FIELD_CHARS + 1)]}))
    assert [(e.line, e.field) for e in report.errors] == [
        (1, "lab.need_category"), (1, "lab.language"), (2, "lab"), (3, "lab"), (4, "cha_group")]
    assert "colour" in report.errors[2].reason


def test_empty_and_blank_files(tmp_path: Path):
    for data in (b"", b"\n  \n\n"):
        report = import_profiles(data)
        assert report.profiles == [] and [(e.line, e.field) for e in report.errors] == [(0, "file")]
        assert str(report.errors[0]) == "file: is empty: no lines to import"
    missing = import_profiles(tmp_path / "nope.jsonl")
    assert missing.errors[0].field == "file" and "cannot be read" in missing.errors[0].reason


def test_whole_file_in_another_encoding_names_every_line():
    data = jsonl(RLVER_LINE, {**RLVER_LINE, "id": "p-2"}).decode().encode("gb18030")
    report = import_profiles(data)
    assert report.profiles == []
    assert [(e.line, e.field) for e in report.errors] == [(1, "encoding"), (2, "encoding")]


def test_lab_roundtrip_keeps_every_field(tmp_path: Path):
    profiles = [english_profile(), english_profile("p2", explicit_goal="Vent about work.", difficulty="challenging",
                                                   first_line="", extra={})]
    path = tmp_path / "lab.jsonl"
    assert export_profiles(profiles, path, "lab") == 2
    back = import_profiles(path)
    assert back.ok and back.profiles == profiles


def test_rlver_roundtrip_of_english_profile_with_extra_keys(tmp_path: Path):
    p = english_profile(extra={"note": "x", "topic": "work", "player": "collides with an RLVER key"})
    record = profile_to_rlver(p)
    assert record["main_cha"] == "回避型" and record["task"] == p.hidden_need
    assert record["topic"] == "work"  # unknown keys go back to the top level
    assert record["lab"]["name"] == "Maya Chen" and record["lab"]["language"] == "en"
    path = tmp_path / "rlver.jsonl"
    export_profiles([p], path, "rlver")
    back = import_profiles(path)
    assert back.ok and back.profiles == [p]


def test_rlver_record_without_first_talk_roundtrips():
    line = {k: v for k, v in RLVER_LINE.items() if k != "first_talk"}
    (p,) = import_profiles(jsonl(line)).profiles
    assert p.first_line == ""
    assert profile_to_rlver(p) == line


def test_released_files_export_back_to_the_same_records(shared_data: Path):
    for name in ("test_profile.jsonl", "train_profile.jsonl"):
        path = shared_data / "rlver" / name
        report = import_profiles(path)
        original = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert report.ok and len(report.profiles) == len(original)
        assert {p.need_category for p in report.profiles} == {
            "dialectical_analysis", "useful_advice", "explain_others", "self_reflection", "sincere_praise",
            "just_listen", "deep_empathy", "not_at_fault"}
        assert all(p.name != p.id for p in report.profiles)
        assert [profile_to_rlver(p) for p in report.profiles] == original
        assert import_profiles(dumps_profiles(report.profiles, "lab").encode()).profiles == report.profiles


def test_unknown_export_format():
    with pytest.raises(ValueError, match="unknown format"):
        dumps_profiles([english_profile()], "csv")
