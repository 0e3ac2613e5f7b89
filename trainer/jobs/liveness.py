"""A job's liveness, derived when it is read, and the reaper: the one writer of "interrupted".

Only a job's owner (the process holding the job folder's lock, trainer.jobs.owner) writes its status.
Readers derive what the stored status cannot say:

    stored running, nobody holds the job's lock                          -> "dead"
    stored queued and launched (a pid), lock free and the process gone   -> "dead"
    stored running, heartbeat older than STALE_AFTER_S, owner alive      -> "stalled"
    anything else                                                        -> the stored status

"dead" can be resumed at once; "stalled" is a live owner (a stopped or starved process): it keeps its job
and its place in the queue until it goes on, is cancelled, or is stopped by a resume with stop-owner.
A launched job whose process is still starting up (no lock yet, process alive) stays "queued".

A job of the ray backend, or a local one whose owner runs on another host, has no lock this machine can read:
its liveness comes from the store and the backend (trainer.jobs.ray_jobs). It is "dead" when its heartbeat is
late and Ray says its Ray job ended (or no longer knows it; a local job of another host is never judged dead
from here, only "stalled"), "stalled" when the heartbeat is late and Ray says it runs or does not answer.

`reap_dead_jobs` writes "interrupted" (with the reason) on a dead job only while holding that job's lock
and after checking again that its process is gone, so it can never race a live owner. The app runs it at
startup and every job process before taking its turn in the queue; `reopen` (resume) does the same for
the one job it reopens.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional

from sqlalchemy import select

from storage import Experiment, Job, Store, read_scope, session_scope
from storage.models import utcnow
from trainer.jobs import ray_jobs
from trainer.jobs.backend import RAY, host_name, job_resources
from trainer.jobs.owner import JobLock, owner_pid, pid_alive

STALE_AFTER_S = 30.0
LIVE_STORED = ("running", "queued")
DERIVED_STATUSES = ("stalled", "dead")


def _fresh(job: Job, stale_after_s: float, now: Optional[datetime] = None) -> bool:
    now = now or utcnow()
    return job.heartbeat_at is not None and now - job.heartbeat_at <= timedelta(seconds=stale_after_s)


def shown_status(job: Job, stale_after_s: float = STALE_AFTER_S) -> tuple[str, str]:
    """(the status to show, why it differs from the stored one or ''); see the module docstring."""
    if job.status in LIVE_STORED and job.backend == RAY:
        return _ray_status(job, stale_after_s)
    if job.status not in LIVE_STORED or job.pid is None:
        return job.status, ""
    if job.host and job.host != host_name():  # its lock file is another machine's to read
        if job.status == "running" and not _fresh(job, stale_after_s):
            return "stalled", (f"stalled: no heartbeat since {job.heartbeat_at} (more than {stale_after_s:g} s); its "
                               f"process {job.pid} runs on {job.host}, where it can be checked")
        return job.status, ""
    owner = owner_pid(job.output_dir) if job.output_dir else None
    if owner is None and (job.status == "running" or not pid_alive(job.pid)):
        return "dead", (f"dead: process {job.pid} is gone (nobody holds the job); resume continues from the last "
                        "checkpoint")
    if job.status == "running" and not _fresh(job, stale_after_s):
        return "stalled", (f"stalled: no heartbeat since {job.heartbeat_at} (more than {stale_after_s:g} s) but its "
                           f"process {owner or job.pid} is alive and still owns the job")
    return job.status, ""


def _ray_status(job: Job, stale_after_s: float) -> tuple[str, str]:
    """A Ray job's shown status: from its heartbeat in the store and Ray's word on its Ray job."""
    if job.pid is not None and _fresh(job, stale_after_s):
        return job.status, ""
    if job.pid is None and not job.backend_job_id:
        return job.status, ""
    state = ray_jobs.state(job.backend_address, job.backend_job_id)
    if state in (*ray_jobs.TERMINAL, ray_jobs.MISSING):
        said = "Ray no longer knows it" if state == ray_jobs.MISSING else f"it is {state}"
        if job.pid is None:
            return "dead", f"dead: Ray job {job.backend_job_id} ended before its process took the job ({said})"
        return "dead", (f"dead: no heartbeat since {job.heartbeat_at} and Ray job {job.backend_job_id} ended ({said}); "
                        "resume continues from the last checkpoint")
    if job.pid is None:  # submitted: waiting for a node with what it asked for (or the cluster does not answer)
        return job.status, waiting_text(job) if state == "PENDING" else ""
    why = "the Ray cluster does not answer" if state == ray_jobs.UNREACHABLE else \
        f"Ray job {job.backend_job_id} is {state}"
    return "stalled", (f"stalled: no heartbeat since {job.heartbeat_at} (more than {stale_after_s:g} s); {why} "
                       f"(process {job.pid} on {job.host})")


def _amounts(asked: dict[str, float]) -> str:
    names = {"GPU": "GPU", "CPU": "CPU", "memory": "GiB memory"}
    shown = [(k, v / 2 ** 30 if k == "memory" else v) for k, v in sorted(asked.items(), key=lambda kv: kv[0] != "GPU")]
    return ", ".join(f"{v:g} {names.get(k, k)}" for k, v in shown if v)


def waiting_text(job: Job) -> str:
    """What a Ray job Ray has not started yet waits for: the resources it asked for, and whether the cluster
    has them at all (its nodes' totals), e.g. "waiting for 1 GPU, 1 CPU: no node of the cluster has a GPU"."""
    asked = {{"entrypoint_num_cpus": "CPU", "entrypoint_num_gpus": "GPU", "entrypoint_memory": "memory"}[k]: float(v)
             for k, v in job_resources(job.kind, job.config or {}).items()}
    text = f"waiting for {_amounts(asked)} (Ray job {job.backend_job_id} is PENDING until one node has them free)"
    load = ray_jobs.cluster_load(job.backend_address)
    if load is None:
        return text
    lacking = [k for k, v in asked.items() if v and load["totals"].get(k, 0.0) < v]
    if lacking:
        return f"{text}; no node of the cluster has {' or '.join(_amounts({k: asked[k]}) for k in lacking)}"
    demand = "; ".join(f"{_amounts(shape)} x{count}" for shape, count in load["demand"])
    return f"{text}; the cluster's pending demand: {demand}" if demand else text


def _reap_unlocked(store: Store, job_id: int, seen: tuple) -> bool:
    """Write "interrupted" on a dead job that no lock file guards (a Ray job): in one write transaction, only when
    the row is still as it was read dead (same status, pid, host, heartbeat), so a beat in between wins."""
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        if (job.status, job.pid, job.host, job.heartbeat_at) != seen:
            return False
        job.status, job.finished_at = "interrupted", utcnow()
        who = f"process {job.pid} on {job.host or 'its node'}" if job.pid else "its process"
        job.error = (f"interrupted: {who} is gone (Ray job {job.backend_job_id} ended); resume continues from the "
                     "last checkpoint")
        return True


def reap_dead_jobs(store: Store) -> list[int]:
    """Write "interrupted" on every dead job, each under its own lock (a Ray job: under the store's write lock,
    the row unchanged since it was read); returns their ids. A job whose lock is taken meanwhile (its process
    came up) or whose process is alive is left to it."""
    with read_scope(store) as s:
        live = [j for j in s.scalars(select(Job).where(Job.status.in_(LIVE_STORED)))
                if j.pid is not None or j.backend == RAY]
        remote = [(j.id, (j.status, j.pid, j.host, j.heartbeat_at)) for j in live
                  if j.backend == RAY and shown_status(j)[0] == "dead"]
        dead = [(j.id, j.pid, j.output_dir) for j in live
                if j.backend != RAY and j.output_dir and shown_status(j)[0] == "dead"]
    reaped = [job_id for job_id, seen in remote if _reap_unlocked(store, job_id, seen)]
    for job_id, pid, folder in dead:
        lock = JobLock(folder)
        if not lock.acquire():
            continue
        try:
            with session_scope(store) as s:
                job = s.get(Job, job_id)
                if job.status in LIVE_STORED and job.pid == pid and not pid_alive(pid):
                    job.status, job.finished_at = "interrupted", utcnow()
                    job.error = f"interrupted: process {pid} is gone; resume continues from the last checkpoint"
                    reaped.append(job_id)
        finally:
            lock.release()
    return reaped


def runner_lives(pid: Optional[int], host: str, heartbeat_at: Optional[datetime],
                 stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether the experiment runner a row names lives (trainer.experiments.owner): its heartbeat is fresh and,
    when it runs on this host, its pid lives."""
    if pid is None or heartbeat_at is None or utcnow() - heartbeat_at > timedelta(seconds=stale_after_s):
        return False
    return pid_alive(pid) if host == host_name() else True


def live_count(store: Store) -> int:
    """What runs or waits to run now, every kind together: the live jobs (queued or running and not dead:
    training, benchmark, comparison, persona generation, import, an experiment's cells) and the live
    experiment runners."""
    with read_scope(store) as s:
        jobs = sum(shown_status(j)[0] != "dead"
                   for j in s.scalars(select(Job).where(Job.status.in_(LIVE_STORED))))
        runners = sum(runner_lives(e.runner_pid, e.runner_host, e.runner_heartbeat_at)
                      for e in s.scalars(select(Experiment).where(Experiment.status.in_(LIVE_STORED))))
    return jobs + runners


def admission_error(store: Store, needed: int = 1) -> str:
    """Why a web caller may not start `needed` more jobs now ('' when it may): with them, more than the
    owner's --max-live-jobs would be queued or running (live_count: every job, whatever its kind, and every
    experiment runner). The command line has no ceiling."""
    from simulator.access import current_access

    limit = current_access().max_live_jobs
    if not limit:
        return ""
    live = live_count(store)
    if live + needed <= limit:
        return ""
    asked = "" if needed == 1 else f" and this needs {needed} (an experiment's runner and its first cell)"
    return (f"{live} jobs are queued or running{asked}, the most the lab's owner allows from the web page is "
            f"{limit} (--max-live-jobs {limit}): cancel one or wait for one to end")
