"""`replay:FILE` as a policy: says the recorded assistant messages of a SAGE `*_result.jsonl`, in order.

A prompt is matched to its record by the dialogue's first user message (the scripted first line), narrowed
by the whole visible history when several records open alike; the reply is the record's next assistant
message. A prompt no record matches, or one past the record's last reply, gets a Generation with
finish_reason "error" naming the dialogue and the turn, so that dialogue fails and the others go on.
"""
from __future__ import annotations

from typing import Any, Optional

from simulator.user.backends.replay import ReplayRecord, file_sha256, load_records, replay_path
from trainer.policies.base import Generation, PolicyEngine, SamplingConfig, check_messages


class ReplayEngine(PolicyEngine):
    name = "replay"
    supports_token_ids = False

    def __init__(self, spec: str, **_ignored: Any):
        self.records = load_records(spec)
        self.model_ref = f"replay:{replay_path(spec).name}"
        self.sha256 = file_sha256(spec)
        self._by_opening: dict[str, list[ReplayRecord]] = {}
        for r in self.records.values():
            first = r.user_turn(0)
            self._by_opening.setdefault(first["content"] if first else "", []).append(r)

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> list[Generation]:
        raise NotImplementedError("a replay policy has no tokens; the dialogue rollout uses generate()")

    def generate(self, prompts: list[list[dict]], params: SamplingConfig,
                 seeds: Optional[list[int]] = None) -> list[Generation]:
        return [self._one(p) for p in prompts]

    def _one(self, prompt: list[dict]) -> Generation:
        check_messages(prompt)
        seen = [(m["role"], m["content"]) for m in prompt if m["role"] != "system"]
        first = next((c for r, c in seen if r == "user"), "")
        candidates = [r for r in self._by_opening.get(first, [])
                      if [(m["role"], m["content"]) for m in r.history[:len(seen)]] == seen] \
            or self._by_opening.get(first, [])
        if not candidates:
            return Generation(text="", finish_reason="error",
                              error=f"replay: no recorded dialogue opens with {first[:60]!r}")
        n = sum(r == "assistant" for r, _ in seen) + 1
        replies = {r.policy_reply(n) for r in candidates}
        if len(replies) > 1:
            return Generation(text="", finish_reason="error", error=f"replay: {len(candidates)} records open alike "
                              f"({', '.join(r.id for r in candidates)}) and differ at reply {n}")
        reply = replies.pop()
        if reply is None:
            return Generation(text="", finish_reason="error",
                              error=f"replay of {candidates[0].id}: the record has no policy reply {n}")
        return Generation(text=reply)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.model_ref, "file_sha256": self.sha256}
