"""The offline user's voice: its next message from the persona's own material and the current tier.

Deterministic for (seed, profile id, turn): every random choice comes from a Random seeded with them.
Material: profile.extra["events"] (first-person sentences) when present, else the first-person sentences
of the background, else a few neutral fillers. Each is used once before any repeats.
"""
from __future__ import annotations

import random
import re
from typing import Any

from simulator.personas.profile import Profile
from simulator.user.backends.offline_data import CLOSINGS, FILLERS, NEED_HINTS, REACTIONS
from simulator.user.rules import EmotionRules, tier

QUESTIONS = ["Does that make sense?", "What would you do?", "Is that weird?", "Am I overthinking it?"]


def sentences(text: str, min_words: int = 1) -> list[str]:
    """`text` split after . ! or ?, each piece stripped, pieces of fewer than `min_words` words dropped."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= min_words]


def persona_material(profile: Profile) -> list[str]:
    """The sentences the user can tell about their situation, in order."""
    events = [e.strip() for e in profile.extra.get("events", []) if isinstance(e, str) and e.strip()]
    if events:
        return events
    mine = [s for s in sentences(profile.background) if re.search(r"\b(I|my|me|I'm|I've)\b", s) and len(s) < 240]
    return mine or list(FILLERS)


def _rng(state: dict, profile: Profile) -> random.Random:
    return random.Random(f"{state.get('seed', 0)}:{profile.id}:{state.get('turn', 0)}")


def _next_event(profile: Profile, state: dict) -> str:
    """The next untold piece of the user's story; then a few fillers; then nothing (never a repeat)."""
    material = persona_material(profile)
    used = state.setdefault("used_events", [])
    fresh = [i for i in range(len(material)) if i not in used]
    if fresh:
        used.append(fresh[0])
        return material[fresh[0]]
    n = state.get("fillers", 0)
    state["fillers"] = n + 1
    return FILLERS[n] if n < len(FILLERS) else ""


def compose_opening(profile: Profile, state: dict) -> dict[str, Any]:
    """First message: the scripted first line, else the first piece of the persona's material."""
    if profile.first_line.strip():
        text = profile.first_line.strip()
    else:
        text = ("Hey. Can I talk to you about something? " + _next_event(profile, state)).strip()
    return {"reply": text, "planning": "1. Attitude: guarded.\n2. Goal: start talking about what happened.",
            "plan": {"attitude": "guarded", "goal": "start talking about what happened"}, "leave": False}


def compose_reply(profile: Profile, rules: EmotionRules, emotion: float, delta: float, analysis: dict,
                  state: dict) -> dict[str, Any]:
    """The user's next message and its plan, from the tier, the change and the main problem."""
    rng = _rng(state, profile)
    t = tier(emotion)
    ending = rules.end_outcome(emotion, 0)
    if ending in ("success", "failure"):
        key = "S" if ending == "success" else "F"
        text = rng.choice(CLOSINGS[key])
        plan = {"attitude": "positive" if key == "S" else "negative",
                "goal": "thank them and say goodbye" if key == "S" else "give up and say goodbye",
                "tone": "warm" if key == "S" else "cold", "content": "closing"}
        return _result(plan, text, leave=True)
    problem = analysis.get("main_problem", "")
    direction = "+" if delta > 0 else "-" if delta < 0 else "="
    tier_key = {"S": "A", "A": "A", "B": "B"}.get(t, "C") + direction
    reaction = rng.choice(REACTIONS[problem] if problem in REACTIONS else REACTIONS[tier_key])
    parts = [reaction]
    # Open up with a new detail unless the user is shutting down (tier C after a bad reply).
    if not (t in ("C", "F") and delta < 0 and rng.random() < 0.5):
        event = _next_event(profile, state)
        if event:
            parts.append(event)
    hinted = False
    if analysis.get("fit") == "misses" and t in ("B", "C") and rng.random() < 0.35:
        hint = NEED_HINTS.get(profile.need_category)
        if hint and hint not in state.setdefault("hints", []):
            state["hints"].append(hint)
            parts.append(hint)
            hinted = True
    if profile.personality != "passive" and t in ("A", "B") and delta > 0 and rng.random() < 0.3:
        parts.append(rng.choice(QUESTIONS))
    text = " ".join(parts)
    plan = {"attitude": "positive" if delta > 0 else "neutral" if delta == 0 else "negative",
            "goal": "keep confiding" if delta > 0 else "show the reply missed" if delta < 0 else "keep talking",
            "tone": {"A": "warm, open", "B": "cautious", "C": "curt, doubtful"}.get(t, "curt"),
            "content": "react" + (f" to {problem}" if problem else "") + ", tell a new detail"
                       + (", hint at what I need" if hinted else "")}
    return _result(plan, text, leave=False)


def _result(plan: dict[str, str], text: str, leave: bool) -> dict[str, Any]:
    planning = "\n".join(f"{i}. {k.capitalize()}: {v}" for i, (k, v) in enumerate(plan.items(), 1))
    return {"planning": planning, "plan": plan, "reply": text, "leave": leave}
