"""SAGE transcript files (`*_result.jsonl`) read as records and as the profiles they were played with: the
record check, the reader that reports every bad line, and the profile snapshot of a record. The store side
(import, export, summaries) is simulator/evaluation/transcripts.py."""
from __future__ import annotations

from typing import Any

from simulator.personas.bounds import quote
from simulator.personas.io import BadFileError, LineError, Source, name_from_persona, read_jsonl
from simulator.personas.profile import PERSONALITIES, Profile, need_category_from_text

SAGE_KEYS = ("id", "emo_point", "emo_state", "target", "player", "scene", "character", "topic", "task", "history")
TURN_KEYS = ("role", "content", "emotion-point", "thinking", "planning", "think")
PERSONALITY_OF = {zh: key for key, zh in PERSONALITIES.items()}


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def check_record(record: dict[str, Any]) -> dict[str, str]:
    """Field -> problem for a SAGE record (empty when usable)."""
    errs: dict[str, str] = {}
    if not isinstance(record.get("id"), str) or not record.get("id"):
        errs["id"] = "is required (non-empty text)" if "id" in record else "is required (missing)"
    if "emo_point" not in record:
        errs["emo_point"] = "is required (missing)"
    elif not is_number(record["emo_point"]):
        errs["emo_point"] = f"must be a number, got {type(record['emo_point']).__name__}"
    for key in ("emo_state", "target", "player", "scene", "character", "topic", "task", "error"):
        if key in record and not isinstance(record[key], str):
            errs[key] = f"must be text, got {type(record[key]).__name__}"
    history = record.get("history")
    if not isinstance(history, list):
        errs["history"] = "is required (a list of turns)" if history is None else "must be a list of turns"
        return errs
    for i, item in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(item, dict):
            errs[where] = f"must be an object, got {type(item).__name__}"
        elif item.get("role") not in ("user", "assistant"):
            errs[f"{where}.role"] = f"must be 'user' or 'assistant', got {quote(item.get('role'))}"
        elif not isinstance(item.get("content"), str):
            errs[f"{where}.content"] = "must be text"
        elif "emotion-point" in item and not is_number(item["emotion-point"]):
            errs[f"{where}.emotion-point"] = "must be a number"
        elif "planning" in item and not isinstance(item["planning"], dict):
            errs[f"{where}.planning"] = "must be an object"
        elif any(k in item and not isinstance(item[k], str) for k in ("thinking", "think")):
            errs[f"{where}.thinking"] = "must be text"
        if len(errs) >= 5:
            break
    return errs


def read_transcripts(source: Source) -> tuple[list[tuple[int, dict[str, Any]]], list[LineError], int]:
    """Valid records with their line numbers, every bad line, and the count of non-blank lines."""
    records, errors, n_lines = read_jsonl(source)
    good: list[tuple[int, dict[str, Any]]] = []
    first_line: dict[str, int] = {}
    for number, record in records:
        errs = check_record(record)
        if not errs and record["id"] in first_line:
            errs = {"id": f"duplicate id {quote(record['id'])} (first on line {first_line[record['id']]})"}
        errors.extend(LineError(number, k, v) for k, v in errs.items())
        if not errs:
            first_line[record["id"]] = number
            good.append((number, record))
    errors.sort(key=lambda e: e.line)
    return good, errors, n_lines


def is_transcript_file(source: Source) -> bool:
    """True when the first record of a JSONL file is a SAGE transcript (it carries a history)."""
    records, _, _ = read_jsonl(source)
    return bool(records) and isinstance(records[0][1].get("history"), list)


def profiles_from_transcripts(source: Source) -> list[Profile]:
    """The profiles a SAGE result file was played with (first line = the first recorded user message).
    Raises BadFileError naming every bad line."""
    records, errors, _ = read_transcripts(source)
    if errors:
        raise BadFileError(errors)
    out = []
    for _, r in records:
        first = next((m["content"] for m in r["history"] if m["role"] == "user"), "")
        out.append(Profile.from_dict(profile_snapshot(r, first)))
    return out


def profile_snapshot(record: dict[str, Any], first_line: str) -> dict[str, Any]:
    """The profile as the transcript used it (not validated: a transcript is kept even if its profile
    would not pass Profile.validate)."""
    player, task, character = record.get("player", ""), record.get("task", ""), record.get("character", "")
    extra = {k: v for k, v in record.items() if k not in SAGE_KEYS and k not in ("error", "emo_point")}
    extra.update({k: record[k] for k in ("target", "topic") if k in record})
    return Profile(id=record["id"], name=name_from_persona(player) or record["id"], persona=player,
                   background=record.get("scene", ""), hidden_need=task, need_category=need_category_from_text(task),
                   personality=PERSONALITY_OF.get(character, character), traits=[], first_line=first_line,
                   language="zh", source="sage", extra=extra).to_dict()
