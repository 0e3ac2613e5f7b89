"""The social-cognition judge and the store: which dialogues a set names (an eval run, a training job or
one of its steps, an imported collection, ids), saving each result as it arrives (one row per dialogue and
judge fingerprint; judging again replaces it), and a run's means per dimension for the radar."""
from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Callable, Optional, Sequence

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import selectinload

from simulator.evaluation.judge import DIMENSIONS, Judge, JudgeInput, JudgeResult
from simulator.llm.hashing import fingerprint_hash
from storage import Dialogue, JudgeScore, as_dict, code_version, read_scope, session_scope

DONE_STATUSES = ("finished", "failed")  # dialogues still running or cancelled are not judged


def select_dialogues(store: Engine, eval_run_id: Optional[int] = None, job_id: Optional[int] = None,
                     step: Optional[int] = None, collection: Optional[str] = None,
                     dialogue_ids: Optional[Sequence[int]] = None) -> list[JudgeInput]:
    """The done dialogues of exactly one set, in id order (ValueError naming the option otherwise)."""
    named = [n for n, v in (("eval_run", eval_run_id), ("job", job_id), ("collection", collection),
                            ("dialogues", dialogue_ids)) if v not in (None, "", [])]
    if len(named) != 1:
        raise ValueError("name one set of dialogues: --eval-run, --job (with --step), --collection or "
                         f"--dialogues (got {', '.join('--' + n.replace('_', '-') for n in named) or 'none'})")
    if step is not None and job_id is None:
        raise ValueError("--step: only with --job")
    where = [Dialogue.status.in_(DONE_STATUSES)]
    if eval_run_id is not None:
        where.append(Dialogue.eval_run_id == eval_run_id)
    elif job_id is not None:
        where.append(Dialogue.job_id == job_id)
        if step is not None:
            where.append(Dialogue.step == step)
    elif collection:
        where.append(Dialogue.collection == collection)
    else:
        where.append(Dialogue.id.in_(list(dialogue_ids or [])))
    with read_scope(store) as s:
        rows = s.scalars(select(Dialogue).where(*where).options(selectinload(Dialogue.turns))
                         .order_by(Dialogue.id)).all()
        items = [JudgeInput(d.id, [{"role": t.role, "content": t.text} for t in d.turns],
                            dict(d.persona_snapshot or {})) for d in rows]
    if dialogue_ids:
        missing = sorted(set(dialogue_ids) - {i.dialogue_id for i in items})
        if missing:
            raise ValueError(f"--dialogues: no finished dialogue with id {', '.join(map(str, missing))}")
    return items


def judged_ids(store: Engine, judge_hash: str, dialogue_ids: Sequence[int],
               since: Optional[datetime] = None) -> set[int]:
    """Dialogues already judged without error under this judge fingerprint (at or after `since`, if given)."""
    where = [JudgeScore.judge_hash == judge_hash, JudgeScore.status == "ok",
             JudgeScore.dialogue_id.in_(list(dialogue_ids))]
    if since is not None:
        where.append(JudgeScore.created_at >= since)
    with read_scope(store) as s:
        return set(s.scalars(select(JudgeScore.dialogue_id).where(*where)))


def save_result(store: Engine, result: JudgeResult, fingerprint: dict[str, Any]) -> None:
    """Store one result, replacing an earlier one of the same dialogue and judge fingerprint."""
    fp_hash = fingerprint_hash(fingerprint)
    with session_scope(store) as s:
        dialogue = s.get(Dialogue, result.dialogue_id)
        s.execute(delete(JudgeScore).where(JudgeScore.dialogue_id == result.dialogue_id,
                                           JudgeScore.judge_hash == fp_hash))
        s.add(JudgeScore(dialogue_id=result.dialogue_id, eval_run_id=dialogue.eval_run_id if dialogue else None,
                         judge_fingerprint=fingerprint, judge_hash=fp_hash, status=result.status,
                         error_kind=result.error_kind, error=result.error, scores=result.scores,
                         reasons=result.reasons, mean=result.mean, raw=result.raw[:20_000], attempts=result.attempts,
                         latency_s=result.latency_s, n_tokens=result.n_tokens, code_version=code_version()))


def judge_and_store(store: Engine, judge: Judge, items: Sequence[JudgeInput], force: bool = False,
                    since: Optional[datetime] = None, progress: Optional[Callable[[int, int], None]] = None,
                    stop: Optional[Callable[[], bool]] = None) -> dict[str, Any]:
    """Judge the dialogues not yet judged by this fingerprint, storing each result as it arrives. With
    `force` those judged before are judged again, except any judged at or after `since` (a forced run that
    resumes keeps what it already did). `progress(done, total)` follows each result; once `stop()` is true
    the rest is left (Judge.judge_many) and counted in `left`. Returns {judge_hash, fingerprint, judged,
    skipped, left, ok, errors: {kind: n}, results}."""
    fingerprint = judge.fingerprint()
    fp_hash = fingerprint_hash(fingerprint)
    ids = [i.dialogue_id for i in items]
    if not force:
        done = judged_ids(store, fp_hash, ids)
    else:
        done = judged_ids(store, fp_hash, ids, since) if since is not None else set()
    todo = [i for i in items if i.dialogue_id not in done]
    counted = [len(done)]

    def save(result: JudgeResult) -> None:
        save_result(store, result, fingerprint)
        counted[0] += 1
        if progress is not None:
            progress(counted[0], len(items))

    if progress is not None:
        progress(len(done), len(items))
    results = asyncio.run(judge.judge_many(todo, on_result=save, stop=stop))
    errors: dict[str, int] = {}
    for r in results:
        if r.status != "ok":
            errors[r.error_kind] = errors.get(r.error_kind, 0) + 1
    return {"judge_hash": fp_hash, "fingerprint": fingerprint, "judged": len(results), "skipped": len(done),
            "left": len(todo) - len(results), "ok": sum(r.status == "ok" for r in results), "errors": errors,
            "results": results}


def dialogue_scores(store: Engine, dialogue_ids: Sequence[int]) -> list[dict[str, Any]]:
    """Every stored judge row of these dialogues (id order), as dicts."""
    with read_scope(store) as s:
        rows = s.scalars(select(JudgeScore).where(JudgeScore.dialogue_id.in_(list(dialogue_ids)))
                         .order_by(JudgeScore.dialogue_id, JudgeScore.id)).all()
        return [as_dict(r) for r in rows]


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per judge fingerprint (never mixed): {judge_hash, fingerprint, n, n_errors, errors: {kind: n},
    means: {dimension: mean score}} over the rows judged without error; largest n first."""
    groups: dict[str, dict[str, Any]] = {}
    for r in rows:
        g = groups.setdefault(r["judge_hash"], {"judge_hash": r["judge_hash"], "fingerprint": r["judge_fingerprint"],
                                                "n": 0, "n_errors": 0, "errors": {},
                                                "_sums": dict.fromkeys(DIMENSIONS, 0)})
        if r["status"] == "ok":
            g["n"] += 1
            for d in DIMENSIONS:
                g["_sums"][d] += r["scores"].get(d, 0)
        else:
            g["n_errors"] += 1
            g["errors"][r["error_kind"]] = g["errors"].get(r["error_kind"], 0) + 1
    out = []
    for g in groups.values():
        sums = g.pop("_sums")
        g["means"] = {d: sums[d] / g["n"] for d in DIMENSIONS} if g["n"] else {}
        out.append(g)
    return sorted(out, key=lambda g: -g["n"])


def eval_run_summary(store: Engine, eval_run_id: int) -> list[dict[str, Any]]:
    """summarize() over the judge rows of an eval run's dialogues."""
    with read_scope(store) as s:
        rows = [as_dict(r) for r in s.scalars(select(JudgeScore).where(JudgeScore.eval_run_id == eval_run_id))]
    return summarize(rows)
