"""Who is asking, and what the lab's owner allowed: the one place that decides whether a spec may run
outside code or name a path (docs/security.md).

Three callers: the command line (the machine's owner: anything goes), a web visitor (no login) and a web
user (logged in). From the web, `python:` simulator and reward specs run only when the owner started the
lab with --allow-outside-code, every path a spec or field names must resolve (symlinks followed) inside
the lab home, the checkout's data folders or a root given with --allow-path, and model requests go only to
the owner's endpoints, each with its own key (`route`, simulator.endpoints). Files a visitor uploaded are
never importable, whoever asks.

The app builds its Access from its flags and installs it for its process with `install()`, which puts it
in the environment (RLVER_LAB_ACCESS): the jobs the app starts inherit it, so the job process, which is
the one that runs the spec, enforces the web's restrictions too. A process with no RLVER_LAB_ACCESS is the
command line. PolicySpec, SimulatorSpec, the reward resolver, persona files and exports consult
`current_access()` (or the Access handed to them); no view decides on its own.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Union

from simulator.endpoints import (
    DEFAULT_ENDPOINT,
    Endpoint,
    Route,
    command_line_route,
    is_url,
    owner_endpoints,
    web_route,
)
from storage import lab_home
from storage.db import PROJECT_ROOT

ACCESS_ENV = "RLVER_LAB_ACCESS"
COMMAND_LINE, WEB_VISITOR, WEB_USER = "command line", "web visitor", "web user"
CALLERS = (COMMAND_LINE, WEB_VISITOR, WEB_USER)
# the checkout's data folders a web caller may name (besides the lab home and the owner's --allow-path roots)
DATA_FOLDERS = ("docs/examples", "simulator/personas/data", "simulator/prompts", "configs")
OUTSIDE_CODE_REFUSED = ("outside code (python:...) is not run for a web page: start the lab with "
                        "--allow-outside-code to let every web caller run code on this machine, or run it from "
                        "the command line")
UPLOAD_REFUSED = "a file uploaded through the web page is never run as code"
MAX_NAME_CHARS = 80
# A config field that names a path (or an endpoint) says so once, in its dataclass: `path_field(KIND)` puts
# KIND in the field's metadata under ACCESS_KIND, and Access.config_errors checks every field so declared.
ACCESS_KIND = "access"
BUILTIN_KINDS = ("file", "folder", "endpoint")  # a path as typed, a folder, an endpoint name or URL
# The most a web caller may ask of a numeric setting that costs time or memory, by its name in the run configs
# and forms (the command line: no bound). Above them a run is a job for the owner's shell.
WEB_BOUNDS = {"steps": 100_000, "dialogues_per_step": 1024, "group_size": 64, "ppo_epochs": 16, "max_turns": 50,
              "max_new_tokens": 8192, "max_dialogue_tokens": 131_072, "max_tokens": 131_072,
              "simulator_max_tokens": 8192, "concurrency": 256, "seeds": 20, "count": 500, "group": 64,
              "simulator_max_in_flight": 256, "policy_max_in_flight": 256, "simulator_max_retries": 20,
              "policy_max_retries": 20, "limit": 100_000, "cells": 64, "parallel": 8}


class AccessError(ValueError):
    """A spec or path the caller may not use; `field` names the field, the message says why (the same
    message whether the named file exists or not)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def upload_dir() -> Path:
    """Where Gradio keeps uploaded files (GRADIO_TEMP_DIR, else the system temp folder's gradio/)."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()


def _resolved(path: Union[str, Path]) -> Path:
    return Path(path).expanduser().resolve()


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True)
class Access:
    caller: str = COMMAND_LINE
    allow_outside_code: bool = False  # web callers only; the command line always may
    allowed_paths: tuple[str, ...] = ()  # the owner's --allow-path roots
    endpoints: tuple[Endpoint, ...] = ()  # the owner's endpoints (web callers; simulator.endpoints)
    free_urls: bool = False  # web callers may type an endpoint URL (it then gets no key)
    max_live_jobs: int = 0  # web callers: the most jobs queued or running at once (0: no ceiling)

    @classmethod
    def web(cls, logged_in: bool, allow_outside_code: bool = False, allowed_paths: tuple[str, ...] = (),
            endpoints: tuple[Endpoint, ...] = (), free_urls: bool = False, max_live_jobs: int = 0) -> "Access":
        return cls(WEB_USER if logged_in else WEB_VISITOR, bool(allow_outside_code),
                   tuple(str(_resolved(p)) for p in allowed_paths), owner_endpoints(list(endpoints)),
                   bool(free_urls), max(0, int(max_live_jobs)))

    @property
    def from_web(self) -> bool:
        return self.caller != COMMAND_LINE

    def roots(self) -> list[Path]:
        """The folders a web caller's paths must lie in."""
        return [_resolved(lab_home())] + [_resolved(PROJECT_ROOT / d) for d in DATA_FOLDERS] + \
            [_resolved(p) for p in self.allowed_paths]

    def path_refused(self) -> str:
        return ("paths named from the web must lie inside the lab's folders (the lab home, the checkout's "
                "data folders or a folder the owner allowed with --allow-path)")

    def path(self, field: str, text: Union[str, Path]) -> Path:
        """The path `text` names, expanded; for a web caller it must resolve inside roots() (AccessError,
        whose message does not depend on whether the file exists)."""
        path = Path(text).expanduser()
        if self.from_web:
            resolved = path.resolve()
            if not any(_inside(resolved, root) for root in self.roots()):
                raise AccessError(field, self.path_refused())
        return path

    def path_error(self, field: str, text: Union[str, Path]) -> str:
        try:
            self.path(field, text)
        except AccessError as exc:
            return exc.message
        return ""

    def code(self, field: str, spec: str) -> None:
        """AccessError unless this caller may run the outside code of python:`spec` (its .py file, if it
        names one, never an upload)."""
        if self.from_web and not self.allow_outside_code:
            raise AccessError(field, OUTSIDE_CODE_REFUSED)
        where = spec.partition(":")[2].rpartition(":")[0]
        if where.endswith(".py") and _inside(_resolved(where), upload_dir()):
            raise AccessError(field, UPLOAD_REFUSED)

    def code_error(self, field: str, spec: str) -> str:
        try:
            self.code(field, spec)
        except AccessError as exc:
            return exc.message
        return ""

    def route(self, field: str, text: Union[str, None], api_key: Any = None) -> Route:
        """Where a client named by the endpoint field `field` (its value `text`) sends requests, and with
        which key. The command line: the URL given and `api_key` (else OPENAI_BASE_URL / OPENAI_API_KEY). A web
        caller: one of the owner's endpoints with its own key, whatever `api_key` says, or (only with
        free_urls) a typed URL with no key; AccessError otherwise."""
        if not self.from_web:
            if (text or "").strip() not in ("", DEFAULT_ENDPOINT) and not is_url(text or ""):
                raise AccessError(field, f"must be an http(s) URL of an OpenAI-compatible endpoint or "
                                         f"{DEFAULT_ENDPOINT}, got {text!r}")
            return command_line_route(text or "", api_key)
        try:
            return web_route(field, text or "", self.endpoints or owner_endpoints([]), self.free_urls)
        except ValueError as exc:
            raise AccessError(field, str(exc)) from None

    def endpoint_error(self, field: str, text: Union[str, None]) -> str:
        try:
            self.route(field, text)
        except AccessError as exc:
            return exc.message
        return ""

    def bound_error(self, name: str, value: Any) -> str:
        """Why a web caller may not ask `value` of the costly numeric setting `name` ('' when it may)."""
        bound = WEB_BOUNDS.get(name)
        if not self.from_web or bound is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return ""
        return f"at most {bound:,} from the web page (got {value:,}); larger runs start from the command line" \
            if value > bound else ""

    def endpoint_names(self) -> list[str]:
        """The endpoint names a web page offers (the command line: only `default`, and any URL)."""
        if not self.from_web:
            return [DEFAULT_ENDPOINT]
        return [e.name for e in (self.endpoints or owner_endpoints([]))]

    @property
    def urls_allowed(self) -> bool:
        """Whether an endpoint field may hold a typed URL."""
        return not self.from_web or self.free_urls

    def to_json(self) -> str:
        return json.dumps({"caller": self.caller, "allow_outside_code": self.allow_outside_code,
                           "allowed_paths": list(self.allowed_paths),
                           "endpoints": [e.to_dict() for e in self.endpoints], "free_urls": self.free_urls,
                           "max_live_jobs": self.max_live_jobs})

    @classmethod
    def from_json(cls, text: str) -> "Access":
        """The Access a RLVER_LAB_ACCESS value names; anything unreadable is a web visitor allowed nothing
        (a restriction that cannot be read is not lifted)."""
        try:
            data: Any = json.loads(text)
            caller = data["caller"]
            if caller not in CALLERS or caller == COMMAND_LINE:
                raise ValueError(caller)
            endpoints = tuple(Endpoint(str(e["name"]), str(e["url"]), str(e.get("key_var") or ""))
                              for e in data.get("endpoints") or ())
            return cls(caller, data.get("allow_outside_code") is True,
                       tuple(str(p) for p in data.get("allowed_paths") or ()), endpoints,
                       data.get("free_urls") is True, max(0, int(data.get("max_live_jobs") or 0)))
        except (ValueError, TypeError, KeyError, AttributeError):
            return cls(WEB_VISITOR)


PathCheck = Callable[[Access, str, Any], str]  # (access, field, value) -> the refusal, '' when allowed
_CHECKS: dict[str, PathCheck] = {}


def path_field(kind: str, default: Any = "", **kw: Any) -> Any:
    """A dataclass field whose value names a path or an endpoint; `kind` (BUILTIN_KINDS, or one a spec module
    registered: policy, simulator, pack, personas) says how Access.config_errors checks it."""
    return field(default=default, metadata={ACCESS_KIND: kind}, **kw)


def register_kind(kind: str, check: PathCheck) -> None:
    """Teach Access a kind of spec field: `check(access, field, value)` says why the caller may not name the
    paths in `value` ('' when it may), the same whether they exist or not, opening nothing."""
    _CHECKS[kind] = check


def known_kinds() -> set[str]:
    """Every kind a field may be declared with: the built-in ones and those spec modules registered."""
    return set(BUILTIN_KINDS) | set(_CHECKS)


def declared_fields(config: Any) -> dict[str, str]:
    """{field: kind} of a config dataclass (or its class): every field declared with path_field."""
    return {f.name: f.metadata[ACCESS_KIND] for f in fields(config) if ACCESS_KIND in f.metadata} \
        if is_dataclass(config) else {}


def _builtin_check(access: Access, kind: str, name: str, value: Any) -> str:
    if kind == "endpoint":
        return access.endpoint_error(name, str(value))
    return access.path_error(name, str(value))


def config_errors(config: Any, access: Union[Access, None] = None) -> dict[str, str]:
    """{field: refusal} for every declared path or endpoint field of `config` the caller may not name
    (this process's caller by default), and every costly number above its WEB_BOUNDS; empty values name nothing. A kind nobody registered is an error of the
    lab's own (KeyError), never a silent pass."""
    access = access or current_access()
    errors = {f.name: problem for f in fields(config) if f.name in WEB_BOUNDS
              and (problem := access.bound_error(f.name, getattr(config, f.name)))} if is_dataclass(config) else {}
    for name, kind in declared_fields(config).items():
        value = getattr(config, name)
        if value in (None, "", [], ()):
            continue
        check = (lambda a, n, v, k=kind: _builtin_check(a, k, n, v)) if kind in BUILTIN_KINDS else _CHECKS[kind]
        if problem := check(access, name, value):
            errors[name] = problem
    return errors


# the folders the lab resolved itself (a checkpoint's policy/, the default model's cache), not named by a caller
LAB_ITSELF = Access()


def current_access() -> Access:
    """This process's caller: the one install() set (inherited by the jobs it starts), else the command line."""
    text = os.environ.get(ACCESS_ENV)
    return Access() if text is None else Access.from_json(text)


def install(access: Access) -> None:
    """Make `access` this process's caller and that of every process it starts (app startup)."""
    if access.from_web:
        os.environ[ACCESS_ENV] = access.to_json()
    else:
        os.environ.pop(ACCESS_ENV, None)


def safe_name(name: Any, fallback: str = "unnamed") -> str:
    """`name` as one file-name component: letters, digits, '.', '-' and '_' only (others become '_'), no
    leading dot, at most MAX_NAME_CHARS; set, job and experiment names never become paths otherwise."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name or "")).lstrip("._")[:MAX_NAME_CHARS]
    return text or fallback


def export_path(*name_parts: Any, suffix: str = ".jsonl") -> Path:
    """A new file for an export the web page offers for download: in a fresh private temporary folder,
    named by `name_parts` made safe (safe_name), so no set name or format can point it elsewhere."""
    folder = Path(tempfile.mkdtemp(prefix="rlver-export-"))
    return folder / ("-".join(safe_name(p) for p in name_parts) + suffix)
