"""Human-played corpora: dialogues where real people played the user and rated the other side, read into the
store as human dialogues (source "human", collection = the corpus name) so any simulated user can be measured
against those people (trainer.benchmarking.shadow_jobs, simulator.evaluation.human_agreement).

Two formats (docs/human-evaluation.md has both in full):

  esconv  ESConv's release (Liu et al., ACL 2021): a JSON array of conversations (or one per line) with
          situation, problem_type, emotion_type, survey_score.seeker (initial / final emotion intensity 1-5,
          empathy, relevance) and dialog: turns with speaker (seeker / supporter; usr / sys; speaker /
          listener), content and annotation (strategy on supporter turns, feedback 1-5 on some seeker turns).
          The seeker is the user, the supporter the policy; feedback is the people's score of the help so far;
          intensity falls as the seeker feels better (state_better "lower").
  jsonl   one dialogue a line: {"id", "score_scale": [lo, hi], "turns": [{"role": "user"|"policy", "text",
          "score"?}], "state": {"pre", "post", "scale": [lo, hi], "better": "lower"|"higher"}?,
          "persona": {"situation", "problem_type", "emotion_type", or profile fields}?}

Consecutive messages by one speaker become one turn (texts joined by a newline, the last score kept, every
score listed). Stored per user turn: inner.score (and inner.scores); per dialogue: config.score_scale,
config.state, config.groups {problem_type, emotion_type}, config.survey. Import is all-or-nothing unless
keep_valid, and names every bad conversation by its position and line.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from simulator.llm.hashing import canonical_json
from simulator.personas.profile import Profile, ProfileError
from storage import Dialogue, Turn, code_version, read_scope, session_scope

FORMATS = ("esconv", "jsonl")
USER_NAMES = ("seeker", "usr", "speaker", "user")
POLICY_NAMES = ("supporter", "sys", "listener", "policy", "assistant")
ESCONV_SCALE = (1.0, 5.0)
GROUP_KEYS = ("problem_type", "emotion_type")
PROFILE_KEYS = ("name", "persona", "background", "hidden_need", "need_category", "personality", "language")


@dataclass
class HumanImport:
    """What an import did: the stored dialogue ids, one message per bad conversation, and those already there."""

    corpus: str
    dialogue_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"human:{self.corpus}: {len(self.dialogue_ids)} dialogue(s) imported"
        if self.duplicates:
            text += f", {len(self.duplicates)} already in the store (skipped)"
        if self.errors:
            text += f", {len(self.errors)} bad: " + "; ".join(self.errors[:20])
        return text


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
    base = {"id": f"{corpus}-{external_id}"[:64], "name": f"{corpus} seeker {external_id}",
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
            "survey": survey if isinstance(survey, dict) else {}}


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
    persona = record.get("persona") or {}
    if not isinstance(persona, dict):
        raise ValueError(f"{where}: persona: must be an object")
    groups = {k: _text(persona.get(k), f"{where}: persona.{k}").strip() for k in GROUP_KEYS}
    return {"id": None if rid is None else str(rid).strip(), "turns": turns, "score_scale": list(scale) if scale else None,
            "state": state, "groups": groups, "persona": {k: persona[k] for k in PROFILE_KEYS if k in persona},
            "situation": _text(persona.get("situation"), f"{where}: persona.situation").strip(), "survey": {}}


def split_records(text: str, fmt: str) -> list[tuple[str, Any]]:
    """(where, parsed record) per conversation: "conversation N (line L)" of a JSON array, "line L" of JSONL.
    A record that is not JSON comes back as the ValueError to report."""
    stripped = text.lstrip()
    if fmt == "esconv" and stripped.startswith("["):
        decoder, out = json.JSONDecoder(), []
        pos, n = text.index("[") + 1, 0
        while True:
            while pos < len(text) and text[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(text):
                raise ValueError(f"line {text.count(chr(10)) + 1}: the JSON array is not closed")
            if text[pos] == "]":
                return out
            n += 1
            line = text.count("\n", 0, pos) + 1
            try:
                record, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise ValueError(f"conversation {n} (line {exc.lineno}): not JSON: {exc.msg}") from None
            out.append((f"conversation {n} (line {line})", record))
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as exc:
                out.append((f"line {number}", ValueError(f"line {number}: not JSON: {exc.msg}")))
    return out


def read_corpus(text: str, fmt: str, corpus: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(normalised dialogues, one message per bad conversation). ValueError on an unknown format or name."""
    if fmt not in FORMATS:
        raise ValueError(f"--format: one of {', '.join(FORMATS)}, got {fmt!r}")
    if not corpus or not all(c.isalnum() or c in "-_." for c in corpus) or len(corpus) > 100:
        raise ValueError(f"--name: a corpus name of letters, digits, - _ . (at most 100), got {corpus!r}")
    good, errors = [], []
    for where, record in split_records(text.removeprefix("\ufeff"), fmt):
        try:
            if isinstance(record, ValueError):
                raise record
            d = (read_esconv if fmt == "esconv" else read_generic)(record, where)
            d["turns"] = merge_turns(d["turns"])
            if not any(t["role"] == "assistant" for t in d["turns"]) or not any(t["role"] == "user" for t in d["turns"]):
                raise ValueError(f"{where}: needs turns of both the user and the policy")
            d["id"] = d["id"] or hashlib.sha256(canonical_json(record).encode()).hexdigest()[:12]
            d["profile"] = persona_profile(corpus, d["id"], d["groups"], d["situation"], d["persona"])
            d["where"] = where
        except ProfileError as exc:
            errors.append(f"{where}: persona: " + "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))
            continue
        except ValueError as exc:
            errors.append(str(exc))
            continue
        good.append(d)
    return good, errors


def import_corpus(store: Any, text: str, fmt: str, corpus: str, keep_valid: bool = False,
                  file_name: str = "") -> HumanImport:
    """Store a corpus's dialogues as human dialogues of collection `corpus`. All or nothing by default; with
    keep_valid the good ones are stored and each bad one named. Dialogues already imported (same id in the
    corpus) are skipped and listed."""
    report = HumanImport(corpus=corpus)
    dialogues, report.errors = read_corpus(text, fmt, corpus)
    seen: set[str] = set()
    with read_scope(store) as s:
        have = set(s.scalars(select(Dialogue.external_id).where(Dialogue.source == "human",
                                                                Dialogue.collection == corpus)))
    fresh = []
    for d in dialogues:
        if d["id"] in have:
            report.duplicates.append(d["id"])
        elif d["id"] in seen:
            report.errors.append(f"{d['where']}: id: {d['id']!r} appears twice in the file")
        else:
            seen.add(d["id"])
            fresh.append(d)
    if report.errors and not keep_valid:
        return report
    version = code_version()
    with session_scope(store) as s:
        for d in fresh:
            row = Dialogue(persona_id=None, persona_snapshot=d["profile"].to_dict(), source="human", collection=corpus,
                           external_id=d["id"], policy_ref=f"people:{corpus}", status="finished", outcome="imported",
                           n_turns=sum(t["role"] == "assistant" for t in d["turns"]), code_version=version,
                           config={"format": fmt, "corpus": corpus, "file": file_name, "where": d["where"],
                                   "score_scale": d["score_scale"], "state": d["state"], "groups": d["groups"],
                                   "survey": d["survey"]})
            for i, t in enumerate(d["turns"]):
                inner: dict[str, Any] = {"score": t["score"]} if t["score"] is not None else {}
                if len(t["scores"]) > 1:
                    inner["scores"] = t["scores"]
                if t["strategies"]:
                    inner["strategy"] = t["strategies"]
                if t["messages"] > 1:
                    inner["messages"] = t["messages"]
                row.turns.append(Turn(index=i, role=t["role"], text=t["text"], inner=inner))
            s.add(row)
            s.flush()
            report.dialogue_ids.append(row.id)
    return report


def human_sets(store: Any) -> list[dict[str, Any]]:
    """The stored human corpora: name and number of dialogues."""
    from sqlalchemy import func

    query = (select(Dialogue.collection, func.count(Dialogue.id)).where(Dialogue.source == "human",
                                                                         Dialogue.collection != "")
             .group_by(Dialogue.collection).order_by(Dialogue.collection))
    with read_scope(store) as s:
        return [{"name": c, "n": n} for c, n in s.execute(query)]


def human_set_ids(store: Any, spec: str) -> list[int]:
    """The dialogue ids of `human:NAME`, oldest first; ValueError naming the problem."""
    kind, _, name = (spec or "").partition(":")
    if kind != "human" or not name.strip():
        raise ValueError(f"--set: {spec!r} is not a human set; write human:NAME (import one with import-human)")
    with read_scope(store) as s:
        ids = list(s.scalars(select(Dialogue.id).where(Dialogue.source == "human", Dialogue.collection == name.strip())
                             .order_by(Dialogue.id)))
    if not ids:
        known = ", ".join(f"human:{h['name']}" for h in human_sets(store)) or "none yet"
        raise ValueError(f"--set: {spec!r} names no stored human dialogues (stored: {known})")
    return ids
