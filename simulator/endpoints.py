"""The owner's endpoints: the OpenAI-compatible servers a web-started run may call, and the key of each.

The owner names them when starting the lab (`python -m app --endpoint NAME=URL[,KEY_VAR]`, repeatable, or
`--endpoints-file PATH`); OPENAI_BASE_URL and OPENAI_API_KEY form the endpoint `default` unless the owner
names one so. A key is named by its environment variable and read when a client is made, in the process
that makes the call: it is never in a flag, the store, a page or RLVER_LAB_ACCESS. From the web a caller
picks an endpoint by name (or gives the URL of one); any other URL is refused unless the owner allowed
free URLs (`--allow-free-urls`), and then it gets no key at all. Web-started clients follow no redirects.
The command line keeps free URLs and keys (OPENAI_API_KEY or the key it hands over).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "default"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_VAR = "OPENAI_API_KEY"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
KEY_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
ENDPOINT_FORM = "NAME=URL[,KEY_VAR]"


class EndpointError(ValueError):
    """An owner's endpoint setting that cannot be read (said at startup, naming the setting)."""


@dataclass(frozen=True)
class Endpoint:
    """One owner's endpoint: its name, base URL and the environment variable holding its key ('' = none)."""

    name: str
    url: str
    key_var: str = ""

    def key(self) -> str:
        """The key, read from this process's environment now ('' when none or unset)."""
        return os.environ.get(self.key_var, "") if self.key_var else ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "url": self.url, "key_var": self.key_var}


@dataclass(frozen=True)
class Route:
    """Where one client sends its requests and with which key; `shown` is what messages name (the endpoint's
    name for an owner's endpoint, else the URL's host). `owners` is False for a URL a web caller typed
    (--allow-free-urls): its client gets nothing of the owner's configuration, and its answers' text is not
    shown (simulator.llm.openai_client.openai_client, error_detail)."""

    url: str
    api_key: str = field(default="", repr=False)
    shown: str = ""
    follow_redirects: bool = True
    owners: bool = True


def _same_url(a: str, b: str) -> bool:
    return a.strip().rstrip("/").lower() == b.strip().rstrip("/").lower()


def is_url(text: str) -> bool:
    """An http(s) URL with a host."""
    parts = urlsplit(text.strip())
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def default_endpoint(env: Any = None) -> Endpoint:
    """`default`: OPENAI_BASE_URL (else OpenAI's own API) with the key in OPENAI_API_KEY."""
    env = os.environ if env is None else env
    return Endpoint(DEFAULT_ENDPOINT, (env.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_BASE_URL,
                    DEFAULT_KEY_VAR)


def parse_endpoint(text: str) -> Endpoint:
    """An Endpoint from `NAME=URL[,KEY_VAR]` (EndpointError naming what is wrong)."""
    name, sep, rest = str(text).partition("=")
    url, _, key_var = rest.partition(",")
    name, url, key_var = name.strip(), url.strip(), key_var.strip()
    if not sep or not NAME_RE.match(name):
        raise EndpointError(f"--endpoint {text!r}: must be {ENDPOINT_FORM}, NAME of letters, digits, '.', '-', '_'")
    if not is_url(url):
        raise EndpointError(f"--endpoint {name}: URL must start with http:// or https://")
    if key_var and not KEY_VAR_RE.match(key_var):
        raise EndpointError(f"--endpoint {name}: KEY_VAR must be an environment variable's name")
    return Endpoint(name, url, key_var)


def read_endpoints_file(path: Union[str, Path]) -> list[Endpoint]:
    """The endpoints of a YAML file: a mapping NAME -> URL or NAME -> {url: URL, key_var: VAR}."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise EndpointError(f"--endpoints-file {path}: cannot be read ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise EndpointError(f"--endpoints-file {path}: must map NAME to URL or to {{url: URL, key_var: VAR}}")
    out = []
    for name, value in data.items():
        if isinstance(value, dict):
            unknown = set(value) - {"url", "key_var"}
            if unknown:
                raise EndpointError(f"--endpoints-file {path}: {name}: unknown setting {sorted(unknown)[0]!r}")
            value = f"{value.get('url') or ''},{value.get('key_var') or ''}"
        out.append(parse_endpoint(f"{name}={value}"))
    return out


def owner_endpoints(given: list[Endpoint], env: Any = None) -> tuple[Endpoint, ...]:
    """The owner's endpoints: `default` first (the owner's own, or OPENAI_BASE_URL/OPENAI_API_KEY), then the
    rest in the order given; EndpointError on a name given twice."""
    names = [e.name for e in given]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise EndpointError(f"--endpoint {twice[0]}: named twice")
    default = next((e for e in given if e.name == DEFAULT_ENDPOINT), None) or default_endpoint(env)
    return (default,) + tuple(e for e in given if e.name != DEFAULT_ENDPOINT)


def refused_text(names: list[str], free_urls: bool) -> str:
    listed = ", ".join(names) or DEFAULT_ENDPOINT
    return (f"names none of this lab's endpoints: pick one of {listed}"
            + ("" if free_urls else " (the owner names endpoints with --endpoint; URLs typed in the page are "
                                    "off unless the owner starts the lab with --allow-free-urls)"))


def web_route(field_name: str, text: str, endpoints: tuple[Endpoint, ...], free_urls: bool) -> Route:
    """The route of a web caller's endpoint field: an owner's endpoint by name or URL ('' = default), with its
    key; a free URL (only when allowed) without any key. ValueError(problem) otherwise."""
    text = (text or "").strip()
    pick = text or DEFAULT_ENDPOINT
    for e in endpoints:
        if e.name == pick or _same_url(e.url, pick):
            return Route(e.url, e.key(), e.name, follow_redirects=False)
    if free_urls and is_url(text):
        from simulator.llm.hashing import endpoint_host

        return Route(text, "", endpoint_host(text), follow_redirects=False, owners=False)
    raise ValueError(refused_text([e.name for e in endpoints], free_urls))


def command_line_route(text: str, api_key: Any = None) -> Route:
    """The command line's route: the URL given (else OPENAI_BASE_URL, else OpenAI's API) with the key handed
    over (else OPENAI_API_KEY)."""
    from simulator.llm.hashing import endpoint_host

    text = "" if (text or "").strip() == DEFAULT_ENDPOINT else (text or "").strip()
    url = text or (os.environ.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_BASE_URL
    key = api_key if api_key is not None else os.environ.get(DEFAULT_KEY_VAR, "")
    return Route(url, key or "", endpoint_host(url))
