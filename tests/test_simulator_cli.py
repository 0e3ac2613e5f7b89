"""`python -m simulator ...` as users run it: real processes, real files, a real SQLite store."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import __main__ as simulator_cli
from simulator.personas.profile import Profile

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, env_db: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if env_db:
        env["RLVER_LAB_DB"] = env_db
    return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def profile_line(pid: str, **kw) -> str:
    p = dict(id=pid, name=pid.title(), persona="A retired bus driver who talks in short sentences.",
             background="His son stopped calling; replies that notice his pride help.",
             hidden_need="Wants praise for raising his son alone.", need_category="sincere_praise",
             personality="negative", traits=["proud", "gruff", "lonely"], language="en")
    p.update(kw)
    return json.dumps(Profile(**p).to_dict()) + "\n"


@pytest.mark.process
@pytest.mark.parametrize("name,want", [("gpt-4.1", (68.2, 35, 13)), ("qwen2.5-72b", (19.1, 4, 70))])
def test_score_published_files(shared_data: Path, name: str, want):
    path = shared_data / "sage" / f"{name}_result.jsonl"
    out = run("score", str(path), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["score"], data["success"], data["failure"], data["n"]) == (*want, 100)
    assert data["ci_low"] < data["score"] < data["ci_high"]
    text = run("score", str(path))
    assert text.returncode == 0
    assert f"score {want[0]}  success {want[1]} " in text.stdout and "95% CI [" in text.stdout


@pytest.mark.process
def test_score_bad_file_names_each_line(tmp_path: Path):
    bad = tmp_path / "bad_result.jsonl"
    bad.write_text('{"id": "a", "emo_point": 50, "history": []}\n{nope\n{"id": "b", "history": []}\n')
    out = run("score", str(bad))
    assert out.returncode == 1 and out.stdout == ""
    assert "line 2: json: malformed JSON" in out.stderr and "line 3: emo_point: is required" in out.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = run("score", str(empty), "--json")
    assert out.returncode == 1 and "empty" in out.stderr


@pytest.mark.process
def test_personas_import_export(tmp_path: Path):
    db = f"sqlite:///{tmp_path / 'lab.db'}"
    good = tmp_path / "good.jsonl"
    good.write_text(profile_line("abe") + profile_line("bea", personality="avoidant"))
    out = run("personas", "import", str(good), "--db", db)
    assert out.returncode == 0, out.stderr
    assert "imported 2 profile(s)" in out.stdout
    again = run("personas", "import", str(good), "--db", db)
    assert again.returncode == 1 and "line 1: id: 'abe' is already in the store" in again.stderr
    assert run("personas", "import", str(good), "--db", db, "--replace").returncode == 0

    bad = tmp_path / "bad.jsonl"
    bad.write_text(profile_line("cal") + profile_line("dee", need_category="hugs") + "not json\n")
    out = run("personas", "import", str(bad), "--db", db)
    assert out.returncode == 1
    assert "line 2: need_category: unknown category 'hugs'" in out.stderr and "line 3: json:" in out.stderr
    assert "nothing stored" in out.stderr
    out = run("personas", "import", str(bad), "--db", db, "--keep-valid")
    assert out.returncode == 1 and "stored the valid lines" in out.stderr

    exported = tmp_path / "out.jsonl"
    out = run("personas", "export", str(exported), "--format", "rlver", "--db", db)
    assert out.returncode == 0 and "exported 3 profile(s)" in out.stdout
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["abe", "bea", "cal"] and records[1]["main_cha"] == "回避型"


@pytest.mark.process
def test_db_from_environment(tmp_path: Path):
    db = f"sqlite:///{tmp_path / 'env.db'}"
    f = tmp_path / "p.jsonl"
    f.write_text(profile_line("eve"))
    assert run("personas", "import", str(f), env_db=db).returncode == 0
    assert (tmp_path / "env.db").exists()
    out = run("personas", "export", str(tmp_path / "o.jsonl"), env_db=db)
    assert "exported 1 profile(s)" in out.stdout


def test_transcripts_import_in_process(tmp_path: Path, capsys, shared_data: Path):
    db = f"sqlite:///{tmp_path / 'lab.db'}"
    path = str(shared_data / "sage" / "gpt-4.1_result.jsonl")
    assert simulator_cli.main(["transcripts", "import", path, "--db", db]) == 0
    first = capsys.readouterr().out
    assert "100 dialogue(s) imported" in first and "score 68.2" in first
    assert simulator_cli.main(["transcripts", "import", path, "--db", db]) == 0
    assert "100 already in the store" in capsys.readouterr().out


def test_plugin_registry(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setitem(simulator_cli.PLUGINS, "probe", ("lab_test_missing_plugin", "x"))
    assert simulator_cli.main(["probe"]) == 2
    assert "'probe' is unavailable" in capsys.readouterr().err
    (tmp_path / "lab_test_plugin.py").write_text(
        "def add_arguments(parser):\n    parser.add_argument('--times', type=int, default=1)\n"
        "def run(args):\n    print('ran', args.times)\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(simulator_cli.PLUGINS, "chat", ("lab_test_plugin", "y"))
    assert simulator_cli.main(["chat", "--times", "3"]) == 7
    assert capsys.readouterr().out == "ran 3\n"
    (tmp_path / "lab_test_broken.py").write_text("import lab_test_no_such_dependency\n")
    monkeypatch.setitem(simulator_cli.PLUGINS, "chat", ("lab_test_broken", "z"))
    with pytest.raises(ModuleNotFoundError):  # a broken plugin is not reported as "unavailable"
        simulator_cli.main(["chat"])


@pytest.mark.process
def test_fresh_store_export_and_list_show_the_built_in_personas(tmp_path: Path, capsys):
    from simulator.personas.builtin import BUILTIN_PROFILES
    from simulator.personas.io import import_profiles

    db = f"sqlite:///{tmp_path / 'fresh.db'}"
    out = run("personas", "export", str(tmp_path / "all.jsonl"), "--db", db)
    assert out.returncode == 0 and f"exported {len(BUILTIN_PROFILES)} profile(s)" in out.stdout
    exported = import_profiles(tmp_path / "all.jsonl")
    assert exported.errors == [] and sorted(exported.profiles, key=lambda p: p.id) == BUILTIN_PROFILES

    assert simulator_cli.main(["personas", "list", "--set", "builtin:heldout", "--json", "--db", db]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 8 and all(r["split"] == "heldout" for r in rows)
    assert rows[4] == {"id": "en-20-ahmed-yilmaz", "name": "Ahmed Yılmaz", "need_category": "sincere_praise",
                       "personality": "negative", "language": "en", "split": "heldout"}
    assert simulator_cli.main(["personas", "list", "--db", f"sqlite:///{tmp_path / 'other.db'}"]) == 0  # seeds it too
    listed = capsys.readouterr()
    assert len(listed.out.splitlines()) == len(BUILTIN_PROFILES) and "32 persona(s) in the store" in listed.err
    assert "en-32-zoe-kim" in listed.out and "not_at_fault" in listed.out
    assert simulator_cli.main(["personas", "list", "--set", "builtin:everyone", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "--set: unknown persona set 'builtin:everyone'" in err and "builtin:heldout" in err


def test_import_into_a_fresh_store_stores_only_the_file(tmp_path: Path, capsys):
    db = f"sqlite:///{tmp_path / 'fresh.db'}"
    f = tmp_path / "p.jsonl"
    f.write_text(profile_line("eve"))
    assert simulator_cli.main(["personas", "import", str(f), "--db", db]) == 0
    assert simulator_cli.main(["personas", "list", "--json", "--db", db]) == 0  # not empty: nothing seeded
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines() if line.startswith("{")] == ["eve"]
