"""A rule-based simulated user: warm words raise its emotion, advice and short replies lower it.

Train against it with `simulator: python:docs/examples/rule_user.py:make_user` (see docs/bring-your-own.md).
It follows the lab's SimulatedUser contract (simulator.user.agent): async opening(), async respond(), fingerprint().
"""
from simulator.personas.profile import Profile
from simulator.user.agent import UserTurn

WARM = ("sorry", "understand", "sounds", "must be", "feel", "hear you", "makes sense")
COLD = ("you should", "just ", "calm down", "get over", "whatever")


class RuleUser:
    def __init__(self, profile: Profile, seed: int, start: float = 40.0, max_replies: int = 8):
        self.profile, self.emotion, self.replies, self.max_replies = profile, start, 0, max_replies

    async def opening(self) -> UserTurn:
        return UserTurn(text=self.profile.first_line or "I had a hard day.", emotion=self.emotion)

    async def respond(self, dialogue: list[dict], reply: str) -> UserTurn:
        text = reply.lower()
        delta = 5.0 * sum(w in text for w in WARM) - 10.0 * sum(w in text for w in COLD)
        delta -= 10.0 if len(text.split()) < 4 else 0.0
        delta = max(-10.0, min(10.0, delta))
        self.emotion = max(0.0, min(100.0, self.emotion + delta))
        self.replies += 1
        outcome = ("success" if self.emotion >= 100 else "failure" if self.emotion < 10
                   else "max_turns" if self.replies >= self.max_replies else "")
        said = "Thanks, that helps." if delta > 0 else "Hm. Okay." if delta == 0 else "That's not what I meant."
        return UserTurn(text=said, emotion=self.emotion, delta=delta, done=bool(outcome), outcome=outcome,
                        inner={"rule": f"{delta:+g} from warm and cold words"})

    def fingerprint(self) -> dict:
        return {"model": "rule-user", "warm": list(WARM), "cold": list(COLD), "max_replies": self.max_replies}


def make_user(profile: Profile, seed: int) -> RuleUser:
    return RuleUser(profile, seed)


def emotion_gain(sample) -> float:
    """A custom reward: the emotion gained over the dialogue, / 100 (the paper's is final emotion / 100)."""
    return (sample.final_emotion - sample.emotions[0]) / 100.0 if sample.emotions else 0.0
