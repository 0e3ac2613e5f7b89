"""Replies being sampled in the Live rollout, shown before their turn ends: the policy engine's token
listener (trainer.policies.base.PolicyEngine.token_listener) writes each dialogue's tokens so far here from
the sampling thread; the view reads them on each tick and shows the text, the tokens so far and the time
left for the turn at the pace so far (erring long: as if the reply ran to its cap)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from app.render import text


class PartialReplies:
    """The tokens sampled so far of each dialogue's reply in progress, by the rollout's dialogue key."""

    def __init__(self, cap: int, clock: Callable[[], float] = time.monotonic):
        self.cap, self.clock = int(cap), clock
        self._lock = threading.Lock()
        self._replies: dict[str, tuple[list[int], float]] = {}  # key -> (ids so far, when the first came)

    def listener(self, keys: list[str], rows: list[list[int]]) -> None:
        """The engine's token_listener: called after each decoding step with every row's tokens so far."""
        now = self.clock()
        with self._lock:
            for key, ids in zip(keys, rows):
                if not key or not ids:
                    continue
                old = self._replies.get(key)
                started = old[1] if old is not None and len(old[0]) <= len(ids) else now  # shorter: a new reply
                self._replies[key] = (list(ids), started)

    def done(self, key: str) -> None:
        """The reply of `key` was recorded (or its dialogue ended): no longer in progress."""
        with self._lock:
            self._replies.pop(key, None)

    def progress(self, key: str) -> Optional[tuple[list[int], Optional[float]]]:
        """(tokens so far, seconds left for the turn or None before a pace is known) of `key`'s reply in
        progress; None when it has none."""
        with self._lock:
            entry = self._replies.get(key)
        if entry is None:
            return None
        ids, started = entry
        return list(ids), seconds_left(len(ids), self.clock() - started, self.cap)


def seconds_left(n_tokens: int, elapsed_s: float, cap: int) -> Optional[float]:
    """Time left for a reply of `n_tokens` so far, `elapsed_s` after its first token, at that pace until its
    cap; None before a second token gives a pace."""
    if n_tokens < 2 or elapsed_s <= 0:
        return None
    return max(0, cap - n_tokens) * elapsed_s / (n_tokens - 1)


def partial_html(said: str, n_tokens: int, left_s: Optional[float]) -> str:
    """The reply in progress as a bubble under the dialogue: its text so far and how far it has got."""
    left = ("reading the prompt (a first reply also waits for the model to load)" if left_s is None else
            f"about {left_s:.0f} s left for this turn at its pace so far (a busier machine takes longer)")
    return (f"<div class='turn turn-partial'><div class='turn-head'><b>Policy</b> writing: "
            f"{n_tokens} token{'s' if n_tokens != 1 else ''} so far, {left}</div>"
            f"<div class='turn-text'>{text(said)}▌</div></div>")


def writing_words(partial: PartialReplies, keys: list[str]) -> str:
    """'writing: 12 tokens so far, about 30 s left for the turn at its pace so far' over the replies in progress:
    an estimate (the pace moves with the machine's load), never said as a bound."""
    shown = [p for p in (partial.progress(k) for k in keys) if p is not None]
    if not shown:
        return ""
    tokens = sum(len(ids) for ids, _ in shown)
    lefts = [left for _, left in shown if left is not None]
    left = f", about {max(lefts):.0f} s left for the turn at its pace so far" if lefts else ""
    return f"writing: {tokens} token{'s' if tokens != 1 else ''} so far{left}"


def decode_with(engine: Any) -> Callable[[list[int]], str]:
    """The engine's decode (its tokenizer's, special tokens dropped); '' for an engine without one."""
    return engine.decode if getattr(engine, "tokenizer", None) is not None else (lambda ids: "")
