"""The scripted server's answers to the social-cognition judge (simulator/evaluation/judge.py), for tests.

A request is the judge's when its text names all five dimensions. The answer depends on the mode: the
server's `judge_mode`, or a `judge-mode:MODE` token anywhere in the judged dialogue (so one batch can mix
behaviours):
  json         the five {score, reason} objects, scored from the assistant's messages by word rules
  fenced       the same JSON inside ```json fences with a sentence before it
  garbage      text that holds no JSON object, also when asked to repair it
  garbage_once garbage, but valid JSON when the request is the judge's repair follow-up
  refusal      a refusal in words
  hang         (the server waits past the client's timeout, then answers json)
"""
from __future__ import annotations

import json
import re
from typing import Sequence

JUDGE_MODES = ("json", "fenced", "garbage", "garbage_once", "refusal", "hang")
_DIMENSIONS = ("empathic_depth", "core_insight", "solution_crafting", "dialogue_guidance", "style_adaptability")
_WARM = re.compile(r"understand|hear you|sounds|makes sense|must be|feel|with you|listening|not your fault", re.I)
_COLD = re.compile(r"get over|whatever|calm down|overreact|not a big deal|just relax|as an ai", re.I)
_ADVICE = re.compile(r"\b(?:try|could|might|plan|step|maybe)\b", re.I)


def is_judge_request(messages: Sequence[dict]) -> bool:
    text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return all(d in text for d in _DIMENSIONS)


def judge_mode(messages: Sequence[dict], default: str) -> str:
    text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    found = re.search(r"judge-mode:(\w+)", text)
    return found.group(1) if found and found.group(1) in JUDGE_MODES else default


def judge_answer(messages: Sequence[dict], mode: str) -> str:
    repair = len(messages) > 2  # the judge's follow-up after an unreadable answer
    if mode == "refusal":
        return "I'm sorry, but I can't help with rating this conversation."
    if mode == "garbage" or (mode == "garbage_once" and not repair):
        return "Overall the assistant did fine. Scores: good, good, fair, good, very good."
    answer = json.dumps(_scores(str(messages[1].get("content", "")) if len(messages) > 1 else ""))
    return f"Here is my rating.\n```json\n{answer}\n```" if mode == "fenced" else answer


def _scores(user_prompt: str) -> dict:
    """Word rules over the assistant's messages: warmth -> empathy and style, a question -> guidance and
    insight, suggestion words -> solutions; dismissive words take points off everything."""
    said = " ".join(re.findall(r"^Assistant: (.*)$", user_prompt, re.M))
    warm, cold = len(_WARM.findall(said)), len(_COLD.findall(said))
    questions, advice = said.count("?"), len(_ADVICE.findall(said))
    raw = {"empathic_depth": 1 + 2 * warm, "core_insight": 1 + warm + questions, "solution_crafting": 1 + advice,
           "dialogue_guidance": 1 + 2 * questions, "style_adaptability": 2 + warm}
    return {d: {"score": max(1, min(5, v - 2 * cold)), "reason": f"scripted: {warm} warm, {cold} dismissive, "
                f"{questions} questions, {advice} suggestions"} for d, v in raw.items()}
