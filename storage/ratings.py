"""People in the loop: human ratings of stored turns and the simulated user's shadow judgements of human turns.

Two tables beside the dialogue tables (nothing is added to them):
  - `human_rating`: a rater's guess of the emotion change a persona felt after one policy reply (the user turn
    that answers it), with the simulator's change as it was stored when the rating was made. One row per
    dialogue, turn and rater: a rater never rates the same turn twice.
  - `shadow_judgement`: beside each turn a person played (dialogue source "human"), what a simulated user
    would have felt given the same history and reply: its change, emotion and inner thoughts, computed after
    the person answered.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Float, ForeignKey, Integer, UniqueConstraint, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from storage.db import read_scope, session_scope
from storage.kept_text import KeptString, KeptText
from storage.models import Base, Created, Dialogue, Recorded
from storage.rows import as_dict


class HumanRating(Base, Created):
    """One rater's emotion change for one judged user turn (the turn answering a policy reply)."""

    __tablename__ = "human_rating"
    __table_args__ = (UniqueConstraint("dialogue_id", "turn_index", "rater"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id", ondelete="CASCADE"), index=True)
    turn_index: Mapped[int] = mapped_column(Integer)  # the user turn's message position
    rater: Mapped[str] = mapped_column(KeptString(200), index=True)
    delta: Mapped[float] = mapped_column(Float)  # the rater's change
    simulator_delta: Mapped[float | None] = mapped_column(Float, nullable=True)  # the stored change then
    fingerprint_hash: Mapped[str] = mapped_column(KeptString(64), default="", index=True)  # whose change that was
    rating_set: Mapped[str] = mapped_column(KeptString(200), default="")  # how the turn was chosen (e.g. eval:3)
    note: Mapped[str] = mapped_column(KeptText, default="")


class ShadowJudgement(Base, Recorded):
    """What a simulated user would have felt at a turn a person played (never shown before they answered)."""

    __tablename__ = "shadow_judgement"
    __table_args__ = (UniqueConstraint("dialogue_id", "turn_index", "fingerprint_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id", ondelete="CASCADE"), index=True)
    turn_index: Mapped[int] = mapped_column(Integer)  # the person's turn answering the reply
    fingerprint: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the simulator that judged
    fingerprint_hash: Mapped[str] = mapped_column(KeptString(64), default="", index=True)
    emotion_before: Mapped[float | None] = mapped_column(Float, nullable=True)  # the person's, before
    delta: Mapped[float | None] = mapped_column(Float, nullable=True)
    emotion: Mapped[float | None] = mapped_column(Float, nullable=True)
    inner: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the simulator's analysis and plan
    reply_text: Mapped[str] = mapped_column(KeptText, default="")  # what the simulator would have said
    error: Mapped[str] = mapped_column(KeptText, default="")


RATING_FIELDS = ("dialogue_id", "turn_index", "rater", "delta", "simulator_delta", "fingerprint_hash", "rating_set",
                 "note")


class DuplicateRating(ValueError):
    """The rater already rated that turn; the earlier rating is kept."""


def add_rating(store: Any, **fields: Any) -> int:
    """Store one rating (RATING_FIELDS) and return its id; DuplicateRating when the rater rated the turn."""
    unknown = set(fields) - set(RATING_FIELDS)
    if unknown:
        raise TypeError(f"unknown rating field(s): {', '.join(sorted(unknown))}")
    try:
        with session_scope(store) as s:
            row = HumanRating(**fields)
            s.add(row)
            s.flush()
            return row.id
    except IntegrityError:
        raise DuplicateRating(f"rater {fields.get('rater')!r} already rated turn {fields.get('turn_index')} of "
                              f"dialogue {fields.get('dialogue_id')}; the first rating is kept") from None


def add_ratings(store: Any, rows: Sequence[dict[str, Any]]) -> int:
    """Store several ratings in one transaction: all or none (IntegrityError on a duplicate, nothing kept)."""
    with session_scope(store) as s:
        for fields in rows:
            s.add(HumanRating(**{k: fields[k] for k in RATING_FIELDS if k in fields}))
    return len(rows)


def rated_keys(store: Any, rater: str | None = None) -> set[tuple[int, int, str]]:
    """(dialogue_id, turn_index, rater) of every stored rating (of one rater when given)."""
    query = select(HumanRating.dialogue_id, HumanRating.turn_index, HumanRating.rater)
    if rater is not None:
        query = query.where(HumanRating.rater == rater)
    with read_scope(store) as s:
        return {(d, t, r) for d, t, r in s.execute(query)}


def list_ratings(store: Any, dialogue_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Every rating (of these dialogues) as a dict, with the dialogue's persona id and snapshot's need and
    personality, oldest first."""
    query = select(HumanRating, Dialogue.persona_id, Dialogue.persona_snapshot, Dialogue.source).join(
        Dialogue, Dialogue.id == HumanRating.dialogue_id).order_by(HumanRating.id)
    if dialogue_ids is not None:
        query = query.where(HumanRating.dialogue_id.in_(list(dialogue_ids)))
    out = []
    with read_scope(store) as s:
        for r, persona_id, snapshot, source in s.execute(query):
            row = {k: getattr(r, k) for k in RATING_FIELDS}
            row.update(created_at=r.created_at.isoformat(timespec="seconds"), persona_id=persona_id or "",
                       need_category=(snapshot or {}).get("need_category", ""),
                       personality=(snapshot or {}).get("personality", ""), source=source)
            out.append(row)
    return out


def add_shadow(store: Any, **fields: Any) -> int:
    """Store one shadow judgement and return its id."""
    with session_scope(store) as s:
        row = ShadowJudgement(**fields)
        s.add(row)
        s.flush()
        return row.id


def shadows_of(store: Any, dialogue_id: int) -> list[dict[str, Any]]:
    """A dialogue's shadow judgements, by turn."""
    with read_scope(store) as s:
        rows = s.scalars(select(ShadowJudgement).where(ShadowJudgement.dialogue_id == dialogue_id)
                         .order_by(ShadowJudgement.turn_index)).all()
        return [as_dict(r, exclude=("created_at",)) for r in rows]


def human_turn_pairs(store: Any) -> list[dict[str, Any]]:
    """Every human-played turn with its shadow judgement: the person's change against the simulator's."""
    from storage.models import Turn

    query = (select(ShadowJudgement, Turn.delta, Dialogue.config, Dialogue.persona_id, Dialogue.persona_snapshot)
             .join(Dialogue, Dialogue.id == ShadowJudgement.dialogue_id)
             .join(Turn, (Turn.dialogue_id == ShadowJudgement.dialogue_id) & (Turn.index == ShadowJudgement.turn_index))
             .where(ShadowJudgement.delta.is_not(None), Turn.delta.is_not(None)).order_by(ShadowJudgement.id))
    out = []
    with read_scope(store) as s:
        for sh, human_delta, config, persona_id, snapshot in s.execute(query):
            out.append({"dialogue_id": sh.dialogue_id, "turn_index": sh.turn_index,
                        "rater": (config or {}).get("player") or "anonymous player", "delta": human_delta,
                        "simulator_delta": sh.delta, "fingerprint_hash": sh.fingerprint_hash,
                        "rating_set": "play", "persona_id": persona_id or "",
                        "need_category": (snapshot or {}).get("need_category", ""),
                        "personality": (snapshot or {}).get("personality", ""), "source": "human"})
    return out
