"""Rating rounds: which stored turns a rater sees, recording their guesses, and pooling ratings as JSONL.

A rating set is named by one spec:
    persona:SPEC        dialogues of the personas a persona spec names (builtin:heldout, set:NAME, ids ...)
    fingerprint:HASH    dialogues whose simulator fingerprint hash starts with HASH
    eval:RUN            the dialogues of a benchmark run
    comparison:ID       both dialogues of every pair of a comparison
    dialogue:ID         one dialogue
Every user turn answering a policy reply with a stored change is one item; for a dialogue a person played
(source "human") the simulator's change is its shadow judgement's. A rater sees the persona, the dialogue up
to the reply (user messages without emotions) and the reply, never the simulator's change before answering.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from simulator.personas.bounds import loads_line
from storage.db import read_scope
from storage.models import ComparisonPair, Dialogue
from storage.ratings import (
    RATING_FIELDS,
    DuplicateRating,
    add_rating,
    add_ratings,
    human_turn_pairs,
    list_ratings,
    rated_keys,
    shadows_of,
)
from storage.rows import get_or_raise

SET_KINDS = ("persona", "fingerprint", "eval", "comparison", "dialogue")
MAX_CHANGE = 100.0  # a rated change lies in [-100, 100]: the whole emotion range


def set_dialogue_ids(store: Any, spec: str) -> list[int]:
    """The dialogue ids a rating-set spec names, oldest first. ValueError naming the problem."""
    kind, _, value = (spec or "").strip().partition(":")
    value = value.strip()
    if kind not in SET_KINDS or not value:
        raise ValueError(f"rating set: {spec!r} is not a rating set; one of "
                         + ", ".join(f"{k}:..." for k in SET_KINDS))
    if kind in ("eval", "comparison", "dialogue") and not value.isdigit():
        raise ValueError(f"rating set: {kind}: needs a numeric id, got {value!r}")
    query = select(Dialogue.id).order_by(Dialogue.id)
    with read_scope(store) as s:
        if kind == "persona":
            from simulator.personas.sets import PersonaSpecError
            from simulator.personas.specs import resolve_personas

            try:
                ids = [p.id for p in resolve_personas(value, store)]
            except PersonaSpecError as exc:
                raise ValueError(f"rating set: {exc}") from None
            found = list(s.scalars(query.where(Dialogue.persona_id.in_(ids))))
        elif kind == "fingerprint":
            found = list(s.scalars(query.where(Dialogue.fingerprint_hash.startswith(value))))
        elif kind == "eval":
            found = list(s.scalars(query.where(Dialogue.eval_run_id == int(value))))
        elif kind == "dialogue":
            found = list(s.scalars(query.where(Dialogue.id == int(value))))
        else:
            pairs = s.execute(select(ComparisonPair.a_dialogue_id, ComparisonPair.b_dialogue_id)
                              .where(ComparisonPair.comparison_id == int(value))).all()
            found = sorted({i for pair in pairs for i in pair})
    if not found:
        raise ValueError(f"rating set: {spec!r} names no stored dialogues")
    return found


def judged_turns(store: Any, dialogue_id: int) -> list[dict[str, Any]]:
    """The dialogue's items: user turns answering a policy reply, each with the simulator's change (the stored
    one, or the shadow judgement's for a dialogue a person played) and its fingerprint hash."""
    with read_scope(store) as s:
        d = get_or_raise(s, Dialogue, dialogue_id, ValueError, what="dialogue:")
        turns = [(t.index, t.role, t.delta, t.inner or {}) for t in d.turns]
        source, fp_hash = d.source, d.fingerprint_hash
    shadows = {sh["turn_index"]: sh for sh in shadows_of(store, dialogue_id)} if source == "human" else {}
    items = []
    for pos, (index, role, delta, inner) in enumerate(turns):
        if role != "user" or pos == 0 or turns[pos - 1][1] != "assistant":
            continue
        if source == "human":
            sh = shadows.get(index)
            if sh is None or sh["delta"] is None:
                continue
            items.append({"dialogue_id": dialogue_id, "turn_index": index, "simulator_delta": sh["delta"],
                          "fingerprint_hash": sh["fingerprint_hash"], "inner": sh["inner"]})
        elif delta is not None:
            items.append({"dialogue_id": dialogue_id, "turn_index": index, "simulator_delta": float(delta),
                          "fingerprint_hash": fp_hash, "inner": inner})
    return items


def rating_queue(store: Any, spec: str, rater: str) -> list[dict[str, Any]]:
    """The items of a rating set the rater has not rated yet, in order (ValueError on a bad or empty set)."""
    rater = check_rater(rater)
    done = {(d, t) for d, t, _ in rated_keys(store, rater)}
    items = [i for d in set_dialogue_ids(store, spec) for i in judged_turns(store, d)]
    if not items:
        raise ValueError(f"rating set: {spec!r} has no turns with an emotion change to rate")
    return [{"dialogue_id": i["dialogue_id"], "turn_index": i["turn_index"]} for i in items
            if (i["dialogue_id"], i["turn_index"]) not in done]


def blind_view(store: Any, dialogue_id: int, turn_index: int) -> dict[str, Any]:
    """What a rater sees for an item: the persona, the messages before the turn without any emotion, and the
    policy reply being judged. Nothing of the simulator's reaction."""
    with read_scope(store) as s:
        d = get_or_raise(s, Dialogue, dialogue_id, ValueError, what="dialogue:")
        before = [{"role": t.role, "text": t.text} for t in d.turns if t.index < turn_index]
        persona = dict(d.persona_snapshot or {})
    return {"persona": persona, "history": before[:-1], "reply": before[-1]["text"] if before else ""}


def check_rater(rater: Any) -> str:
    """A rater's name: text, or a whole-number id (kept as its digits, e.g. 7 -> "7")."""
    if isinstance(rater, int) and not isinstance(rater, bool):
        return str(rater)
    name = rater.strip() if isinstance(rater, str) else ""
    if not name:
        if rater is None or isinstance(rater, str):
            raise ValueError("rater: a name is required (your login name, or type one)")
        raise ValueError(f"rater: must be a name or a whole-number id, got {rater!r}")
    return name


def check_change(value: Any, name: str = "change", strict: bool = False) -> float:
    """A rated emotion change: a number in [-100, 100] (ValueError naming the field otherwise). `strict` (files):
    only a JSON number counts; text such as "5" or "1e1" is refused. true / false are never numbers."""
    if isinstance(value, bool) or (strict and not isinstance(value, (int, float))):
        raise ValueError(f"{name}: must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number, got {value!r}") from None
    if math.isnan(number) or not -MAX_CHANGE <= number <= MAX_CHANGE:
        raise ValueError(f"{name}: must lie between -100 and 100, got {value!r}")
    return number


def record_rating(store: Any, rater: str, dialogue_id: int, turn_index: int, change: Any, rating_set: str = "",
                  note: str = "") -> dict[str, Any]:
    """Store a rater's change for one item and return the simulator's (to reveal now). ValueError on bad input
    (nothing stored); DuplicateRating when the rater rated the item already (the first rating kept)."""
    rater, delta = check_rater(rater), check_change(change)
    item = next((i for i in judged_turns(store, int(dialogue_id)) if i["turn_index"] == int(turn_index)), None)
    if item is None:
        raise ValueError(f"turn: turn {turn_index} of dialogue {dialogue_id} is not a judged user turn")
    add_rating(store, dialogue_id=int(dialogue_id), turn_index=int(turn_index), rater=rater, delta=delta,
               simulator_delta=item["simulator_delta"], fingerprint_hash=item["fingerprint_hash"],
               rating_set=rating_set or "", note=note or "")
    return item


def agreement_rows(store: Any) -> list[dict[str, Any]]:
    """Every stored rating plus every human-played turn against its shadow judgement (rater = the player)."""
    return list_ratings(store) + human_turn_pairs(store)


def export_jsonl(store: Any) -> str:
    """Every stored rating as JSONL (one rating per line, with its persona's id, need and personality)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in list_ratings(store))


@dataclass
class ImportReport:
    imported: int = 0
    errors: list[str] = field(default_factory=list)  # "line N: field: problem"


TEXT_FIELDS = ("fingerprint_hash", "rating_set", "note", "persona_id", "need_category", "personality", "source")


def check_rating(row: Any) -> dict[str, Any]:
    """One rating line's fields with strict types (ValueError naming the first bad field): integer ids, a JSON
    number for each change, a name or whole-number id for the rater, text (or null) for the grouping fields."""
    if not isinstance(row, dict):
        raise ValueError("a rating must be a JSON object")
    for key in ("dialogue_id", "turn_index"):
        if not isinstance(row.get(key), int) or isinstance(row.get(key), bool):
            raise ValueError(f"{key}: must be an integer, got {row.get(key)!r}")
    row["rater"] = check_rater(row.get("rater"))
    row["delta"] = check_change(row.get("delta"), "delta", strict=True)
    if row.get("simulator_delta") is not None:
        row["simulator_delta"] = check_change(row["simulator_delta"], "simulator_delta", strict=True)
    for key in TEXT_FIELDS:
        if row.get(key) is not None and not isinstance(row[key], str):
            raise ValueError(f"{key}: must be text, got {row[key]!r}")
    return row


def read_rating_lines(text: str) -> tuple[list[tuple[int, dict]], list[str]]:
    """(line number, rating) of each readable line and one message per bad line (JSON and its bounds, shape,
    types and ranges). A leading byte-order mark is ignored."""
    rows, errors = [], []
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        if not line.strip():
            continue
        row, problem = loads_line(line.removesuffix("\r"))  # the bounds every import holds to (never too deep)
        try:
            if problem:
                raise ValueError(": ".join(problem))
            rows.append((n, check_rating(row)))
        except ValueError as exc:
            errors.append(f"line {n}: {exc}")
    return rows, errors


def unit_conflicts(rows: list[tuple[int, dict]]) -> list[str]:
    """The store's rules on a file's ratings: a rater rates a turn once, and a turn (under one simulator
    fingerprint) has one simulator value. One message per offending line, naming the line it clashes with."""
    seen: dict[tuple, int] = {}
    simulator: dict[tuple, tuple[float, int]] = {}
    errors = []
    for n, row in rows:
        turn = (row["dialogue_id"], row["turn_index"], row.get("fingerprint_hash") or "")
        where = f"turn {row['turn_index']} of dialogue {row['dialogue_id']}"
        if (turn, row["rater"]) in seen:
            errors.append(f"line {n}: rater {row['rater']!r} already rated {where} (line {seen[turn, row['rater']]})")
            continue
        seen[turn, row["rater"]] = n
        value = row.get("simulator_delta")
        if value is None:
            continue
        if turn in simulator and simulator[turn][0] != value:
            errors.append(f"line {n}: simulator_delta: {value:g} conflicts with {simulator[turn][0]:g} given for "
                          f"{where} on line {simulator[turn][1]}")
        simulator.setdefault(turn, (value, n))
    return errors


def decode_text(data: bytes, path: str) -> str:
    """UTF-8 text (a byte-order mark accepted); ValueError with the file, line and byte otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValueError(f"{path}: line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at column {column}); "
                         "save the file as UTF-8") from None


def read_ratings_file(path: str) -> list[dict[str, Any]]:
    """The ratings of a JSONL file, for a report without a store, under the store's rules (strict types, no
    rater rating a turn twice, one simulator value per turn). ValueError listing every bad line. Each rating
    keeps its "line"."""
    with open(path, "rb") as fh:
        rows, errors = read_rating_lines(decode_text(fh.read(), path))
    errors += unit_conflicts(rows)
    if errors:
        errors.sort(key=lambda e: int(e.split()[1].rstrip(":")))
        raise ValueError(f"{path}: " + "; ".join(errors))
    return [{**r, "line": n} for n, r in rows]


def import_jsonl(store: Any, text: str, keep_valid: bool = False) -> ImportReport:
    """Import ratings. Each line must name a judged turn of a stored dialogue that its rater has not rated (in
    the store or earlier in the file). Default all-or-nothing: any bad line and nothing is stored;
    keep_valid=True stores the good lines and reports each bad one."""
    rows, errors = read_rating_lines(text)
    taken = {(d, t, r) for d, t, r in rated_keys(store)}
    good = []
    for n, row in rows:
        key = (row["dialogue_id"], row["turn_index"], row["rater"])
        try:
            item = next((i for i in judged_turns(store, row["dialogue_id"]) if i["turn_index"] == row["turn_index"]),
                        None)
        except ValueError as exc:
            errors.append(f"line {n}: {exc}")
            continue
        if item is None:
            errors.append(f"line {n}: turn_index: turn {row['turn_index']} of dialogue {row['dialogue_id']} is not "
                          "a judged user turn")
        elif key in taken:
            errors.append(f"line {n}: rater {row['rater']!r} already rated turn {row['turn_index']} of dialogue "
                          f"{row['dialogue_id']}")
        else:
            taken.add(key)
            good.append({**{k: row.get(k) for k in RATING_FIELDS if k in row},
                         "rating_set": row.get("rating_set") or "", "note": row.get("note") or "",
                         "simulator_delta": item["simulator_delta"], "fingerprint_hash": item["fingerprint_hash"]})
    errors.sort(key=lambda e: int(e.split()[1].rstrip(":")))
    if errors and not keep_valid:
        return ImportReport(0, errors)
    return ImportReport(add_ratings(store, good) if good else 0, errors)


def reveal(item: dict[str, Any] | None) -> dict[str, Any]:
    """The simulator's side of an item, once rated: its change and inner thoughts."""
    inner = (item or {}).get("inner") or {}
    thoughts = {k: inner[k] for k in ("analyse", "activity", "content", "TargetCompletion", "thoughts") if inner.get(k)}
    return {"simulator_delta": (item or {}).get("simulator_delta"), "thoughts": thoughts}


__all__ = [
    "SET_KINDS",
    "DuplicateRating",
    "ImportReport",
    "agreement_rows",
    "blind_view",
    "check_change",
    "check_rating",
    "decode_text",
    "export_jsonl",
    "import_jsonl",
    "judged_turns",
    "rating_queue",
    "read_ratings_file",
    "record_rating",
    "reveal",
    "set_dialogue_ids",
    "unit_conflicts",
]
