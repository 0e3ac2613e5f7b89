"""Scripted pieces of a rollout shared by the rollout tests: a simulated user that follows a script, the
factory that makes one per persona, the real transformers engine recording its batch sizes, and the log-prob
recomputation the token-layout checks compare against."""
from __future__ import annotations

import asyncio
from typing import Any

import torch

from simulator.personas.profile import Profile
from simulator.user.agent import UserTurn
from trainer.policies.base import Generation
from trainer.policies.hf_engine import HFEngine


class ScriptedAgent:
    """A simulated user (simulator.user.agent.SimulatedUser): +5 per reply, leaves after `ends_after`
    replies, raises on reply `fail_at`. It keeps every reply it receives so routing can be checked."""

    def __init__(self, profile: Profile, seed: int, ends_after: int = 3, fail_at: int = 0, delay: float = 0.01):
        self.profile, self.seed, self.ends_after, self.fail_at, self.delay = profile, seed, ends_after, fail_at, delay
        self.emotion, self.received, self.histories = 30.0, [], []

    def fingerprint(self) -> dict:
        return {"backend": "scripted", "ends_after": self.ends_after}

    async def opening(self) -> UserTurn:
        await asyncio.sleep(self.delay)
        return UserTurn(text=f"Hi, I am {self.profile.name}. Work has been awful.", emotion=self.emotion)

    async def respond(self, dialogue: list[dict], reply: str) -> UserTurn:
        await asyncio.sleep(self.delay)
        self.received.append(reply)
        self.histories.append(list(dialogue))
        if len(self.received) == self.fail_at:
            raise ConnectionError("simulator service went away")
        self.emotion += 5
        done = len(self.received) >= self.ends_after
        return UserTurn(text=f"{self.profile.name} says more ({len(self.received)}).", emotion=self.emotion,
                        delta=5.0, inner={"planning": f"turn {len(self.received)}"}, done=done,
                        outcome="goodbye" if done else "")


def profile(pid: str, **kw: Any) -> Profile:
    return Profile(id=pid, name=pid.title(), persona="A nurse of 34 who likes hiking.",
                   background="Her manager took credit for her project.", hidden_need="Wants deep empathy.",
                   need_category="deep_empathy", personality="negative", **kw)


class Factory:
    def __init__(self, ends: dict[str, int], fail: dict[str, int] | None = None):
        self.ends, self.fail, self.agents = ends, fail or {}, {}

    def __call__(self, prof: Profile, seed: int) -> ScriptedAgent:
        agent = ScriptedAgent(prof, seed, self.ends[prof.id], self.fail.get(prof.id, 0))
        self.agents[(prof.id, seed)] = agent
        return agent


class RecordingEngine(HFEngine):
    """The real transformers engine, recording the size of every generate call."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.batches: list[int] = []

    def generate_ids(self, prompt_ids, params, seeds=None):
        self.batches.append(len(prompt_ids))
        return super().generate_ids(prompt_ids, params, seeds)


class ScriptedPolicy(HFEngine):
    """The tiny model forced to emit scripted texts (teacher forcing); logprobs from the real model."""

    def __init__(self, path, script):
        super().__init__(path)
        self.script, self.calls = script, 0

    def generate_ids(self, prompt_ids, params, seeds=None):
        out = []
        for ids in prompt_ids:
            self.calls += 1
            sampled = self.encode_text(self.script(self.calls)) + [self.eos_token_id]
            with torch.inference_mode():
                logits = self.model(torch.tensor([ids + sampled])).logits[0, len(ids) - 1:-1]
            lp = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(sampled)[:, None])[:, 0]
            out.append(Generation(self.decode(sampled), sampled, lp.tolist(), list(ids), "stop"))
        return out


def recompute(engine: HFEngine, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        logits = engine.model(torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
