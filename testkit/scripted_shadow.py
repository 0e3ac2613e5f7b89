"""Scripted simulated users for measuring agreement with people (`python:testkit.scripted_shadow:NAME`).

The lab's test corpora (testkit.human_corpus.quality_dialogue) write each policy reply with its quality q (1-5)
as the number of times it says "I hear you"; the people's score of the reply is q plus noise. `follower`
reads q and changes its emotion by 3 (q - 3) plus Gaussian noise: its changes follow the people's scores.
`ignorer` draws its change at random, whatever the reply. `slow_follower` is the follower taking 0.2 s a turn
(a run long enough to kill). Each draw is seeded by the seed it is built with only, so a turn judged with the
same seed gives the same change in any run.
"""
from __future__ import annotations

import asyncio
import random
from typing import Any

from simulator.user.agent import UserTurn

NOISE_SD = 2.0


def quality(reply: str) -> int:
    return max(1, min(5, reply.count("I hear you")))


def follower_change(q: int, rng: random.Random) -> float:
    """The follower's change for a reply of quality q."""
    return 3.0 * (q - 3) + rng.gauss(0.0, NOISE_SD)


class ScriptedShadowUser:
    def __init__(self, profile: Any, seed: int, follow: bool = True, delay_s: float = 0.0):
        self.profile, self.seed, self.follow, self.delay_s = profile, seed, follow, delay_s
        self.emotion, self.turns = 40.0, 0

    async def opening(self) -> UserTurn:
        return UserTurn(text="Hello.", emotion=self.emotion)

    async def respond(self, dialogue: list[dict], reply: str) -> UserTurn:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        rng = random.Random(self.seed)
        delta = follower_change(quality(reply), rng) if self.follow else rng.uniform(-9.0, 9.0)
        delta = round(max(-10.0, min(10.0, delta)), 3)
        self.emotion = max(0.0, min(100.0, self.emotion + delta))
        self.turns += 1
        return UserTurn(text="I see.", emotion=self.emotion, delta=delta,
                        inner={"quality_read": quality(reply) if self.follow else None})

    def fingerprint(self) -> dict[str, Any]:
        return {"model": "scripted-shadow", "follow": self.follow, "noise_sd": NOISE_SD}


def follower(profile: Any, seed: int) -> ScriptedShadowUser:
    return ScriptedShadowUser(profile, seed)


def ignorer(profile: Any, seed: int) -> ScriptedShadowUser:
    return ScriptedShadowUser(profile, seed, follow=False)


def slow_follower(profile: Any, seed: int) -> ScriptedShadowUser:
    return ScriptedShadowUser(profile, seed, delay_s=0.2)
