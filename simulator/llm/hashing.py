"""Simulator fingerprint: what produced an emotion score (backend, model, host, sampling, prompts, rules).

Results whose fingerprints differ are never compared silently; the hash is the short key stored beside
every dialogue and benchmark run.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlparse


def canonical_json(obj: Any) -> str:
    """Key-sorted, compact JSON: the same dict always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def fingerprint_hash(fp: dict[str, Any]) -> str:
    """First 16 hex characters of the sha256 of the fingerprint's canonical JSON."""
    return hashlib.sha256(canonical_json(fp).encode("utf-8")).hexdigest()[:16]


def endpoint_host(base_url: str) -> str:
    """host[:port] of a base URL; never the path, query or any credentials in it."""
    if not base_url:
        return ""
    parsed = urlparse(base_url if "://" in base_url else "http://" + base_url)
    host = parsed.hostname or ""
    return f"{host}:{parsed.port}" if parsed.port else host
