"""What a queued job waits for, in the views' words: the jobs ahead of it (trainer.jobs.admission.jobs_ahead), each
with its time left, and the wait they add to the job's own expectation.

A job's time left is its pace so far (its progress over the time since it started) once it has made progress;
before that, for a training job, its plan's time per step times its steps (app.services.plans.training_plan:
a timed plan of the same settings). The wait is the longest time left among the running jobs ahead: every
estimate here is an "about", never a bound, and the words say so.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from storage import Job, read_scope
from storage.models import utcnow


def time_left_s(job: Job, now: Optional[datetime] = None) -> Optional[float]:
    """About how long a live job has left (None: not known yet)."""
    now = now or utcnow()
    started = job.started_at if isinstance(job.started_at, datetime) else None
    run_s = max(0.0, (now - started).total_seconds()) if started else 0.0
    done = float(job.progress or 0.0)
    if job.status == "running" and started and 0 < done < 1:
        return run_s * (1 - done) / done
    if job.kind == "train":
        from app.services.plans.training_plan import planned_step_seconds

        per_step = planned_step_seconds(dict(job.config or {}))
        steps = int(job.total_steps or (job.config or {}).get("steps") or 0)
        if per_step and steps:
            return max(0.0, per_step * steps - run_s)
    return None


def queue_wait(store: Any, job_id: int) -> tuple[str, Optional[float]]:
    """('queued behind #2 (train, about 10.5 h left)', the wait in seconds) for a queued job of the queued kinds;
    ('', 0.0) when it waits for nothing; the wait is None when a job ahead has no estimate yet."""
    from trainer.benchmarking.progress import duration_text
    from trainer.jobs.admission import jobs_ahead
    from trainer.jobs.queue import QUEUED_KINDS

    with read_scope(store) as s:
        job = s.get(Job, int(job_id))
        if job is None or job.status != "queued" or job.kind not in QUEUED_KINDS:
            return "", 0.0
        ahead = jobs_ahead(s, int(job_id))
        if not ahead:
            return "", 0.0
        now = utcnow()
        lefts = {j.id: time_left_s(j, now) for j in ahead}
        first = min(ahead, key=lambda j: (j.status != "running", j.id))
        left = lefts[first.id]
        said = (f"about {duration_text(left)} left" if left is not None else
                "itself waiting" if first.status == "queued" else "time left not known yet")
        more = f", then {len(ahead) - 1} more" if len(ahead) > 1 else ""
        running = [lefts[j.id] for j in ahead if j.status == "running"]
        wait = None if not running or any(v is None for v in running) or len(running) < len(ahead) else max(running)
        return f"queued behind #{first.id} ({first.kind}, {said}){more}", wait


def expectation_with_wait(expected: str, wait: Optional[float]) -> str:
    """The form's expectation with the queue's wait in it: 'Expected: about 2 min once it starts, after about
    10.5 h of waiting' ('' stays '')."""
    from trainer.benchmarking.progress import duration_text

    if not expected:
        return ""
    if wait is None:
        return f"{expected} It waits first, for a time not known yet (see the jobs ahead of it)."
    return f"{expected} It waits first: about {duration_text(wait)} before it starts."
