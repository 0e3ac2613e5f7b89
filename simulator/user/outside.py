"""Bring your own: a simulated user or a reward written outside the lab, named by a `python:TARGET` spec.

TARGET is `MODULE:NAME` (an importable module, e.g. `my_users:make_user`) or `PATH.py:NAME` (a file, e.g.
`docs/examples/rule_user.py:make_user`). What it names and the sha256 of its file (`source()`) go into the
fingerprint of every result it produces, so results of different outside code never mix.

    simulator: python:TARGET   a SimulatorFactory: factory(profile, seed) -> a SimulatedUser
                               (simulator.user.agent: async opening(), async respond(dialogue, reply), fingerprint())
    reward:    python:TARGET   a function of the finished dialogue (a trainer.rollout.types.RolloutSample) -> float
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Optional

from simulator.access import Access, current_access

PREFIX = "python:"


class OutsideCodeError(ValueError):
    """A python: spec that cannot be loaded; the message names the spec and the problem."""


def target_error(spec: str, access: Optional[Access] = None, field: str = "spec") -> str:
    """Why `spec` is not a well-formed python:TARGET the caller may run ('' when it is; the caller's Access
    decides first, before the file is looked at); nothing is imported."""
    body = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
    where, _, name = body.rpartition(":")
    if not where or not name.isidentifier():
        return f"{spec!r}: expected python:MODULE:NAME or python:PATH.py:NAME"
    if problem := (access or current_access()).code_error(field, PREFIX + body):
        return problem
    if where.endswith(".py") and not Path(where).expanduser().is_file():
        return f"{spec!r}: no file {where}"
    return ""


def _module(where: str) -> Any:
    if where.endswith(".py"):
        path = Path(where).expanduser().resolve()
        name = f"rlver_outside_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(where)


def load(spec: str, access: Optional[Access] = None) -> tuple[Any, dict[str, Any]]:
    """The object a python: spec names and its source record {spec, module, name, file, sha256}; the
    simulator's and the reward's one resolver, which asks the caller's Access before importing."""
    problem = target_error(spec, access)
    if problem:
        raise OutsideCodeError(problem)
    where, _, name = (spec[len(PREFIX):] if spec.startswith(PREFIX) else spec).rpartition(":")
    try:
        module = _module(where)
    except Exception as exc:  # its own import error, whatever it is, belongs to the spec
        raise OutsideCodeError(f"{spec!r}: cannot import {where}: {type(exc).__name__}: {exc}") from None
    obj = getattr(module, name, None)
    if not callable(obj):
        raise OutsideCodeError(f"{spec!r}: {where} has no callable {name}")
    return obj, source(spec, module, name)


def source(spec: str, module: Any, name: str) -> dict[str, Any]:
    file = getattr(module, "__file__", None) or ""
    digest = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file and Path(file).is_file() else ""
    return {"spec": spec, "module": getattr(module, "__name__", ""), "name": name, "file": Path(file).name,
            "sha256": digest}


class OutsideUser:
    """A simulated user built by outside code, its fingerprint extended with where the code came from.
    Everything else (opening, respond, rules, adopt_opening) is the outside object's own."""

    def __init__(self, inner: Any, origin: dict[str, Any]):
        self.inner, self.origin = inner, origin

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def opening(self) -> Any:
        return await self.inner.opening()

    async def respond(self, dialogue: list[dict], reply: str) -> Any:
        return await self.inner.respond(dialogue, reply)

    def fingerprint(self) -> dict[str, Any]:
        return {**dict(self.inner.fingerprint()), "backend": "python", "outside": self.origin}


def simulator_factory(spec: str, access: Optional[Access] = None) -> Any:
    """factory(profile, seed) -> OutsideUser for a `python:TARGET` simulator spec."""
    factory, origin = load(spec, access)

    def build(profile: Any, seed: int) -> OutsideUser:
        return OutsideUser(factory(profile, seed), origin)

    return build
