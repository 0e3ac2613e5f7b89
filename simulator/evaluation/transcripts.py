"""SAGE transcript files (`*_result.jsonl`) in and out of the store, and their benchmark summary.

A SAGE record: id, emo_point (final emotion), emo_state, target, player, scene, character, topic, task and
history, a list of {role, content}; user turns also carry `emotion-point`, `thinking` (the planning of
the reply, text) and `planning` (the emotion analysis, a dict: activity, TargetCompletion, content,
analyse, change). Imported, each record is one Dialogue (source "import", collection = file name,
external_id = record id) and each history item one Turn, with emotion, delta (= change) and
inner = {"analysis": the planning dict, "planning": the thinking text}. Export writes the same format
back, so an exported file scores exactly as the dialogues it came from.

A record may carry "error" (written by our export for dialogues that ended with an error): it scores as
an errored dialogue (see simulator.evaluation.scoring).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

from sqlalchemy import Engine, delete, func, select

from simulator.evaluation.scoring import BenchmarkSummary, sentient_summary
from simulator.personas.bounds import quote
from simulator.personas.io import (
    BadFileError,
    LineError,
    Source,
    dumps_jsonl,
    name_from_persona,
    read_bytes,
    read_jsonl,
    write_atomic,
)
from simulator.personas.profile import PERSONALITIES, Profile, need_category_from_text
from simulator.user.rules import EmotionRules, tier
from storage import Dialogue, Turn, code_version, read_scope, session_scope
from storage.dialogues import load_dialogue
from storage.queries import scored_finals

SAGE_KEYS = ("id", "emo_point", "emo_state", "target", "player", "scene", "character", "topic", "task", "history")
TURN_KEYS = ("role", "content", "emotion-point", "thinking", "planning", "think")
_PERSONALITY_OF = {zh: key for key, zh in PERSONALITIES.items()}


@dataclass
class TranscriptImport:
    """What a transcript import did: stored dialogue ids, bad lines, and records already in the store."""

    collection: str
    dialogue_ids: list[int] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # record ids already imported in this collection
    n_lines: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        head = f"{self.collection}: {len(self.dialogue_ids)} dialogue(s) imported"
        if self.duplicates:
            head += f", {len(self.duplicates)} already in the store (skipped)"
        if self.errors:
            head += f", {len(self.errors)} problem(s)"
        return "\n".join([head] + [str(e) for e in self.errors])


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def check_record(record: dict[str, Any]) -> dict[str, str]:
    """Field -> problem for a SAGE record (empty when usable)."""
    errs: dict[str, str] = {}
    if not isinstance(record.get("id"), str) or not record.get("id"):
        errs["id"] = "is required (non-empty text)" if "id" in record else "is required (missing)"
    if "emo_point" not in record:
        errs["emo_point"] = "is required (missing)"
    elif not _is_number(record["emo_point"]):
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
        elif "emotion-point" in item and not _is_number(item["emotion-point"]):
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


def final_or_none(record: dict[str, Any]) -> Optional[float]:
    """The final emotion, or None for a dialogue that ended with an error."""
    return None if record.get("error") else record["emo_point"]


def summarize_file(source: Source, n_boot: int = 2000, seed: int = 0) -> BenchmarkSummary:
    """Score / success / failure / interval of a transcript file. Raises BadFileError naming bad lines."""
    records, errors, _ = read_transcripts(source)
    if errors:
        raise BadFileError(errors)
    return sentient_summary([final_or_none(r) for _, r in records], n_boot=n_boot, seed=seed)


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
        out.append(Profile.from_dict(_snapshot(r, first)))
    return out


# ---------------------------------------------------------------- records <-> store rows
def _snapshot(record: dict[str, Any], first_line: str) -> dict[str, Any]:
    """The profile as the transcript used it (not validated: a transcript is kept even if its profile
    would not pass Profile.validate)."""
    player, task, character = record.get("player", ""), record.get("task", ""), record.get("character", "")
    extra = {k: v for k, v in record.items() if k not in SAGE_KEYS and k not in ("error", "emo_point")}
    extra.update({k: record[k] for k in ("target", "topic") if k in record})
    return Profile(id=record["id"], name=name_from_persona(player) or record["id"], persona=player,
                   background=record.get("scene", ""), hidden_need=task, need_category=need_category_from_text(task),
                   personality=_PERSONALITY_OF.get(character, character), traits=[], first_line=first_line,
                   language="zh", source="sage", extra=extra).to_dict()


def _turn_fields(item: dict[str, Any]) -> dict[str, Any]:
    inner: dict[str, Any] = {}
    if "planning" in item:
        inner["analysis"] = item["planning"]
    if "thinking" in item:
        inner["planning"] = item["thinking"]
    extra = {k: v for k, v in item.items() if k not in TURN_KEYS}
    if extra:
        inner["extra"] = extra
    change = item.get("planning", {}).get("change")
    return {"role": item["role"], "text": item["content"], "think_text": item.get("think", ""),
            "emotion": item.get("emotion-point"), "delta": change if _is_number(change) else None, "inner": inner}


def _num(x: Optional[float]) -> Union[int, float, None]:
    return int(x) if isinstance(x, float) and x.is_integer() else x


def record_from_dialogue(d: dict[str, Any]) -> dict[str, Any]:
    """A stored dialogue (storage.dialogues.load_dialogue) as a SAGE record."""
    snap, cfg = d.get("persona_snapshot") or {}, d.get("config") or {}
    extra = dict(snap.get("extra") or {})
    final = d["final_emotion"]
    emo = _num(final if final is not None else 0)
    record: dict[str, Any] = {
        "id": d["external_id"] or d["persona_id"] or str(d["id"]), "emo_point": emo,
        "emo_state": cfg.get("emo_state") or f"Emotion-{tier(float(emo))}", "target": extra.pop("target", "eq"),
        "player": snap.get("persona", ""), "scene": snap.get("background", ""),
        "character": PERSONALITIES.get(snap.get("personality", ""), snap.get("personality", "")),
        "topic": extra.pop("topic", ""), "task": snap.get("hidden_need", ""), "history": []}
    for t in d["turns"]:
        inner = t.get("inner") or {}
        item: dict[str, Any] = {"role": t["role"], "content": t["text"]}
        if t["think_text"]:
            item["think"] = t["think_text"]
        if t["role"] == "user":
            if isinstance(inner.get("planning"), str):
                item["thinking"] = inner["planning"]
            if t["emotion"] is not None:
                item["emotion-point"] = _num(t["emotion"])
            if isinstance(inner.get("analysis"), dict) or t["delta"] is not None:
                analysis = dict(inner.get("analysis") or {})
                if t["delta"] is not None:
                    analysis.setdefault("change", _num(t["delta"]))
                item["planning"] = analysis
        item.update(inner.get("extra") or {})
        record["history"].append(item)
    record.update(extra)
    if d.get("status") == "failed" or d.get("outcome") == "error":  # scored as an errored dialogue
        record["error"] = d.get("error") or "failed"
    return record


def import_file(store: Engine, source: Source, keep_valid: bool = False, collection: Optional[str] = None,
                max_turns: int = 10) -> TranscriptImport:
    """Store a transcript file as Dialogues in one transaction. Any bad line -> nothing stored unless
    keep_valid. Records whose id is already in the collection are skipped and listed in `duplicates`."""
    if collection is None:
        if isinstance(source, (bytes, bytearray)):
            raise ValueError("collection is required when importing bytes")
        collection = Path(source).name
    report = TranscriptImport(collection=collection)
    records, report.errors, report.n_lines = read_transcripts(source)
    if (report.errors and not keep_valid) or not records:
        return report
    with read_scope(store) as s:
        stored = set(s.scalars(select(Dialogue.external_id).where(Dialogue.source == "import",
                                                                   Dialogue.collection == collection)))
    report.duplicates = [r["id"] for _, r in records if r["id"] in stored]
    records = [(n, r) for n, r in records if r["id"] not in stored]
    digest = hashlib.sha256(read_bytes(source)).hexdigest()
    policy = collection[: -len("_result.jsonl")] if collection.endswith("_result.jsonl") else collection
    rules, version = EmotionRules(max_turns=max_turns), code_version()
    with session_scope(store) as s:
        rows = [_dialogue_row(n, r, collection, policy, digest, rules, version) for n, r in records]
        s.add_all(rows)
        s.flush()
        report.dialogue_ids = [row.id for row in rows]
    return report


def _dialogue_row(number: int, r: dict[str, Any], collection: str, policy: str, digest: str,
                  rules: EmotionRules, version: str) -> Dialogue:
    turns = [Turn(index=i, **_turn_fields(item)) for i, item in enumerate(r["history"])]
    n_policy = sum(t.role == "assistant" for t in turns)
    first = next((t.text for t in turns if t.role == "user"), "")
    outcome = "error" if r.get("error") else (rules.end_outcome(r["emo_point"], n_policy) or "goodbye")
    config = {"format": "sage", "file": collection, "sha256": digest, "line": number, "max_turns": rules.max_turns}
    if "emo_state" in r:
        config["emo_state"] = r["emo_state"]
    return Dialogue(persona_id=r["id"], persona_snapshot=_snapshot(r, first), source="import", collection=collection,
                    external_id=r["id"], policy_ref=policy, status="failed" if r.get("error") else "finished",
                    final_emotion=r["emo_point"], outcome=outcome, error=r.get("error", ""), n_turns=n_policy,
                    config=config, code_version=version, turns=turns)


def export_sage_jsonl(store: Engine, dialogue_ids: Iterable[int], path: Union[str, Path]) -> int:
    """Write stored dialogues as a SAGE `*_result.jsonl` file (whole file or nothing); returns how many."""
    records, used = [], set()
    for i in dialogue_ids:
        d = load_dialogue(store, i)
        if d is None:
            raise KeyError(f"dialogue {i} does not exist")
        record = record_from_dialogue(d)
        if record["id"] in used:  # the same profile played more than once: ids stay unique in a file
            record["id"] = f"{record['id']}#{d['id']}"
        used.add(record["id"])
        records.append(record)
    write_atomic(path, dumps_jsonl(records))
    return len(records)


# ---------------------------------------------------------------- queries for the transcript view
def list_collections(store: Engine, source: str = "import") -> list[dict[str, Any]]:
    """Collections (imported files) with their dialogue counts, newest first."""
    query = (select(Dialogue.collection, func.count(Dialogue.id), func.max(Dialogue.created_at))
             .where(Dialogue.source == source).group_by(Dialogue.collection).order_by(func.max(Dialogue.created_at).desc()))
    with read_scope(store) as s:
        return [{"collection": c, "n": n} for c, n, _ in s.execute(query)]


def list_dialogues(store: Engine, collection: str) -> list[dict[str, Any]]:
    """The dialogues of a collection in import order: id, external_id, name, final_emotion, outcome, n_turns."""
    with read_scope(store) as s:
        rows = s.scalars(select(Dialogue).where(Dialogue.collection == collection).order_by(Dialogue.id))
        return [{"id": d.id, "external_id": d.external_id, "name": (d.persona_snapshot or {}).get("name", ""),
                 "topic": ((d.persona_snapshot or {}).get("extra") or {}).get("topic", ""),
                 "final_emotion": d.final_emotion, "outcome": d.outcome, "n_turns": d.n_turns} for d in rows]


def delete_collection(store: Engine, collection: str, source: str = "import") -> int:
    """Delete a collection's dialogues (their turns go with them); returns how many."""
    with session_scope(store) as s:
        return s.execute(delete(Dialogue).where(Dialogue.collection == collection, Dialogue.source == source)).rowcount


def dialogues_summary(store: Engine, where: Sequence[Any], n_boot: int = 2000,
                      seed: int = 0) -> Optional[BenchmarkSummary]:
    """The benchmark summary of the ended dialogues matching `where` (a collection, an eval run, ...), in
    dialogue order; None when none has ended. The one place a set of stored dialogues is scored."""
    finals = scored_finals(store, where)
    return sentient_summary(finals, n_boot=n_boot, seed=seed) if finals else None


def collection_summary(store: Engine, collection: str, n_boot: int = 2000, seed: int = 0) -> BenchmarkSummary:
    """The benchmark summary of a collection's finished and failed dialogues (ValueError when there is none)."""
    summary = dialogues_summary(store, (Dialogue.collection == collection,), n_boot=n_boot, seed=seed)
    if summary is None:
        raise ValueError(f"collection {collection!r}: no finished dialogues to score")
    return summary
