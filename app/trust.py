"""The lab's front door (docs/security.md): a request whose Host is not a name the lab answers to, or that
comes from a page of another site (its Origin), gets 403 before Gradio sees it.

A web page on any site can make the browser send requests to 127.0.0.1:7860; with DNS rebinding its own
name (`attacker.example`) resolves to 127.0.0.1 and the browser calls that same-origin, sending
`Host: attacker.example:7860`. Answering only loopback names and the names the owner allowed
(`--allowed-host NAME`, implied by `--host NAME`) closes that door, as Jupyter does.

app.lab.launch puts HostOriginGuard in front of Gradio's whole middleware stack (its CORS included).
"""
from __future__ import annotations

import ipaddress
from typing import Any, Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
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

    def __init__(self, app: Any, hosts: Iterable[str] = ()):
        self.app, self.hosts = app, frozenset(hosts)

    def allowed(self, name: str) -> bool:
        return bool(name) and (is_loopback(name) or name in self.hosts)

    def refusal(self, headers: dict[str, str]) -> str:
        """'' when the request may go on, else what is wrong (for the log, never the page)."""
        if not self.allowed(host_name(headers.get("host", ""))):
            return "host"
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not self.allowed(host_name(parts.netloc)):
                return "origin"
        return ""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        if not self.refusal(headers):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return None
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(REFUSED)).encode())]})
        await send({"type": "http.response.body", "body": REFUSED})
        return None

