"""Simulator backends. `make_backend("offline")` or `make_backend("openai:MODEL", base_url=..., ...)`."""
from __future__ import annotations

from typing import Any

from simulator.backends.base import BackendError, ChatBackend, Completion

__all__ = ["make_backend", "BackendError", "ChatBackend", "Completion", "BACKENDS"]
BACKENDS = ("offline", "openai:MODEL", "replay:FILE")
_OPENAI_KW = {"base_url", "api_key", "temperature", "top_p", "max_tokens", "timeout", "max_retries", "concurrency",
              "backoff_s", "max_backoff_s", "seed"}


def make_backend(spec: str, **kw: Any):
    """Build a backend from its spec. Keyword arguments a backend does not use are ignored when None."""
    spec = (spec or "").strip()
    kw = {k: v for k, v in kw.items() if v is not None}
    if spec == "offline":
        from simulator.backends.offline import OfflineBackend

        return OfflineBackend(seed=int(kw.get("seed", 0)))
    if spec.startswith("replay:"):
        from simulator.replay import ReplayBackend

        return ReplayBackend(spec)
    if spec.startswith("openai:") or spec == "openai":
        model = spec.partition(":")[2].strip() or kw.pop("model", "")
        kw.pop("model", None)
        unknown = set(kw) - _OPENAI_KW
        if unknown:
            raise ValueError(f"openai backend: unknown option(s) {', '.join(sorted(unknown))}")
        if not model:
            raise ValueError("openai backend: no model given; use the spec 'openai:MODEL'")
        from simulator.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(model, **kw)
    raise ValueError(f"unknown simulator backend {spec!r}; use one of: {', '.join(BACKENDS)}")
