"""`python -m app`: loopback by default, a login required off loopback, the login enforced, never printed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import wait_for_http

from app.__main__ import is_loopback, parse_args

REPO = Path(__file__).resolve().parent.parent


def test_defaults_bind_loopback_without_login(monkeypatch):
    monkeypatch.delenv("RLVER_LAB_AUTH", raising=False)
    args = parse_args([])
    assert (args.host, args.port, args.auth, args.db) == ("127.0.0.1", 7860, None, None)
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.4", "example.org", "::"))


def test_non_loopback_needs_a_login(monkeypatch, capsys):
    monkeypatch.delenv("RLVER_LAB_AUTH", raising=False)
    with pytest.raises(SystemExit) as exc:
        parse_args(["--host", "0.0.0.0"])
    assert exc.value.code == 2
    assert "refusing to serve on 0.0.0.0 without a login" in capsys.readouterr().err
    assert parse_args(["--host", "0.0.0.0", "--auth", "ana:pa:ss"]).auth == ("ana", "pa:ss")
    assert parse_args(["--host", "0.0.0.0", "--insecure-no-auth"]).auth is None
    monkeypatch.setenv("RLVER_LAB_AUTH", "env-user:env-pass")
    assert parse_args(["--host", "0.0.0.0"]).auth == ("env-user", "env-pass")


def test_malformed_login_is_rejected(monkeypatch, capsys):
    monkeypatch.delenv("RLVER_LAB_AUTH", raising=False)
    for bad in ("nocolon", ":pw", "user:"):
        with pytest.raises(SystemExit):
            parse_args(["--auth", bad])
        assert "user:password" in capsys.readouterr().err


@pytest.mark.process
def test_served_lab_enforces_the_login_and_never_prints_it(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    secret = "s3cret-Passw0rd"
    env = dict(os.environ, RLVER_LAB_HOME=str(tmp_path / "home"), RLVER_LAB_AUTH=f"ana:{secret}",
               GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1")
    log = tmp_path / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db",
                                 f"sqlite:///{tmp_path / 'lab.db'}"], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base, proc, log)
        with httpx.Client(base_url=base, timeout=60) as c:
            assert c.get("/config").status_code == 401
            assert c.post("/login", data={"username": "ana", "password": "wrong"}).status_code >= 400
            assert c.post("/login", data={"username": "ana", "password": secret}).status_code == 200
            assert c.get("/config").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    text = log.read_text()
    assert "store ready" in text and "with a login" in text
    assert secret not in text


def test_rlver_lab_dispatches_to_each_modules_command_line(db_url, capsys):
    """`rlver-lab COMMAND` is `python -m app|trainer|simulator COMMAND`: the same parsers, the same exits."""
    from app import cli

    assert cli.main(["--help"]) == 0
    usage = capsys.readouterr().out
    assert all(c in usage for c in ("app", "train", "benchmark", "compare", "personas", "chat", "agreement"))
    assert cli.main([]) == 2 and "usage: rlver-lab" in capsys.readouterr().err
    assert cli.main(["no-such-command"]) == 2 and "unknown command 'no-such-command'" in capsys.readouterr().err
    assert cli.main(["personas", "list", "--db", db_url, "--json"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(listed) == 32  # the built-in library, seeded on first use as the app does
    assert cli.main(["jobs", "--db", db_url]) == 0
    # every command of both modules is routed: `--help` of each exits 0 (argparse's own exit)
    for command in (*cli.TRAINER, *cli.SIMULATOR):
        try:
            code = cli.main([command, "--help"])
        except SystemExit as done:
            code = done.code
        assert code == 0, command
    capsys.readouterr()
    assert cli.main(["rollout", "--persona", "nobody", "--db", db_url]) == 2
    assert "nobody" in capsys.readouterr().err


@pytest.mark.process
def test_the_installed_console_command_runs():
    """`make setup` installs the lab (`pip install -e .`): its `rlver-lab` sits beside the venv's python."""
    script = Path(sys.executable).parent / "rlver-lab"
    assert script.exists(), f"{script} is missing: run `make setup` (pip install -e .)"
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120, cwd="/")
    assert r.returncode == 0 and "rlver-lab COMMAND" in r.stdout, r.stderr[-2000:]
