"""The login of `python -m app --auth`: nothing from the store reaches a visitor who has not logged in
(checked over real HTTP against a populated store), and the password can stay out of the process list."""
from __future__ import annotations

import json
import re
import socket

import httpx
import pytest
from helpers import served_lab_with_login

from app.__main__ import parse_args
from app.trust import LOGIN_PAGE_PATHS, LOGIN_PAGE_PREFIXES

MARKERS = {"persona": "zq-secret-persona-7731", "job": "zq-secret-job-label", "collection": "zq-secret-collection"}


def populate(db_url: str) -> list[str]:
    """A store with a persona, a training job and a transcript collection carrying MARKERS; returns every
    persona id in it (the built-in ones included)."""
    from simulator.evaluation import transcripts
    from simulator.personas import store as persona_store
    from simulator.personas.profile import Profile
    from storage import make_store
    from trainer.jobs import queue as job_queue

    store = make_store(db_url)
    persona_store.seed_builtin(store)
    persona_store.save_profile(store, Profile(id=MARKERS["persona"], name="Zq Secret", persona="A teacher.",
                                              background="Her friend left.", hidden_need="To be heard.",
                                              need_category="just_listen", personality="passive"), create=True)
    job_queue.create_job(store, "train", {"steps": 1}, name=MARKERS["job"])
    record = {"id": "zq-record", "emo_point": 50, "history": [{"role": "user", "content": "hi"}]}
    assert transcripts.import_file(store, json.dumps(record).encode() + b"\n", collection=MARKERS["collection"]).ok
    ids = [p.id for p in persona_store.list_profiles(store)]
    store.dispose()
    return ids


def every_route_path() -> list[str]:
    """Every path the lab's server routes (Gradio's App over the lab's Blocks), parameters filled in."""
    import gradio as gr

    from app.lab import GuardedApp

    with gr.Blocks() as demo:
        gr.Markdown("x")
    app = GuardedApp.create_app(demo)
    paths = {re.sub(r"\{[^}]*\}", "x", getattr(r, "path", "")) for r in app.routes}
    return sorted(p for p in paths if p) + ["/openapi.json", "/docs", "/gradio_api/file=/etc/hostname"]


@pytest.fixture
def served_lab(tmp_path):
    """`python -m app` with a login (from a file) over a populated store: (base URL, persona ids)."""
    db_url = f"sqlite:///{tmp_path / 'lab.db'}"
    ids = populate(db_url)  # RLVER_LAB_HOME is this test's own folder (conftest), the app's too
    with served_lab_with_login(tmp_path, db_url, "s3cret-Passw0rd", "--max-upload-mb", "1") as (base, _, log):
        yield base, ids
    assert "s3cret-Passw0rd" not in log.read_text()


@pytest.mark.process
def test_anonymous_page_holds_nothing_from_the_store(served_lab):
    base, ids = served_lab
    with httpx.Client(base_url=base, timeout=60) as c:
        anonymous = c.get("/")
        assert anonymous.status_code == 200
        for kind, marker in MARKERS.items():
            assert marker not in anonymous.text, kind
        leaked = [pid for pid in ids if f'"{pid}"' in anonymous.text or f"'{pid}'" in anonymous.text]
        assert leaked == []
        # no API description, no defaults, no endpoint list in the login page; no route answers but its own
        assert "gradio_api_info = {};" in anonymous.text and "named_endpoints" not in anonymous.text
        assert "api_name" not in anonymous.text and "builtin:heldout" not in anonymous.text
        for path in every_route_path():
            if path in LOGIN_PAGE_PATHS or path.startswith(LOGIN_PAGE_PREFIXES):
                continue
            for method in ("GET", "POST"):
                assert c.request(method, path).status_code == 401, (method, path)
        port = int(base.rsplit(":", 1)[1])
        for twice in (b"Host: 127.0.0.1\r\nHost: attacker.example", b"Origin: http://127.0.0.1\r\nOrigin: http://a.example"):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
                first = b"" if twice.startswith(b"Host") else f"Host: 127.0.0.1:{port}\r\n".encode()
                raw.sendall(b"GET / HTTP/1.1\r\n" + first + twice + b"\r\nConnection: close\r\n\r\n")
                assert raw.recv(64).startswith(b"HTTP/1.1 403"), twice
        # logged in, the page is served in full (its lists are filled by load events, see the browser tests)
        assert c.post("/login", data={"username": "ana", "password": "s3cret-Passw0rd"}).status_code == 200
        assert c.get("/config").status_code == 200 and "live-personas" in c.get("/").text
        # uploads: within --max-upload-mb taken, above it refused
        small = c.post("/gradio_api/upload", files={"files": ("p.jsonl", b"{}\n" * 1000)})
        big = c.post("/gradio_api/upload", files={"files": ("p.jsonl", b"{}\n" * 700_000)})
        assert small.status_code == 200 and big.status_code == 413, (small.status_code, big.status_code)


def test_login_from_a_file_or_the_environment_and_the_help_warns(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RLVER_LAB_AUTH", raising=False)
    f = tmp_path / "auth"
    f.write_text("ana:pa:ss\n")
    assert parse_args(["--auth-file", str(f)]).auth == ("ana", "pa:ss")
    monkeypatch.setenv("RLVER_LAB_AUTH", "env-user:env-pass")
    assert parse_args([]).auth == ("env-user", "env-pass")
    with pytest.raises(SystemExit):
        parse_args(["--auth-file", str(tmp_path / "missing")])
    assert "cannot read --auth-file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "visible to other users in the process list" in help_text and "--auth-file" in help_text
