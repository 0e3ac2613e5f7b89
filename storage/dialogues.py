"""Writing dialogues and turns as they happen: one short transaction per call.

Shared by the rollout (through storage.recorder), the benchmark runner, the terminal chat and transcript import, so a
dialogue looks the same in the store wherever it came from.
"""
from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import Engine, func, select

from storage.db import code_version, read_scope, session_scope
from storage.models import Dialogue, Turn, utcnow
from storage.rows import as_dict, column_names, get_or_raise

# Dialogue columns a caller may set when starting or finishing a dialogue.
_DIALOGUE_FIELDS = set(column_names(Dialogue, exclude=("id", "created_at")))
_TURN_FIELDS = set(column_names(Turn, exclude=("id", "dialogue_id", "created_at")))


def start_dialogue(store: Engine, **fields: Any) -> int:
    """Create a running dialogue and return its id. Unknown field names raise TypeError."""
    unknown = set(fields) - _DIALOGUE_FIELDS
    if unknown:
        raise TypeError(f"unknown dialogue field(s): {', '.join(sorted(unknown))}")
    fields.setdefault("code_version", code_version())
    with session_scope(store) as s:
        d = Dialogue(**fields)
        s.add(d)
        s.flush()
        return d.id


def add_turn(store: Engine, dialogue_id: int, index: int, role: str, text: str, **fields: Any) -> int:
    """Append one turn (index is the message position, 0-based) and return its id."""
    unknown = set(fields) - _TURN_FIELDS
    if unknown:
        raise TypeError(f"unknown turn field(s): {', '.join(sorted(unknown))}")
    with session_scope(store) as s:
        t = Turn(dialogue_id=dialogue_id, index=index, role=role, text=text, **fields)
        s.add(t)
        s.flush()
        return t.id


def finish_dialogue(store: Engine, dialogue_id: int, status: str, final_emotion: Optional[float],
                    outcome: str = "", error: str = "", **fields: Any) -> None:
    """Mark a dialogue finished / failed / cancelled with its final emotion, outcome and reason."""
    unknown = set(fields) - _DIALOGUE_FIELDS
    if unknown:
        raise TypeError(f"unknown dialogue field(s): {', '.join(sorted(unknown))}")
    with session_scope(store) as s:
        d = get_or_raise(s, Dialogue, dialogue_id, KeyError)
        d.status, d.final_emotion, d.outcome, d.error = status, final_emotion, outcome, error
        d.n_turns = s.scalar(select(func.count(Turn.id)).where(Turn.dialogue_id == dialogue_id,
                                                              Turn.role == "assistant")) or 0
        d.finished_at = utcnow()
        for k, v in fields.items():
            setattr(d, k, v)


def load_dialogue(store: Engine, dialogue_id: int) -> Optional[dict[str, Any]]:
    """A dialogue with its turns as plain dicts (for views and exports), or None."""
    with read_scope(store) as s:
        d = s.get(Dialogue, dialogue_id)
        if d is None:
            return None
        return {**as_dict(d), "turns": [as_dict(t) for t in d.turns]}


def drop_dialogue(store: Engine, dialogue_id: int) -> None:
    """Delete a dialogue and its turns (a training dialogue cancelled before the policy said anything: clutter,
    not data)."""
    from sqlalchemy import delete

    with session_scope(store) as s:
        s.execute(delete(Turn).where(Turn.dialogue_id == dialogue_id))
        s.execute(delete(Dialogue).where(Dialogue.id == dialogue_id))
