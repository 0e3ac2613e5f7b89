"""What a training job is doing inside its current step, read from the dialogues it stores: the step's
dialogues finished, policy replies and tokens, tokens per second, and the time the whole job has left.

A job's own counter moves once a step (a cpu-demo step is a minute or more on 2 cores, longer on a busy
machine); this is what moves in between. Jobs that store no dialogues (store_dialogues: false) have only
their counter.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from sqlalchemy import func, select

from storage import Dialogue, Turn, read_scope
from storage.models import utcnow


def step_activity(store: Any, job_id: int) -> Optional[dict[str, Any]]:
    """The newest step's stored dialogues of a job: {step, finished, stored, replies, tokens, started,
    last_finished}; None when the job stored none."""
    with read_scope(store) as s:
        step = s.scalar(select(func.max(Dialogue.step)).where(Dialogue.job_id == job_id))
        if step is None:
            return None
        rows = s.execute(select(Dialogue.id, Dialogue.status, Dialogue.created_at, Dialogue.finished_at).where(
            Dialogue.job_id == job_id, Dialogue.step == step)).all()
        ids = [r.id for r in rows]
        replies, tokens = s.execute(select(func.count(Turn.id), func.coalesce(func.sum(Turn.n_tokens), 0)).where(
            Turn.dialogue_id.in_(ids), Turn.role == "assistant")).one()
    finished = [r for r in rows if r.status != "running"]
    return {"step": int(step), "finished": len(finished), "stored": len(rows), "replies": int(replies),
            "tokens": int(tokens), "started": min(r.created_at for r in rows),
            "last_finished": max((r.finished_at for r in finished if r.finished_at), default=None)}


def _duration(seconds: float) -> str:
    from trainer.benchmarking.progress import duration_text

    return duration_text(seconds)


def step_progress_text(store: Any, detail: Optional[dict[str, Any]], now: Optional[datetime] = None) -> str:
    """'step 3 of 46: 12 of 32 dialogues finished, 40 policy replies, 3.1 tok/s; about 1.2 h left' for a live
    training job ('' for other jobs or before anything is stored)."""
    if not detail or detail.get("kind") != "train" or detail.get("status") not in ("queued", "running", "stalled"):
        return ""
    config = detail.get("config") or {}
    per_step = int(config.get("dialogues_per_step") or 0)
    total = int(detail.get("total_steps") or config.get("steps") or 0)
    act = step_activity(store, int(detail["id"]))
    now = now or utcnow()
    if act is None:
        return ("loading the policy and the simulated users; no dialogue of step 1 has begun yet"
                + planned_time_left(detail, total, now))
    elapsed = max(1e-9, (now - act["started"]).total_seconds())
    of = f" of {total}" if total else ""
    if per_step and act["finished"] >= per_step:
        since = (now - act["last_finished"]).total_seconds() if act["last_finished"] else 0.0
        text = f"step {act['step']}{of}: all {per_step} dialogues done, updating the policy ({_duration(since)} so far)"
    else:
        text = (f"step {act['step']}{of}: {act['finished']} of {per_step or act['stored']} dialogues finished, "
                f"{act['replies']} policy replies, {act['tokens'] / elapsed:.1f} tok/s")
    done = int(detail.get("step") or 0)  # steps finished
    started = detail.get("started_at") or detail.get("created_at")
    if total and done and isinstance(started, datetime):  # the pace of the steps done so far
        run_s = max(0.0, (now - started).total_seconds())
        text += f"; about {_duration(run_s / done * max(0, total - done))} left for the job at the pace so far"
    else:
        text += planned_time_left(detail, total, now)
    return text


def planned_time_left(detail: dict[str, Any], total: int, now: datetime) -> str:
    """'; about 10.5 h left for the job (the plan's 820 s a step, until a step of its own ends)' for a training job
    that has finished no step yet, when a timed plan of its settings exists (app.services.plans.training_plan); ''
    otherwise."""
    from app.services.plans.training_plan import planned_step_seconds

    per_step = planned_step_seconds(detail.get("config") or {})
    started = detail.get("started_at")
    if not per_step or not total or detail.get("status") == "queued":
        return ""
    run_s = max(0.0, (now - started).total_seconds()) if isinstance(started, datetime) else 0.0
    left = max(0.0, per_step * total - run_s)
    return (f"; about {_duration(left)} left for the job (the plan's {per_step:.0f} s a step, until a step of its "
            "own ends)")


def jobs_rows_now(store: Any, jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """The jobs table (app.services.training.JOB_HEADERS) with a live training job's progress read inside
    its step ('step 2/46 · 12 of 32 dialogues') rather than only the counter of finished steps."""
    from app.services.training import JOB_HEADERS, jobs_rows

    rows = jobs_rows(jobs)
    at = JOB_HEADERS.index("progress")
    from app.services.job_wait import queue_wait

    for row, job in zip(rows, jobs):
        if job.get("status") == "queued" and (waiting := queue_wait(store, int(job["id"]))[0]):
            row[JOB_HEADERS.index("note")] = waiting
        if job.get("kind") != "train" or job.get("status") not in ("queued", "running", "stalled"):
            continue
        act = step_activity(store, int(job["id"]))
        per_step = int((job.get("config") or {}).get("dialogues_per_step") or 0)
        if act is not None and act["step"] > int(job.get("step") or 0):
            if per_step and act["finished"] >= per_step:
                row[at] = f"{row[at]} · step {act['step']}: all {per_step} dialogues done, updating the policy"
            else:
                row[at] = f"{row[at]} · step {act['step']}: {act['finished']} of {per_step or act['stored']} dialogues"
    return rows
