"""What every simulator backend shares: the completion record and the error type.

Two kinds of backend exist. Chat backends (`native_steps = False`, e.g. openai) complete chat messages;
the agent renders the prompt templates and parses the answers. Native backends (`native_steps = True`,
the offline one) compute the emotion step and the reply step themselves from the profile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Completion:
    text: str
    latency_s: float = 0.0  # wall time of the call, retries included
    n_tokens: int = 0  # prompt + completion tokens as reported by the server (0 when not reported)
    attempts: int = 1


class BackendError(RuntimeError):
    """A backend call that failed for good. `reason` is a short machine-readable kind."""

    def __init__(self, message: str, reason: str = "error", retryable: bool = False):
        super().__init__(message)
        self.reason = reason
        self.retryable = retryable


class ChatBackend:
    """Interface of a chat backend (subclassed by the openai backend)."""

    name = "chat"
    native_steps = False
    model = ""

    async def complete(self, messages: list[dict[str, str]]) -> Completion:  # pragma: no cover - interface
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError
