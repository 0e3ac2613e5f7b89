"""The front door of a real `python -m app --auth-file` (docs/security.md): forwarded headers change nothing
without --behind-proxy (the page's root, the client address the login back-off counts), concurrent and
header-rotating login tries cannot out-race the back-off, a Host is exactly one allowed name, and only the
lab's own origins get CORS."""
from __future__ import annotations

import threading

import httpx
import pytest
from helpers import served_lab_with_login, wait_for

from app.__main__ import parse_args
from app.trust import FREE_LOGIN_TRIES

PASSWORD = "s3cret-Passw0rd"


@pytest.fixture
def lab_with_login(tmp_path):
    with served_lab_with_login(tmp_path, f"sqlite:///{tmp_path / 'lab.db'}", PASSWORD) as (base, port, _):
        yield base, port


def login(base: str, user: str, password: str, forwarded_for: str = "") -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    with httpx.Client(base_url=base, timeout=180) as c:
        return c.post("/login", data={"username": user, "password": password}, headers=headers)


@pytest.mark.process
@pytest.mark.slow
def test_forwarded_headers_hosts_origins_and_a_login_that_cannot_be_out_raced(lab_with_login):
    base, port = lab_with_login
    with httpx.Client(base_url=base, timeout=120) as c:
        assert c.post("/login", data={"username": "ana", "password": PASSWORD}).status_code == 200
        # X-Forwarded-* without --behind-proxy: the root Gradio writes into its config stays the socket's
        forged = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "attacker.example", "X-Forwarded-For": "6.6.6.6"}
        config = c.get("/config", headers=forged)
        assert config.status_code == 200 and config.json()["root"] == base
        # a Host is exactly one allowed name[:port]; a list that starts with one is refused
        for host in (f"127.0.0.1:{port}, evil.example", f"127.0.0.1:{port} evil.example", "127.0.0.1:x"):
            assert c.get("/", headers={"Host": host}).status_code == 403, host
        # CORS with credentials only for the lab's own origins: another loopback address is another site
        for origin in (f"http://127.0.0.2:{port}", f"http://127.0.0.1:{port}, http://evil.example"):
            r = c.get("/config", headers={"Origin": origin})
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers, origin
        assert c.get("/config", headers={"Origin": base}).status_code == 200

    # FREE_LOGIN_TRIES + 2 wrong passwords, each from a "new" X-Forwarded-For and for a new account: all come
    # from this socket's address, so the back-off counts them together (nothing rotates it away)
    for i in range(FREE_LOGIN_TRIES + 2):
        assert login(base, f"guess{i}", "wrong", forwarded_for=f"10.9.0.{i}").status_code == 400
    # a burst of parallel wrong passwords, rotated headers and accounts: one is looked at (after its wait),
    # the others are refused while it is pending and told how long the back-off is now
    answers: list[httpx.Response] = []
    start = threading.Barrier(12)

    def guess(i: int) -> None:
        start.wait()
        answers.append(login(base, f"burst{i}", "wrong", forwarded_for=f"10.8.0.{i}"))

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    codes = sorted(r.status_code for r in answers)
    assert len(codes) == 12 and set(codes) <= {400, 429} and codes.count(400) <= 2, codes
    refused = [r for r in answers if r.status_code == 429]
    assert refused and all(int(r.headers["retry-after"]) >= 4 for r in refused), codes
    # the real user still gets in once the pending try is done (after the back-off's wait)
    assert wait_for(lambda: login(base, "ana", PASSWORD).status_code == 200, timeout=300, every=1.0)


def test_behind_proxy_names_the_proxies_it_trusts():
    assert parse_args([]).behind_proxy == ""
    assert parse_args(["--behind-proxy"]).behind_proxy == "127.0.0.1,::1"
    assert parse_args(["--behind-proxy", "10.0.0.5,10.1.0.0/16"]).behind_proxy == "10.0.0.5,10.1.0.0/16"
    with pytest.raises(SystemExit):
        parse_args(["--behind-proxy", "proxy.example"])
