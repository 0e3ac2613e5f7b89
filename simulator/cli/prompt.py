"""`python -m simulator prompt render`: the exact chat messages one simulator step would send.

Reads one JSON request on stdin:
    {"pack": "own" | "sage:DIR" | "v1", "profile": {RLVER/SAGE profile keys}, "step": "emotion" | "reply",
     "emotion": N, "history": [{"role", "content"}, ...],
     "planning": {"TargetCompletion", "activity", "analyse"}}   (reply step; omit for the opening)
and prints {"messages": [...]}. `history` is the dialogue as the step sees it: for the emotion step up to
and including the policy's latest reply; for the reply step the same (the new user message is what the
step writes). `emotion` is the emotion before the change for the emotion step and after it for the reply
step, as SAGE passes them. With `sage:DIR` the messages are byte-identical to what SAGE's functions build.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("render",), help="render: print the messages of one step")


def render_request(req: Any) -> list[dict]:
    """The messages for one request (see the module docstring); ValueError naming the bad field."""
    from simulator.personas.io import profile_from_rlver
    from simulator.user.packs import load_pack

    if not isinstance(req, dict):
        raise ValueError("request: must be a JSON object")
    for key, kind in (("profile", dict), ("history", list)):
        if not isinstance(req.get(key), kind):
            raise ValueError(f"{key}: required ({kind.__name__})")
    step = req.get("step")
    if step not in ("emotion", "reply"):
        raise ValueError(f"step: must be 'emotion' or 'reply', got {step!r}")
    emotion = req.get("emotion", 40)
    if not isinstance(emotion, (int, float)) or isinstance(emotion, bool):
        raise ValueError(f"emotion: must be a number, got {emotion!r}")
    planning = req.get("planning") or None
    if planning is not None and not (isinstance(planning, dict) and
                                     all(isinstance(planning.get(k), str) for k in ("TargetCompletion", "activity", "analyse"))):
        raise ValueError("planning: must hold TargetCompletion, activity and analyse as text")
    history = req["history"]
    for i, m in enumerate(history):
        if not (isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)):
            raise ValueError(f"history[{i}]: must be {{'role': 'user'|'assistant', 'content': text}}")
    pack = load_pack(str(req.get("pack", "own")))
    if pack is not None:
        missing = [k for k in ("player", "scene") if not isinstance(req["profile"].get(k), str)]
        if missing:
            raise ValueError(f"profile: {', '.join(missing)} required (text)")
        if step == "emotion":
            return pack.emotion_messages(req["profile"], emotion, history)
        return pack.reply_messages(req["profile"], emotion, history, planning)
    profile, errs = profile_from_rlver(req["profile"])
    if profile is None:
        raise ValueError("profile: " + "; ".join(f"{k}: {v}" for k, v in errs.items()))
    return asyncio.run(_v1_messages(profile, step, float(emotion), history, planning or {}))


async def _v1_messages(profile: Any, step: str, emotion: float, history: list[dict], planning: dict) -> list[dict]:
    """The earlier (v1) templates, captured from the agent itself (so they are what a run sends)."""
    from simulator.llm.client import BackendError, Completion
    from simulator.user.agent import SentientAgent

    class Capture:
        name, native_steps, model = "capture", False, "capture"
        messages: list[dict] = []

        def fingerprint(self) -> dict[str, Any]:
            return {"backend": "capture"}

        async def complete(self, messages: list[dict]) -> Completion:
            Capture.messages = messages
            raise BackendError("captured")

    agent = SentientAgent(profile, Capture(), pack="v1")
    agent.emotion = emotion
    earlier, reply = (history[:-1], history[-1]["content"]) if history and history[-1]["role"] == "assistant" \
        else (history, "")
    try:
        if step == "emotion":
            await agent._emotion_step(earlier, reply)
        else:
            await agent._reply_step(earlier, reply, {**planning, "change": 0}, 0.0)
    except BackendError:
        pass
    return Capture.messages


def run(args: argparse.Namespace) -> int:
    try:
        req = json.loads(sys.stdin.read())
        messages = render_request(req)
    except json.JSONDecodeError as e:
        print(f"error: stdin: not JSON ({e})", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"messages": messages}, ensure_ascii=False))
    return 0
