"""Small human-played corpora written for the lab's tests, in ESConv's format and the lab's human JSONL.

The published ESConv corpus is CC BY-NC 4.0 and is not shipped; these conversations are made up, with the same
shape: a seeker and a supporter taking turns (sometimes two messages in a row), the seeker's feedback (1-5) every
few turns, emotion intensity (1-5) before and after, and the situation, problem and emotion type.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

PROBLEMS = ("job crisis", "breakup with partner", "academic pressure")
EMOTIONS = ("anxiety", "sadness", "anger")
SPELLINGS = {"seeker": ("seeker", "supporter"), "usr": ("usr", "sys"), "speaker": ("speaker", "listener")}


def esconv_conversation(k: int, rng: np.random.Generator, spelling: str = "seeker", replies: int = 6,
                        double_every: int = 3) -> dict[str, Any]:
    """Conversation k: `replies` supporter replies, the seeker's feedback after every second one, a second
    supporter message in a row every `double_every` replies; feedback and intensities drawn at random."""
    seeker, supporter = SPELLINGS[spelling]
    dialog = [{"speaker": seeker, "content": f"Hi, I have been struggling lately ({k}).", "annotation": {}}]
    for r in range(replies):
        dialog.append({"speaker": supporter, "content": f"I hear you; tell me more about it ({k}.{r}).",
                       "annotation": {"strategy": "Question"}})
        if double_every and r % double_every == double_every - 1:
            dialog.append({"speaker": supporter, "content": "That sounds really hard.",
                           "annotation": {"strategy": "Reflection of feelings"}})
        note = {"feedback": str(int(rng.integers(1, 6)))} if r % 2 == 1 else {}
        dialog.append({"speaker": seeker, "content": f"Well, it is about my situation, part {r}.", "annotation": note})
    return {"experience_type": "Current Experience", "emotion_type": EMOTIONS[k % 3], "problem_type": PROBLEMS[k % 3],
            "situation": f"I lost something that mattered to me ({k}).",
            "survey_score": {"seeker": {"initial_emotion_intensity": str(int(rng.integers(3, 6))),
                                        "final_emotion_intensity": str(int(rng.integers(1, 4))),
                                        "empathy": "4", "relevance": "5"}, "supporter": {"relevance": "4"}},
            "dialog": dialog, "seeker_question1": "", "supporter_question1": ""}


def esconv_text(n: int, seed: int = 0, spelling: str = "seeker", **kw: Any) -> str:
    """n conversations as ESConv's release writes them: one JSON array, indented."""
    rng = np.random.default_rng(seed)
    return json.dumps([esconv_conversation(k, rng, spelling, **kw) for k in range(n)], indent=2)


def jsonl_dialogue(k: int, scores: list[int], pre: float = 4, post: float = 2) -> dict[str, Any]:
    """The lab's human JSONL: one dialogue, a user score after every policy reply."""
    turns = [{"role": "user", "text": f"opening {k}"}]
    for i, score in enumerate(scores):
        turns += [{"role": "policy", "text": f"reply {k}.{i}"}, {"role": "user", "text": f"answer {k}.{i}",
                                                                  "score": score}]
    return {"id": f"d{k}", "score_scale": [1, 5], "turns": turns,
            "state": {"pre": pre, "post": post, "scale": [1, 5], "better": "lower"},
            "persona": {"situation": f"situation {k}", "problem_type": PROBLEMS[k % 3],
                        "emotion_type": EMOTIONS[k % 3]}}


def quality_dialogue(k: int, rng: np.random.Generator, replies: int = 5, score_noise: float = 0.6,
                     rated_every: int = 1) -> dict[str, Any]:
    """The lab's human JSONL, for agreement tests: reply i of dialogue k has quality q (1-5), said as q times
    "I hear you" (testkit.scripted_shadow reads it); the person's score of every `rated_every`-th answer is the
    mean quality of the replies since their last score, plus noise, rounded and clipped to 1-5. The person's
    intensity falls by the dialogue's mean quality minus 3, plus noise."""
    turns, since, qs = [{"role": "user", "text": f"opening {k}"}], [], []
    for i in range(replies):
        q = int(rng.integers(1, 6))
        qs.append(q)
        since.append(q)
        turns.append({"role": "policy", "text": "I hear you. " * q + f"(reply {k}.{i})"})
        answer: dict[str, Any] = {"role": "user", "text": f"answer {k}.{i}"}
        if (i + 1) % rated_every == 0:
            answer["score"] = int(np.clip(round(float(np.mean(since)) + rng.normal(0, score_noise)), 1, 5))
            since = []
        turns.append(answer)
    pre = int(rng.integers(3, 6))
    post = int(np.clip(round(pre - (np.mean(qs) - 3) * 1.5 + rng.normal(0, 0.5)), 1, 5))
    return {"id": f"q{k}", "score_scale": [1, 5], "turns": turns,
            "state": {"pre": pre, "post": post, "scale": [1, 5], "better": "lower"},
            "persona": {"situation": f"situation {k}", "problem_type": PROBLEMS[k % 3], "emotion_type": EMOTIONS[k % 3]}}
