"""Persona generations run as jobs, for the Personas view: start one (a job of kind "personas": its own
process with the owner lock, heartbeat, Cancel and resume of every job; trainer.jobs.queue), cancel it, resume
it, and read a generation with the status its job gives it.

The generation row's own status is written by the job process (its owner). Whether that process is alive
is the job's to say (derived when read: trainer.jobs.liveness), so a generation whose process died (an app
killed with it, a kill -9) shows as "interrupted" and resumable, never "running"; a resume makes only the
slots that have no candidate yet. A generation run by `python -m simulator personas generate` has no
job: it runs in that command's own process and its row's status is shown as it is.
"""
from __future__ import annotations

from typing import Any, Optional

from simulator.personas import generation_store
from simulator.personas.generation import GenerationSpec, PersonaGenerator
from storage import Store
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

JOB_KIND = "personas"
LIVE = ("queued", "running", "stalled")
# the job's shown status -> the generation's (a succeeded job leaves the generation's own final status)
FROM_JOB = {"queued": "queued", "running": "running", "stalled": "stalled", "dead": "interrupted",
            "interrupted": "interrupted", "failed": "failed", "cancelled": "cancelled"}


def start(store: Store, store_url: str, spec: GenerationSpec, gen: PersonaGenerator) -> tuple[int, int]:
    """Record the generation (queued) and its job, and launch the job's process; (generation id, job id).
    JobError, with nothing recorded, when a web caller is at the owner's ceiling of live jobs."""
    from trainer.jobs.liveness import admission_error

    if problem := admission_error(store):
        raise job_queue.JobError(f"jobs: {problem}")
    gid = generation_store.create_generation(store, spec, gen, status="queued")
    job_id = job_queue.create_job(store, JOB_KIND, {"generation_id": gid}, name=f"personas: generation {gid}",
                                  seed=spec.seed)
    job_queue.launch(store_url, job_id)
    return gid, job_id


def job_of(store: Store, generation_id: int) -> Optional[dict[str, Any]]:
    return job_queue.job_for(store, JOB_KIND, "generation_id", generation_id)


def generation(store: Store, generation_id: int) -> Optional[dict[str, Any]]:
    """gs.get_generation with `status` as the job gives it (`stored_status`: the row's), `job_id` and
    `resumable` (its job stopped before every slot was made)."""
    g = generation_store.get_generation(store, generation_id)
    if g is None:
        return None
    job = job_of(store, generation_id)
    g["stored_status"], g["job_id"], g["resumable"] = g["status"], None, False
    if job is None:
        return g
    g["job_id"] = job["id"]
    g["status"] = FROM_JOB.get(job["status"], g["status"])
    if job["status"] in ("dead", "interrupted", "failed") and not g["error"]:
        g["error"] = job["error"]
    g["resumable"] = job["status"] in job_queue.RESUMABLE and g["n_done"] < g["n_planned"]
    return g


def is_live(g: Optional[dict[str, Any]]) -> bool:
    return bool(g) and g["status"] in LIVE


def cancel(store: Store, generation_id: Optional[int]) -> str:
    """Cancel the generation's job (the job process stops starting calls and keeps what it made)."""
    job = job_of(store, generation_id) if generation_id else None
    if job is None or job["status"] not in LIVE:
        return "No generation is running."
    status = job_control.cancel(store, job["id"])
    return f"Cancelling generation {generation_id} (job #{job['id']}: {status}): no further calls; the candidates " \
           "made are kept."


def resume(store: Store, store_url: str, generation_id: Optional[int]) -> str:
    """Resume a stopped generation's job: it makes the slots that have no candidate yet."""
    g = generation(store, generation_id) if generation_id else None
    if g is None or not g["resumable"]:
        return "Nothing to resume: pick an interrupted, failed or cancelled generation with slots left."
    try:
        job_control.resume(store, store_url, g["job_id"])
    except (job_queue.JobError, OSError) as exc:
        return f"Not resumed: {exc}"
    return f"Generation {generation_id} resumes: {g['n_planned'] - g['n_done']} slot(s) left (job #{g['job_id']})."


def choices(store: Store) -> list[tuple[str, int]]:
    """(label, id) of every generation, newest first: 'generation 3 · interrupted · 4/10'."""
    out = []
    for row in generation_store.list_generations(store):
        g = generation(store, row["id"]) or row
        out.append((f"generation {g['id']} · {g['status']} · {g['n_done']}/{g['n_planned']}", g["id"]))
    return out
