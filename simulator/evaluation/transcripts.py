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
from simulator.personas.io import BadFileError, LineError, Source, dumps_jsonl, read_bytes, write_atomic
from simulator.personas.profile import PERSONALITIES
from simulator.personas.transcript_files import TURN_KEYS, is_number, profile_snapshot, read_transcripts
from simulator.user.rules import EmotionRules, tier
from storage import Dialogue, Turn, code_version, read_scope, session_scope
from storage.dialogues import load_dialogue
from storage.queries import scored_finals


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


def final_or_none(record: dict[str, Any]) -> Optional[float]:
    """The final emotion, or None for a dialogue that ended with an error."""
    return None if record.get("error") else record["emo_point"]


def summarize_file(source: Source, n_boot: int = 2000, seed: int = 0) -> BenchmarkSummary:
    """Score / success / failure / interval of a transcript file. Raises BadFileError naming bad lines."""
    records, errors, _ = read_transcripts(source)
    if errors:
        raise BadFileError(errors)
    return sentient_summary([final_or_none(r) for _, r in records], n_boot=n_boot, seed=seed)


# ---------------------------------------------------------------- records <-> store rows
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
            "emotion": item.get("emotion-point"), "delta": change if is_number(change) else None, "inner": inner}


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
    return Dialogue(persona_id=r["id"], persona_snapshot=profile_snapshot(r, first), source="import", collection=collection,
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
