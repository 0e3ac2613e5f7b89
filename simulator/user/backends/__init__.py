"""Simulator backends. `make_backend("offline")` (scorer v3), `make_backend("offline:v2")` (the previous
scorer, for reproducing old runs) or `make_backend("openai:MODEL", base_url=..., ...)`."""
from __future__ import annotations

from typing import Any

from simulator.llm.client import BackendError, ChatBackend, Completion

__all__ = ["make_backend", "read_spec", "spec_error", "BackendError", "ChatBackend", "Completion", "BACKENDS"]
BACKENDS = ("offline", "offline:v2", "offline:v3", "openai:MODEL", "replay:FILE", "python:MODULE:FACTORY")
OFFLINE_SCORERS = ("v2", "v3")  # simulator.user.backends.offline.SCORERS, without importing torch here
_OPENAI_KW = {"base_url", "api_key", "temperature", "top_p", "max_tokens", "timeout", "max_retries", "max_in_flight",
              "requests_per_minute", "backoff_s", "max_backoff_s", "seed", "access"}


SIMULATOR_KINDS = ("offline", "openai", "replay", "python")


def read_spec(spec: str) -> tuple[str, str]:
    """(kind, target) of a simulator spec: ("offline", SCORER or ""), ("openai", MODEL), ("replay", FILE),
    ("python", TARGET) or ("", spec) for none of them. The one reader of simulator strings."""
    text = (spec or "").strip()
    kind, colon, target = text.partition(":")
    if kind in SIMULATOR_KINDS and (colon or kind in ("offline", "openai")):
        return kind, target.strip()
    return "", text


def spec_error(spec: Any) -> str:
    """Why `spec` is not a simulator spec ('' when it is one); checked without building anything."""
    if not isinstance(spec, str) or not spec.strip():
        return "required: " + " or ".join(BACKENDS)
    kind, target = read_spec(spec)
    if kind == "offline" and (not target or target in OFFLINE_SCORERS):
        return ""
    if kind in ("openai", "replay") and target:
        return ""
    if kind == "python":  # a simulated user of outside code (simulator.user.outside)
        from simulator.user.outside import target_error

        return target_error(spec.strip())
    return f"unknown simulator {spec!r}; one of: {', '.join(BACKENDS)}"


def make_backend(spec: str, **kw: Any):
    """Build a backend from its spec. Keyword arguments a backend does not use are ignored when None."""
    spec = (spec or "").strip()
    kind, target = read_spec(spec)
    kw = {k: v for k, v in kw.items() if v is not None}
    if kind == "offline":
        from simulator.user.backends.offline import DEFAULT_SCORER, OfflineBackend

        return OfflineBackend(seed=int(kw.get("seed", 0)), scorer=target or DEFAULT_SCORER)
    if kind == "replay":
        from simulator.user.backends.replay import ReplayBackend

        return ReplayBackend(spec)
    if kind == "openai":
        model = target or kw.pop("model", "")
        kw.pop("model", None)
        unknown = set(kw) - _OPENAI_KW
        if unknown:
            raise ValueError(f"openai backend: unknown option(s) {', '.join(sorted(unknown))}")
        if not model:
            raise ValueError("openai backend: no model given; use the spec 'openai:MODEL'")
        from simulator.llm.openai_client import OpenAIBackend

        return OpenAIBackend(model, **kw)
    raise ValueError(f"unknown simulator backend {spec!r}; use one of: {', '.join(BACKENDS)}")
