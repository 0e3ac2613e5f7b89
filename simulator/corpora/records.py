"""One conversation of a human-played corpus, read and checked: ESConv's release format and the lab's human JSONL
(simulator.evaluation.human_corpora stores them; docs/human-evaluation.md has both formats in full).

Each reader returns the conversation normalised ({id, turns, score_scale, state, groups, situation, persona,
survey, policy: who supported the person, "" when the file does not say}) or raises ValueError naming where it
is and the field. Consecutive messages by one speaker become one turn (merge_turns); the persona a dialogue is
played from is built from its situation and types (persona_profile).
"""
from __future__ import annotations

import re
from typing import Any

from simulator.personas.profile import MAX_NAME_CHARS, Profile

FORMATS = ("esconv", "jsonl")
USER_NAMES = ("seeker", "usr", "speaker", "user")
POLICY_NAMES = ("supporter", "sys", "listener", "policy", "assistant")
ESCONV_SCALE = (1.0, 5.0)
GROUP_KEYS = ("problem_type", "emotion_type")
MAX_POLICY_CHARS = 200  # a dialogue's "policy": who supported the person
PROFILE_KEYS = ("name", "persona", "background", "hidden_need", "need_category", "personality", "language")


def role_of(speaker: Any, where: str) -> str:
    name = speaker.strip().lower() if isinstance(speaker, str) else None
    if name in USER_NAMES:
        return "user"
    if name in POLICY_NAMES:
        return "assistant"
    raise ValueError(f"{where}: unknown speaker {speaker!r}; one of {', '.join(USER_NAMES + POLICY_NAMES)}")


def _number(value: Any, where: str, strict: bool) -> float:
    """A JSON number (or, with strict False, ESConv's digit strings such as "4"); ValueError naming `where`."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: must be a number, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not strict and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return float(value.strip())
    raise ValueError(f"{where}: must be a number, got {value!r}")


def _scale(value: Any, where: str) -> tuple[float, float]:
    if not (isinstance(value, list) and len(value) == 2):
        raise ValueError(f"{where}: must be [lowest, highest], got {value!r}")
    lo, hi = _number(value[0], where, True), _number(value[1], where, True)
    if not lo < hi:
        raise ValueError(f"{where}: lowest must be below highest, got {value!r}")
    return lo, hi


def _in_scale(value: float, scale: tuple[float, float], where: str) -> float:
    if not scale[0] <= value <= scale[1]:
        raise ValueError(f"{where}: {value:g} lies outside the scale [{scale[0]:g}, {scale[1]:g}]")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be text, got {value!r}")
    return value


def merge_turns(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive messages by one speaker as one turn: texts joined by a newline, every score and strategy kept,
    the last score the turn's."""
    merged: list[dict[str, Any]] = []
    for t in turns:
        if merged and merged[-1]["role"] == t["role"]:
            last = merged[-1]
            last["text"] = f"{last['text']}\n{t['text']}"
            last["scores"] += t["scores"]
            last["strategies"] += t["strategies"]
            last["messages"] += 1
        else:
            merged.append({**t, "scores": list(t["scores"]), "strategies": list(t["strategies"]), "messages": 1})
    for t in merged:
        t["score"] = t["scores"][-1] if t["scores"] else None
    return merged


def persona_profile(corpus: str, external_id: str, groups: dict[str, str], situation: str,
                    given: dict[str, Any] | None = None) -> Profile:
    """The persona a human dialogue is played from: its situation and problem/emotion type, with any profile
    fields the file gives."""
    feeling = f", feeling {groups['emotion_type']}" if groups.get("emotion_type") else ""
    about = f" about {groups['problem_type']}" if groups.get("problem_type") else ""
    # an id and a name a profile may hold (simulator.personas.profile: letters, digits, - _ . :; 120 characters)
    base = {"id": re.sub(r"[^\w.:-]", "-", f"{corpus}-{external_id}")[:64],
            "name": f"{corpus} seeker {external_id}"[:MAX_NAME_CHARS],
            "persona": f"Someone who came to talk for emotional support{feeling}{about}.",
            "background": situation or "(the corpus gives no situation)",
            "hidden_need": "to feel understood and to find a way through what troubles them",
            "need_category": "deep_empathy", "personality": "negative", "source": f"human:{corpus}"[:32],
            "extra": {"corpus": corpus, **groups, "situation": situation}}
    base.update({k: v for k, v in (given or {}).items() if k in PROFILE_KEYS})
    return Profile.from_dict(base).validate()


def read_esconv(record: Any, where: str) -> dict[str, Any]:
    """One ESConv conversation, checked and normalised (ValueError naming `where` and the field)."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a conversation must be a JSON object")
    dialog = record.get("dialog")
    if not isinstance(dialog, list) or not dialog:
        raise ValueError(f"{where}: dialog: must be a non-empty list of turns")
    turns = []
    for i, t in enumerate(dialog):
        at = f"{where}: dialog[{i}]"
        if not isinstance(t, dict):
            raise ValueError(f"{at}: must be an object")
        role = role_of(t.get("speaker"), f"{at}.speaker")
        note = t.get("annotation") or {}
        if not isinstance(note, dict):
            raise ValueError(f"{at}.annotation: must be an object")
        scores = []
        if note.get("feedback") not in (None, ""):
            if role != "user":
                raise ValueError(f"{at}.annotation.feedback: only the seeker rates; this is a supporter turn")
            scores.append(_in_scale(_number(note["feedback"], f"{at}.annotation.feedback", False), ESCONV_SCALE,
                                    f"{at}.annotation.feedback"))
        strategy = _text(note.get("strategy"), f"{at}.annotation.strategy")
        turns.append({"role": role, "text": _text(t.get("content"), f"{at}.content").strip(), "scores": scores,
                      "strategies": [strategy] if strategy else []})
    survey = (record.get("survey_score") or {}).get("seeker") if isinstance(record.get("survey_score"), dict) else None
    state = None
    if isinstance(survey, dict) and survey.get("initial_emotion_intensity") not in (None, "") \
            and survey.get("final_emotion_intensity") not in (None, ""):
        state = {"pre": _in_scale(_number(survey["initial_emotion_intensity"],
                                          f"{where}: survey_score.seeker.initial_emotion_intensity", False),
                                  ESCONV_SCALE, f"{where}: survey_score.seeker.initial_emotion_intensity"),
                 "post": _in_scale(_number(survey["final_emotion_intensity"],
                                           f"{where}: survey_score.seeker.final_emotion_intensity", False),
                                   ESCONV_SCALE, f"{where}: survey_score.seeker.final_emotion_intensity"),
                 "scale": list(ESCONV_SCALE), "better": "lower"}
    groups = {k: _text(record.get(k), f"{where}: {k}").strip() for k in GROUP_KEYS}
    return {"id": None, "turns": turns, "score_scale": list(ESCONV_SCALE), "state": state, "groups": groups,
            "situation": _text(record.get("situation"), f"{where}: situation").strip(), "persona": {},
            "survey": survey if isinstance(survey, dict) else {}, "policy": ""}


def read_generic(record: Any, where: str) -> dict[str, Any]:
    """One line of the generic JSONL format, checked with strict types (ValueError naming the field)."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a dialogue must be a JSON object")
    rid = record.get("id")
    if rid is not None and not (isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid).strip()):
        raise ValueError(f"{where}: id: must be text or an integer, got {rid!r}")
    items = record.get("turns")
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: turns: must be a non-empty list")
    scale = _scale(record["score_scale"], f"{where}: score_scale") if record.get("score_scale") is not None else None
    turns = []
    for i, t in enumerate(items):
        at = f"{where}: turns[{i}]"
        if not isinstance(t, dict):
            raise ValueError(f"{at}: must be an object")
        role = role_of(t.get("role"), f"{at}.role")
        scores = []
        if t.get("score") is not None:
            if role != "user":
                raise ValueError(f"{at}.score: only the user's turns carry people's scores")
            if scale is None:
                raise ValueError(f"{at}.score: declare the dialogue's score_scale [lowest, highest] first")
            scores.append(_in_scale(_number(t["score"], f"{at}.score", True), scale, f"{at}.score"))
        text = t.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{at}.text: must be text, got {text!r}")
        turns.append({"role": role, "text": text.strip(), "scores": scores, "strategies": []})
    state = None
    if record.get("state") is not None:
        s = record["state"]
        if not isinstance(s, dict):
            raise ValueError(f"{where}: state: must be an object with pre, post, scale and better")
        sscale = _scale(s.get("scale"), f"{where}: state.scale")
        if s.get("better") not in ("lower", "higher"):
            raise ValueError(f"{where}: state.better: must be \"lower\" or \"higher\", got {s.get('better')!r}")
        state = {k: _in_scale(_number(s.get(k), f"{where}: state.{k}", True), sscale, f"{where}: state.{k}")
                 for k in ("pre", "post")}
        state.update(scale=list(sscale), better=s["better"])
    policy = record.get("policy")
    if policy is not None and not (isinstance(policy, str) and policy.strip() and len(policy) <= MAX_POLICY_CHARS):
        raise ValueError(f"{where}: policy: who supported the person (a model, checkpoint or supporter's id): "
                         f"non-empty text of at most {MAX_POLICY_CHARS} characters, got {policy!r}")
    persona = record.get("persona") or {}
    if not isinstance(persona, dict):
        raise ValueError(f"{where}: persona: must be an object")
    groups = {k: _text(persona.get(k), f"{where}: persona.{k}").strip() for k in GROUP_KEYS}
    return {"id": None if rid is None else str(rid).strip(), "turns": turns, "score_scale": list(scale) if scale else None,
            "state": state, "groups": groups, "persona": {k: persona[k] for k in PROFILE_KEYS if k in persona},
            "situation": _text(persona.get("situation"), f"{where}: persona.situation").strip(), "survey": {},
            "policy": (policy or "").strip()}
