"""Terminal chat driven through stdin: stored turns, bad input, endpoint failures."""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_sim_profile

from simulator.cli import chat as chat_cli
from simulator.personas.builtin import BUILTIN_PROFILES
from storage import make_store
from storage.dialogues import load_dialogue
from storage.models import Dialogue
from testkit.scripted_server import start_server

REPO = Path(__file__).resolve().parent.parent
PERSONA = BUILTIN_PROFILES[0].id  # built-in profiles have a scripted first line


def chat(monkeypatch, capsys, db_url, lines, *args):
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    code = chat_cli.main(["--db", db_url, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def dialogues(db_url):
    from storage.db import read_scope

    store = make_store(db_url)
    with read_scope(store) as s:
        ids = [d.id for d in s.query(Dialogue).order_by(Dialogue.id)]
    return [load_dialogue(store, i) for i in ids]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with start_server(api_key="test-key", models=["sim"]) as s:
        yield s


@pytest.mark.model
def test_offline_chat_is_stored_with_inner_thoughts(monkeypatch, capsys, db_url):
    code, out, _ = chat(monkeypatch, capsys, db_url,
                        ["That sounds like a lot to carry, with your mom and Dan both needing you.", "", "/quit"],
                        "--persona", PERSONA)
    assert code == 0
    assert "not comparable with the Sentient benchmark" in out and "[emotion 40 (B)]" in out
    assert "need fit" in out and "need_fit" in out and "empty reply: type a message" in out
    [d] = dialogues(db_url)
    assert d["status"] == "cancelled" and d["source"] == "chat" and d["persona_id"] == PERSONA
    assert d["fingerprint_hash"] and d["simulator_fingerprint"]["backend"] == "offline"
    roles = [t["role"] for t in d["turns"]]
    assert roles == ["user", "assistant", "user"]  # the empty line was not sent
    last = d["turns"][-1]
    assert last["emotion"] is not None and last["inner"]["components"] and last["delta"] == last["emotion"] - 40


def test_chat_through_an_endpoint_to_the_turn_cap(monkeypatch, capsys, db_url, server):
    lines = ["I hear you, that sounds hard."] * 10
    code, out, _ = chat(monkeypatch, capsys, db_url, lines, "--persona", PERSONA, "--backend", "openai",
                        "--model", "sim", "--base-url", server.base_url, "--quiet")
    assert code == 0 and "dialogue ended: max_turns" in out
    [d] = dialogues(db_url)
    assert d["status"] == "finished" and d["outcome"] == "max_turns" and d["n_turns"] == 10
    assert d["simulator_fingerprint"]["model"] == "sim" and "test-key" not in repr(d)


@pytest.mark.parametrize("case", ["wrong_key", "unknown_model", "refused"])
def test_endpoint_failures_mark_the_dialogue(monkeypatch, capsys, db_url, server, case):
    args = ["--persona", PERSONA, "--backend", "openai", "--model", "sim", "--base-url", server.base_url]
    expected = {"wrong_key": "rejected the API key (HTTP 401)", "unknown_model": "does not know model 'other'",
                "refused": "cannot connect to the simulator endpoint"}[case]
    if case == "wrong_key":
        monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    elif case == "unknown_model":
        args[args.index("sim")] = "other"
    else:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args[args.index(server.base_url)] = f"http://127.0.0.1:{port}/v1"
    code, out, _ = chat(monkeypatch, capsys, db_url, ["Hello, I'm listening."], *args)
    assert code == 1 and expected in out and "marked failed" in out
    [d] = dialogues(db_url)
    assert d["status"] == "failed" and d["outcome"] == "error" and expected in d["error"]
    assert "wrong" not in d["error"] or case != "wrong_key"


def test_one_megabyte_reply(monkeypatch, capsys, db_url, server):
    code, out, _ = chat(monkeypatch, capsys, db_url, ["x" * 1_000_000], "--persona", PERSONA, "--backend",
                        "openai", "--model", "sim", "--base-url", server.base_url)
    assert code == 1 and "policy reply is 1000000 characters" in out
    [d] = dialogues(db_url)
    assert d["status"] == "failed" and "the limit is" in d["error"] and server.calls == 0


def test_unknown_persona(monkeypatch, capsys, db_url):
    code, _, err = chat(monkeypatch, capsys, db_url, [], "--persona", "nobody-here")
    assert code == 2 and "unknown persona id(s): nobody-here" in err and "en-01-maya-chen" in err
    assert dialogues(db_url) == []


def test_chinese_persona_on_offline_backend(monkeypatch, capsys, db_url):
    from simulator.personas.store import save_profile

    save_profile(make_store(db_url), make_sim_profile(pid="zh-test", language="zh"), create=True)
    code, _, err = chat(monkeypatch, capsys, db_url, [], "--persona", "zh-test")
    assert code == 2 and "English profiles only" in err


@pytest.mark.process
def test_real_command_line(tmp_path, server):
    """`python -m simulator chat` as a person runs it, through the simulator's command-line entry."""
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    env = dict(os.environ, OPENAI_API_KEY="test-key", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "simulator", "chat", "--persona", PERSONA, "--backend", "openai",
                           "--model", "sim", "--base-url", server.base_url, "--db", db],
                          input="It makes sense that you feel torn.\n/quit\n", capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "you> " in proc.stdout and "stored as dialogue 1" in proc.stdout
    [d] = dialogues(db)
    assert d["status"] == "cancelled" and len(d["turns"]) == 3
