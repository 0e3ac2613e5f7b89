"""Replay of published SAGE transcripts (`*_result.jsonl`) through the lab's own benchmark runner.

`replay:FILE` as a simulator answers each policy reply with the recorded user message, its recorded
emotion point (given to the agent as a change, so the lab's EmotionRules clamp and cap it as they would a
live one) and its recorded thinking / planning as inner thoughts. `replay:FILE` as a policy
(trainer/policies/replay_engine.py) says the recorded assistant messages in order. Together, with the
profiles read from the same file, they run every recorded dialogue through the runner, the rules and
the store of a live run; the lab's rules, not the record, decide where each dialogue ends. So a replay
reproduces the published numbers only when the lab follows SAGE's protocol, and `replay_mismatch` names
the dialogue and the turn where the lab ended earlier, or later, than the record.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simulator.access import current_access
from simulator.llm.client import BackendError
from simulator.personas.io import BadFileError, read_bytes
from simulator.personas.profile import Profile
from simulator.user.rules import EmotionRules

REPLAY_PREFIX = "replay:"


@dataclass(frozen=True)
class ReplayRecord:
    """One recorded dialogue: its id, the history exactly as recorded, and its final emotion."""

    id: str
    history: tuple[dict, ...]
    emo_point: float

    def user_turn(self, n: int) -> Optional[dict]:
        """The n-th recorded user message (0 = the opening), or None past the end."""
        users = [m for m in self.history if m["role"] == "user"]
        return users[n] if n < len(users) else None

    def policy_reply(self, n: int) -> Optional[str]:
        """The n-th recorded assistant message (1-based), or None past the end."""
        replies = [m["content"] for m in self.history if m["role"] == "assistant"]
        return replies[n - 1] if 0 < n <= len(replies) else None


def replay_path(spec: str) -> Path:
    """The file of a `replay:FILE` spec (a ValueError naming the problem when it is not usable)."""
    path = current_access().path("replay", spec[len(REPLAY_PREFIX):] if spec.startswith(REPLAY_PREFIX) else spec)
    if not path.is_file():
        raise ValueError(f"replay: file {str(path)!r} not found (replay:FILE takes a SAGE *_result.jsonl)")
    return path


def load_records(spec: str) -> dict[str, ReplayRecord]:
    """The records of a SAGE result file by id; a bad line raises BadFileError naming it."""
    from simulator.personas.transcript_files import read_transcripts

    records, errors, _ = read_transcripts(replay_path(spec))
    if errors:
        raise BadFileError(errors)
    return {r["id"]: ReplayRecord(r["id"], tuple(r["history"]), float(r["emo_point"])) for _, r in records}


def file_sha256(spec: str) -> str:
    return hashlib.sha256(read_bytes(replay_path(spec))).hexdigest()


def replay_mismatch(record: ReplayRecord, messages: list[dict]) -> str:
    """'' when the dialogue the lab played is the record, message for message; else where it differs."""
    recorded = [(m["role"], m["content"]) for m in record.history]
    played = [(m.get("role"), m.get("content")) for m in messages]
    for i, (want, got) in enumerate(zip(recorded, played)):
        if want != got:
            return f"replay of {record.id}: message {i} ({want[0]}) differs from the record"
    if len(played) < len(recorded):
        return (f"replay of {record.id}: the lab's rules ended the dialogue after message {len(played) - 1}, "
                f"the record goes on to message {len(recorded) - 1}")
    if len(played) > len(recorded):
        return (f"replay of {record.id}: the record ends at message {len(recorded) - 1}, "
                f"the lab's rules went on to message {len(played) - 1}")
    return ""


class ReplayBackend:
    """A native simulator backend that plays back recorded user turns (see the module docstring)."""

    native_steps = True

    def __init__(self, spec: str, **_ignored: Any):
        self.spec = spec if spec.startswith(REPLAY_PREFIX) else REPLAY_PREFIX + spec
        self.records = load_records(self.spec)
        self.sha256 = file_sha256(self.spec)

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": "replay", "model": replay_path(self.spec).name, "file_sha256": self.sha256}

    def check_profile(self, profile: Profile) -> None:
        if profile.id not in self.records:
            raise ValueError(f"replay: {replay_path(self.spec).name} has no dialogue with id {profile.id!r}")

    def _user(self, profile: Profile, n: int, after: str) -> dict:
        turn = self.records[profile.id].user_turn(n)
        if turn is None:
            raise BackendError(f"replay of {profile.id}: the record has no user message after {after}; the lab's "
                               "rules did not end the dialogue where the record does", reason="replay")
        return turn

    async def opening(self, profile: Profile, rules: EmotionRules, state: dict) -> dict[str, Any]:
        return {"reply": self._user(profile, 0, "the start")["content"], "planning": ""}

    async def emotion_step(self, profile: Profile, rules: EmotionRules, emotion: float, history: list[dict],
                           reply: str, state: dict) -> dict[str, Any]:
        n = state["turn"]
        turn = self._user(profile, n, f"policy reply {n}")
        if "emotion-point" not in turn:
            raise BackendError(f"replay of {profile.id}: user message {n} has no emotion-point", reason="replay")
        analysis = dict(turn.get("planning") or {})
        analysis.pop("change", None)
        return {**analysis, "change": float(turn["emotion-point"]) - emotion}

    async def reply_step(self, profile: Profile, rules: EmotionRules, emotion: float, delta: float,
                         history: list[dict], analysis: dict, state: dict) -> dict[str, Any]:
        turn = self._user(profile, state["turn"], f"policy reply {state['turn']}")
        return {"reply": turn["content"], "planning": turn.get("thinking", "")}
