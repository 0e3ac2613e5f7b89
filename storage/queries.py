"""Read queries over stored dialogues grouped in collections: the Transcripts view's lists and the input of
every collection score (simulator.evaluation.transcripts.dialogues_summary).

A collection key names one group of dialogues: `import:FILE` (an imported transcript file), `eval:RUN` (a
benchmark run), `job:JOB` (a training job's dialogues outside any benchmark run) or `source:SOURCE` (live,
CLI and chat dialogues of no job nor run).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from sqlalchemy import ColumnElement, Engine, func, select

from storage.db import read_scope
from storage.models import Dialogue

SCORED_STATUSES = ("finished", "failed")  # a dialogue in one of these has ended; "failed" = ended with an error
COLLECTION_KINDS = ("import", "eval", "job", "source")


def collection_key(d: dict[str, Any]) -> str:
    """The collection a stored dialogue (a dict of its columns) belongs to."""
    if d.get("source") == "import":
        return f"import:{d.get('collection', '')}"
    if d.get("eval_run_id") is not None:
        return f"eval:{d['eval_run_id']}"
    if d.get("job_id") is not None:
        return f"job:{d['job_id']}"
    return f"source:{d.get('source') or 'rollout'}"


def collection_filter(key: str) -> tuple[ColumnElement, ...]:
    """The WHERE clauses selecting a collection's dialogues. Raises ValueError naming a bad key."""
    kind, _, value = key.partition(":")
    if kind not in COLLECTION_KINDS:
        raise ValueError(f"collection key: unknown kind {kind!r} in {key!r}; one of {', '.join(COLLECTION_KINDS)}")
    if kind == "import":
        return (Dialogue.source == "import", Dialogue.collection == value)
    if kind in ("eval", "job") and not value.isdigit():
        raise ValueError(f"collection key: {kind} needs a numeric id, got {value!r}")
    if kind == "eval":
        return (Dialogue.eval_run_id == int(value),)
    if kind == "job":
        return (Dialogue.job_id == int(value), Dialogue.eval_run_id.is_(None))
    return (Dialogue.source == value, Dialogue.job_id.is_(None), Dialogue.eval_run_id.is_(None))


def store_collections(store: Engine) -> list[tuple[str, int]]:
    """(key, dialogue count) of every collection other than imported files: sources of dialogues of no job
    nor run, then benchmark runs (newest first), then training jobs (newest first)."""
    out: list[tuple[str, int]] = []
    with read_scope(store) as s:
        for src, n in s.execute(select(Dialogue.source, func.count(Dialogue.id)).where(
                Dialogue.source != "import", Dialogue.job_id.is_(None), Dialogue.eval_run_id.is_(None))
                .group_by(Dialogue.source)):
            out.append((f"source:{src}", n))
        for run, n in s.execute(select(Dialogue.eval_run_id, func.count(Dialogue.id))
                                .where(Dialogue.eval_run_id.is_not(None)).group_by(Dialogue.eval_run_id)
                                .order_by(Dialogue.eval_run_id.desc())):
            out.append((f"eval:{run}", n))
        for job, n in s.execute(select(Dialogue.job_id, func.count(Dialogue.id))
                                .where(Dialogue.job_id.is_not(None), Dialogue.eval_run_id.is_(None))
                                .group_by(Dialogue.job_id).order_by(Dialogue.job_id.desc())):
            out.append((f"job:{job}", n))
    return out


def collection_dialogues(store: Engine, key: str, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` dialogues of a collection, oldest first: id, external_id, name, final_emotion,
    outcome, status."""
    with read_scope(store) as s:
        rows = s.scalars(select(Dialogue).where(*collection_filter(key)).order_by(Dialogue.id.desc()).limit(limit))
        return [{"id": d.id, "external_id": d.external_id or "",
                 "name": (d.persona_snapshot or {}).get("name") or d.persona_id or "",
                 "final_emotion": d.final_emotion, "outcome": d.outcome, "status": d.status}
                for d in reversed(rows.all())]


def scored_finals(store: Engine, where: Sequence[ColumnElement]) -> list[Optional[float]]:
    """Final emotions of the ended dialogues matching `where`, in id order; None for a dialogue that ended
    with an error (scored as one by simulator.evaluation.scoring)."""
    with read_scope(store) as s:
        rows = s.execute(select(Dialogue.final_emotion, Dialogue.status)
                         .where(*where, Dialogue.status.in_(SCORED_STATUSES)).order_by(Dialogue.id)).all()
    return [None if status == "failed" or e is None else e for e, status in rows]


def fingerprint_groups(store: Engine, where: Sequence[ColumnElement]) -> list[dict[str, Any]]:
    """The simulators (fingerprint hash and fingerprint) of the ended dialogues matching `where`, with how
    many each scored and the `where` of that group, in order of first appearance: scores are only ever taken
    within one of them."""
    with read_scope(store) as s:
        rows = s.execute(select(Dialogue.fingerprint_hash, Dialogue.simulator_fingerprint)
                         .where(*where, Dialogue.status.in_(SCORED_STATUSES)).order_by(Dialogue.id)).all()
    groups: dict[str, dict[str, Any]] = {}
    for fp_hash, fp in rows:
        group = groups.setdefault(fp_hash or "", {"fingerprint_hash": fp_hash or "", "fingerprint": fp or {}, "n": 0,
                                                  "where": (*where, Dialogue.fingerprint_hash == (fp_hash or ""))})
        group["n"] += 1
    return list(groups.values())
