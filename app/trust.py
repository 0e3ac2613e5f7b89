"""The lab's front door (docs/security.md): a request whose Host is not a name the lab answers to, or that
comes from a page of another site (its Origin), gets 403 before Gradio sees it.

A web page on any site can make the browser send requests to 127.0.0.1:7860; with DNS rebinding its own
name (`attacker.example`) resolves to 127.0.0.1 and the browser calls that same-origin, sending
`Host: attacker.example:7860`. Answering only loopback names and the names the owner allowed
(`--allowed-host NAME`, implied by `--host NAME`) closes that door, as Jupyter does.

More than one Host or Origin header is refused too (the guard and Gradio could read different ones), a page
of the lab's own loopback name on another port is another site, and X-Forwarded-* / Forwarded headers are
dropped unless the owner says the lab is behind a proxy (--behind-proxy): otherwise any caller could rewrite
the root URL Gradio puts in its config.

With a login, `LoginGate` answers nothing but the login page and its static files before the login: the page
itself carries no API description (Gradio embeds one in every page, login page included), and every other
route, /config and /openapi.json among them, is 401.

app.lab.launch puts HostOriginGuard (then LoginGate) in front of Gradio's whole middleware stack (its CORS
included).
"""
from __future__ import annotations

import asyncio
import math
import ipaddress
import re
from typing import Any, Callable, Iterable, Optional
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
_FORWARDED = re.compile(r"^(x-forwarded-|forwarded$|x-real-ip$)", re.I)
LOOPBACK_ORIGINS = ("127.0.0.1", "::1", "localhost")
# a Host (or an Origin's host) is exactly one name or address and an optional port: no lists, no spaces
ONE_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9][A-Za-z0-9.\-_]*)(:[0-9]{1,5})?$")
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")
REFUSED = (b"RLVER Lab answers only to its own host names (loopback, or a name its owner allowed with "
           b"--allowed-host) and to pages of its own site.\n")


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The name of a Host header value or an origin's netloc, lower-cased, without its port."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:7860
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names the lab answers to besides loopback: the owner's --allowed-host names and --host itself
    when it names one address or name (not a wildcard)."""
    names = {host_name(h) for h in extra if h and h.strip()}
    if host.strip() not in WILDCARD_HOSTS:
        names.add(host_name(host))
    return frozenset(names)


class HostOriginGuard:
    """ASGI middleware: 403 for a Host that is not loopback or allowed, and for an Origin of another site."""

    def __init__(self, app: Any, hosts: Iterable[str] = (), behind_proxy: bool = False):
        self.app, self.hosts, self.behind_proxy = app, frozenset(hosts), behind_proxy

    def allowed(self, name: str) -> bool:
        return bool(name) and (is_loopback(name) or name in self.hosts)

    def refusal(self, headers: dict[str, str]) -> str:
        """'' when the request may go on, else what is wrong (for the log, never the page). An Origin is the
        lab's own when its name is one the lab answers to and, for a loopback name, its port is the one the
        request came to (a page of another local service is another site); another name the owner allowed may
        come with any port (a proxy in front)."""
        host = headers.get("host", "")
        if not ONE_HOST.match(host) or not self.allowed(host_name(host)):
            return "host"
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            name = host_name(parts.netloc)
            if parts.scheme not in ("http", "https") or not ONE_HOST.match(parts.netloc) or not self.allowed(name):
                return "origin"
            try:
                origin_port = parts.port or (443 if parts.scheme == "https" else 80)
            except ValueError:
                return "origin"
            # a loopback page is the lab's own only under the name and port the request came to, or under
            # one of the usual loopback names (127.0.0.2 is another address, so another site)
            if is_loopback(name) and (origin_port != _port(host, parts.scheme)
                                      or (name not in LOOPBACK_ORIGINS and name != host_name(host))):
                return "origin"
        return ""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        raw = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers") or ()]
        headers = dict(raw)
        names = [k for k, _ in raw]
        twice = names.count("host") > 1 or names.count("origin") > 1
        if not twice and not self.refusal(headers):
            if not self.behind_proxy:
                kept = [(k, v) for k, v in scope.get("headers") or () if not _FORWARDED.match(k.decode("latin-1"))]
                scope = {**scope, "headers": kept}
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return None
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(REFUSED)).encode())]})
        await send({"type": "http.response.body", "body": REFUSED})
        return None


def _port(host: str, scheme: str) -> int:
    """The port of a Host header value (the scheme's default when it names none)."""
    value = host.strip()
    tail = value.rsplit("]", 1)[-1] if value.startswith("[") else value
    if tail.count(":") == 1 and tail.rsplit(":", 1)[1].isdigit():
        return int(tail.rsplit(":", 1)[1])
    return 443 if scheme == "https" else 80


# what a browser needs to show the login page (and to log in) before the login
LOGIN_PAGE_PATHS = ("/", "/login", "/login/", "/logout", "/favicon.ico", "/manifest.json", "/theme.css",
                    "/robots.txt", "/gradio_api/theme.css", "/gradio_api/startup-events")  # the last: asked by launch
LOGIN_PAGE_PREFIXES = ("/assets/", "/static/", "/svelte/", "/pwa_icon")
_API_INFO = re.compile(rb"(gradio_api_info\s*=\s*)\{.*?\}(\s*;\s*</script>)", re.S)
NOT_LOGGED_IN = b'{"detail":"Not authenticated"}'


# Login tries (docs/security.md): failed tries are counted per client address and per account *before* the
# password is checked, one try per client and per account is looked at at a time (a try arriving while another
# is pending is refused with 429), and after FREE_LOGIN_TRIES failures each further try waits 1, 2, 4 ... s (at
# most MAX_LOGIN_WAIT_S) before it is looked at; a successful login clears both counts. Counting before the
# check keeps concurrent tries from out-racing the delay: a try's delay is decided, and the next try's count
# raised, before its answer is known, and a second try cannot start while the first waits.
FREE_LOGIN_TRIES = 3  # failed logins from one client, or for one account, before each further try waits
MAX_LOGIN_WAIT_S = 30.0


class LoginThrottle:
    """Per-key (`client:ADDRESS`, `account:NAME`) failure counts and pending tries."""

    def __init__(self) -> None:
        self.failures: dict[str, int] = {}
        self.pending: set[str] = set()

    def wait_s(self, keys: Iterable[str]) -> float:
        """How long a try under `keys` waits before it is looked at (the longest of its keys)."""
        extra = max((self.failures.get(k, 0) for k in keys), default=0) - FREE_LOGIN_TRIES
        return 0.0 if extra < 0 else min(2.0 ** extra, MAX_LOGIN_WAIT_S)

    def begin(self, keys: list[str]) -> Optional[float]:
        """Start a try: None when another try under one of `keys` is pending (refuse it), else the seconds
        it must wait. The try is counted as failed now; `succeeded` takes that back."""
        if any(k in self.pending for k in keys):
            return None
        wait = self.wait_s(keys)
        self.pending.update(keys)
        for key in keys:
            self.failures[key] = self.failures.get(key, 0) + 1
        return wait

    def succeeded(self, keys: list[str]) -> None:
        for key in keys:
            self.failures.pop(key, None)

    def end(self, keys: list[str]) -> None:
        self.pending.difference_update(keys)

    def retry_after_s(self, keys: list[str]) -> int:
        """What a refused try is told to wait (the next try's delay, at least 1 s)."""
        return max(1, math.ceil(self.wait_s(keys)))


def login_keys(client: str, account: str) -> list[str]:
    return [f"client:{client}", f"account:{account.strip()}"]


MAX_LOGIN_BODY = 64 * 1024  # a login form is a user name and a password
TOO_MANY_TRIES = b'{"detail":"Another login try for this client or account is being looked at; try again later"}'


class LoginGate:
    """ASGI middleware for a lab with a login: before it, only LOGIN_PAGE_PATHS and LOGIN_PAGE_PREFIXES
    answer (401 for everything else, websockets closed), and the login page's embedded API description is
    emptied. `logged_in(cookies)` says whether a request's cookies hold a live login (Gradio's tokens).
    Login tries are counted and slowed per client address (the socket's, or the trusted proxy's report with
    --behind-proxy) and per account before the password is checked (LoginThrottle)."""

    def __init__(self, app: Any, logged_in: Callable[[dict[str, str]], bool]):
        self.app, self.logged_in = app, logged_in
        self.throttle = LoginThrottle()
        self.sleep: Callable[[float], Any] = asyncio.sleep

    async def _login(self, scope: dict, receive: Any, send: Any) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_LOGIN_BODY:
                return await _answer(send, 413, b'{"detail":"login form too large"}')
        keys = login_keys((scope.get("client") or ("?",))[0], await _form_user(scope, body))
        wait = self.throttle.begin(keys)
        if wait is None:
            return await _answer(send, 429, TOO_MANY_TRIES,
                                 [(b"retry-after", str(self.throttle.retry_after_s(keys)).encode())])
        try:
            if wait:
                await self.sleep(wait)

            async def counted(message: dict) -> None:
                if message["type"] == "http.response.start" and message.get("status") == 200:
                    self.throttle.succeeded(keys)
                await send(message)

            return await self.app(scope, _replay(body), counted)
        finally:
            self.throttle.end(keys)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self.logged_in(_cookies(scope)):
            return await self.app(scope, receive, send)
        path = scope.get("path") or "/"
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return None
        if path == "/":
            return await self.app(scope, receive, _without_api_info(send))
        if path in ("/login", "/login/") and scope.get("method") == "POST":
            return await self._login(scope, receive, send)
        if path in LOGIN_PAGE_PATHS or path.startswith(LOGIN_PAGE_PREFIXES):
            return await self.app(scope, receive, send)
        return await _answer(send, 401, NOT_LOGGED_IN)


async def _answer(send: Any, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes) -> Any:
    """A `receive` that hands the app the body already read, then waits for the client to go away."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    return receive


async def _form_user(scope: dict, body: bytes) -> str:
    """The user name a login form names ('' when it names none or cannot be read)."""
    from starlette.requests import Request

    try:
        form = await Request({**scope, "type": "http"}, _replay(body)).form()
        return str(form.get("username") or "")
    except Exception:  # a malformed form: Gradio answers it; the try still counts for its client
        return ""


def _cookies(scope: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers") or ():
        if key.lower() == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name, sep, val = part.strip().partition("=")
                if sep:
                    out[name] = val
    return out


def _without_api_info(send: Any) -> Any:
    """A `send` that empties `gradio_api_info = {...}` in an uncompressed HTML body (held until complete)."""
    start: dict[str, Any] = {}
    body: list[bytes] = []

    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers") or ())
            if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                start.update(message)
                return
        elif message["type"] == "http.response.body" and start:
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            page = _API_INFO.sub(rb"\1{}\2", b"".join(body))
            headers = [(k, v) for k, v in start.get("headers") or () if k != b"content-length"]
            await send({**start, "headers": headers + [(b"content-length", str(len(page)).encode())]})
            message = {"type": "http.response.body", "body": page}
        await send(message)

    return wrapped
