"""Hostile profile files: every case named per line and field, nothing half-written, bounds checked at
import and at save, and the nastiest valid records survive export, listing, rendering and a rollout."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator import __main__ as simulator_cli
from simulator.personas import store as persona_store
from simulator.personas.bounds import MAX_EXTRA_CHARS, MAX_EXTRA_DEPTH, MAX_INT, MAX_LINE_DEPTH
from simulator.personas.io import import_profiles
from simulator.personas.profile import Profile, ProfileError
from storage import Persona, session_scope

REPO = Path(__file__).resolve().parent.parent
LAB = dict(id="ok", name="Ok", persona="A teacher.", background="Her friend left.", hidden_need="To be heard.",
           need_category="just_listen", personality="passive")
RLVER = {"id": "r-ok", "player": "* 姓名：王小云", "scene": "场景", "main_cha": "负面型", "cha_group": ["愤怒"],
         "task": "你想分析事件中其他人物这么做的原因"}


def line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


def with_raw(record: dict, key: str, raw: str) -> str:
    """A JSON line whose `key` holds the raw JSON text `raw` (for values json.dumps cannot write)."""
    return line(record)[:-1] + f', "{key}": {raw}}}'


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (case, JSON line, field the error must name)
HOSTILE = [
    ("lab need_category list", line({**LAB, "id": "h1", "need_category": ["just_listen"]}), "need_category"),
    ("lab personality object", line({**LAB, "id": "h2", "personality": {"a": 1}}), "personality"),
    ("lab language list", line({**LAB, "id": "h3", "language": ["en"]}), "language"),
    ("lab difficulty object", line({**LAB, "id": "h4", "difficulty": {"x": []}}), "difficulty"),
    ("rlver lab.language list", line({**RLVER, "id": "h5", "lab": {"language": ["zh"]}}), "lab.language"),
    ("rlver lab.need_category object", line({**RLVER, "id": "h6", "lab": {"need_category": {"k": 1}}}),
     "lab.need_category"),
    ("lone surrogate in text", line({**LAB, "id": "h7"}).replace('"A teacher."', '"A \\ud800 teacher."'), "persona"),
    ("lone surrogate in unknown key", with_raw({**LAB, "id": "h8"}, "note", '"\\udfff"'), "note"),
    ("100,000 deep in a field", with_raw({**LAB, "id": "h9"}, "deep", nested(100_000)), "deep"),
    ("100,000 deep line", nested(100_000), "json"),
    ("900 deep in a field", with_raw({**LAB, "id": "h10"}, "deep", nested(900)), "deep"),
    ("5,001-digit integer", with_raw({**LAB, "id": "h11"}, "big", "9" * 5001), "big"),
    ("NaN", with_raw({**LAB, "id": "h12"}, "score", "NaN"), "score"),
    ("Infinity in an RLVER line", with_raw({**RLVER, "id": "h13"}, "score", "-Infinity"), "score"),
    ("float overflow", with_raw({**LAB, "id": "h14"}, "score", "1e999"), "score"),
    ("extra deeper than the profile bound", line({**LAB, "id": "h15", "extra": {"d": json.loads(nested(20))}}),
     "extra.d"),
    ("simulator key of the wrong type", line({**LAB, "id": "h16", "extra": {"events": 5}}), "extra.events"),
    ("extra too large", line({**LAB, "id": "h17", "notes": ["x" * 1000] * (MAX_EXTRA_CHARS // 1000 + 1)}), "notes"),
]


@pytest.mark.parametrize("case,text,field", HOSTILE, ids=[c for c, *_ in HOSTILE])
def test_hostile_line_is_named_and_nothing_is_half_written(store, tmp_path, capsys, case, text, field, db_url):
    path = tmp_path / "hostile.jsonl"
    path.write_text(line({**LAB, "id": "good"}) + "\n" + text + "\n", encoding="utf-8")
    assert simulator_cli.main(["personas", "import", str(path), "--db", db_url]) == 1
    err = capsys.readouterr().err
    assert f"line 2: {field}: " in err, err
    assert "Traceback" not in err and persona_store.count_profiles(store) == 0
    assert simulator_cli.main(["personas", "import", str(path), "--db", db_url, "--keep-valid"]) == 1
    assert f"line 2: {field}: " in capsys.readouterr().err
    assert [p.id for p in persona_store.list_profiles(store)] == ["good"]


def test_error_quotes_a_bounded_prefix_of_a_10_mb_value(tmp_path, capsys, db_url):
    path = tmp_path / "big.jsonl"
    huge = "x" * 10_000_000
    path.write_text("\n".join([line({**LAB, "id": "a", "need_category": huge}),
                               line({**RLVER, "main_cha": huge}), line({**LAB, "id": "c", "lab": {huge: 1}}),
                               line({**RLVER, "id": "d", "lab": {huge: 1}})]) + "\n")
    assert simulator_cli.main(["personas", "import", str(path), "--db", db_url]) == 1
    err = capsys.readouterr().err
    assert "line 1: need_category: unknown category 'xxx" in err and "line 2: main_cha: unknown personality" in err
    assert "line 4: lab: unknown field(s) xxx" in err
    assert len(err) < 3000


def test_bounds_are_checked_at_save(store):
    deep: object = "leaf"
    for _ in range(MAX_EXTRA_DEPTH):
        deep = [deep]
    with pytest.raises(ProfileError) as exc:
        persona_store.save_profile(store, Profile(**LAB, extra={"deep": deep}), create=True)
    assert exc.value.errors == {"extra.deep": f"nested more than {MAX_EXTRA_DEPTH} levels deep"}
    for bad, key in (({"n": MAX_INT + 1}, "extra.n"), ({"f": float("nan")}, "extra.f"), ({1: "x"}, "extra"),
                     ({"s": {1, 2}}, "extra.s"), ({"t": "\ud800"}, "extra.t")):
        with pytest.raises(ProfileError) as exc:
            persona_store.save_profile(store, Profile(**LAB, extra=bad), create=True)
        assert list(exc.value.errors) == [key], bad
    with pytest.raises(ProfileError, match="lone surrogate"):
        persona_store.save_profile(store, Profile(**{**LAB, "name": "A\udc00"}), create=True)
    assert persona_store.count_profiles(store) == 0


def nastiest() -> list[Profile]:
    """Valid profiles at every bound: deepest and largest extra, extreme numbers, astral, RTL, control and
    markup characters, longest fields, Chinese."""
    deep: object = {"leaf": [MAX_INT, -MAX_INT, 1.7976931348623157e308, -0.0, 5e-324, True, None, ""]}
    for _ in range(MAX_EXTRA_DEPTH - 3):
        deep = {"k": deep}
    weird = "𝔘𝔫𝔦 \u202eRTL\u202c <script>alert(1)</script> **md** | \x00\x1b[31m \t\r\n 😀"
    big_extra = {"pad": "y" * (MAX_EXTRA_CHARS - 10_000), "events": [weird, "I lost my job."],
                 "fit_examples": ["That sounds hard."], "miss_examples": [weird]}
    return [
        Profile(id="nasty-deep", name=weird, persona=weird * 50, background="B" * 20_000, hidden_need=weird,
                need_category="deep_empathy", personality="negative", traits=[weird, "x" * 20_000, "z"],
                first_line=weird, explicit_goal=weird, extra={"deep": deep, weird: weird}),
        Profile(id="nasty-big", name="Big", persona="p", background="b", hidden_need="h", need_category="just_listen",
                personality="avoidant", traits=[], first_line="Hi.", extra=big_extra),
        Profile(id="nasty-zh", name="王", persona="* 姓名：王小云", background="场景", hidden_need="你想分析事件中其他人物这么做的原因",
                need_category="explain_others", personality="passive", language="zh", difficulty="challenging",
                source="rlver", extra={"lab": {"x": 1}, "id": "hidden", "player": [1]}),
    ]


def strict_loads(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not standard JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("fmt", ["lab", "rlver"])
def test_nastiest_valid_records_survive_import_export_list_and_render(store, tmp_path, fmt, db_url):
    from app.services import persona_form
    from app.views import live_rollout, personas

    source = tmp_path / "nasty.jsonl"
    persona_store.seed_builtin(store, nastiest())
    persona_store.export_file(store, source, fmt=fmt)
    other = make_other_store(tmp_path)
    report = persona_store.import_file(other, source)
    assert report.errors == [] and report.stored == 3
    assert ([p.to_dict() for p in persona_store.list_profiles(other)]
            == [p.to_dict() for p in persona_store.list_profiles(store)])
    again = tmp_path / "again.jsonl"
    persona_store.export_file(other, again, fmt=fmt)
    assert again.read_bytes() == source.read_bytes()
    assert len([strict_loads(x) for x in again.read_text(encoding="utf-8").splitlines()]) == 3
    assert len(personas.rows(other)) == 3 and len(personas.rows(other, search="RTL")) == 1
    for p in persona_store.list_profiles(other):
        assert len(persona_form.form_values(p)) == len(persona_form.FIELDS)
    assert {pid for _, pid in live_rollout.persona_choices(other)} >= {"nasty-deep", "nasty-big", "nasty-zh"}
    other.dispose()


def make_other_store(tmp_path: Path):
    from storage import make_store

    return make_store(f"sqlite:///{tmp_path / 'other.db'}")


def test_export_refuses_a_row_stored_before_the_bounds_and_writes_no_bare_nan(store, tmp_path, capsys, db_url):
    persona_store.seed_builtin(store, nastiest()[1:2])
    with session_scope(store) as s:  # a row written by an older version, outside today's bounds
        s.add(persona_store._fill(Persona(), Profile(**{**LAB, "id": "legacy", "extra": {"x": float("nan")}})))
    out = tmp_path / "out.jsonl"
    assert simulator_cli.main(["personas", "export", str(out), "--db", db_url]) == 1
    err = capsys.readouterr().err
    assert "1 profile(s) are invalid and were not exported: 'legacy' (extra.x" in err and "Traceback" not in err
    assert not out.exists()


def test_web_import_reports_lines_like_the_cli_and_never_exception_text(store, tmp_path, monkeypatch):
    from app.render import md
    from app.views.personas import import_markdown

    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(text for _, text, _ in HOSTILE[:4]) + "\n")
    report = import_markdown(store, path, keep_valid=False, replace=False)
    for number, (_, _, field) in enumerate(HOSTILE[:4], start=1):
        assert f"- line {number}: {md(field)}: " in report
    assert "Nothing was stored" in report and persona_store.count_profiles(store) == 0
    assert "... and 2 more problem(s)" in import_markdown(store, path, False, False, max_listed=2)

    def explode(*_a, **_k):
        raise TypeError("unhashable type: 'list' at /secret/path")

    monkeypatch.setattr(persona_store, "import_file", explode)
    report = import_markdown(store, path, keep_valid=True, replace=False)
    assert "failed unexpectedly; nothing was stored" in report
    assert "unhashable" not in report and "/secret/path" not in report


@pytest.mark.model
def test_nastiest_profile_plays_a_rollout(store, db_url, tiny_model_dir):
    """A stored profile at the bounds runs through `python -m trainer rollout` with the offline simulator."""
    from helpers import run_in_process

    from storage.dialogues import load_dialogue

    persona_store.seed_builtin(store, nastiest()[:2])
    proc = run_in_process("trainer", "rollout", "--persona", "nasty-deep", "--persona", "nasty-big", "--policy",
                          str(tiny_model_dir), "--simulator", "offline", "--max-turns", "2", "--max-new-tokens", "8",
                          "--db", db_url, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert [r["persona"] for r in rows] == ["nasty-deep", "nasty-big"]
    for r in rows:
        assert r["status"] == "finished" and not r["error"], r
        assert load_dialogue(store, r["id"])["persona_snapshot"]["id"] == r["persona"]


def test_line_bound_is_above_what_an_export_nests():
    """A profile at MAX_EXTRA_DEPTH, exported in either format, is still within the line bound."""
    (p,) = [x for x in nastiest() if x.id == "nasty-deep"]
    for fmt in ("lab", "rlver"):
        from simulator.personas.io import dumps_profiles

        report = import_profiles(dumps_profiles([p], fmt).encode())
        assert report.errors == [] and MAX_LINE_DEPTH > MAX_EXTRA_DEPTH + 1
