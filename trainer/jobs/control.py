"""Cancel and resume: acting on a job from outside its process, never racing its owner.

Only a job's owner (the process holding the job folder's lock, trainer.jobs.owner) writes its status while it
lives. From outside, `cancel` signals the owner's process group and lets the job mark itself cancelled; a job
with no live process is marked cancelled here, under the job's lock (`_write_unowned`), and so is a process
killed because it did not stop within CANCEL_GRACE_S of the SIGTERM. `reopen` puts an interrupted, failed,
cancelled or dead job back in the queue under that lock too; it refuses a job whose owner is alive, even
stalled (or stops it first with stop_owner=True). `resume` is `reopen` then trainer.jobs.queue.launch. A job of
the ray backend has no lock file: its Cancel and reopen go through trainer.jobs.remote, on the job's row.
"""
from __future__ import annotations

import signal
import threading
import time
from typing import Any, Optional

from sqlalchemy import Engine

from storage import Job, get_or_raise, read_scope, session_scope
from storage.models import utcnow
from trainer.jobs import remote
from trainer.jobs.backend import RAY, BackendError
from trainer.jobs.commands import signal_group
from trainer.jobs.liveness import admission_error, shown_status
from trainer.jobs.owner import JobLock, owner_pid, pid_alive, stop_owner
from trainer.jobs.queue import FINAL_STATUSES, RESUMABLE, JobError, job_dir, launch

RELEASE_WAIT_S = 10.0  # how long reopen waits for the lock of an owner that has died
CANCEL_WAIT_S = 5.0  # how long Cancel waits for a job process that is still starting up to end
CANCEL_GRACE_S = 15.0  # after Cancel's SIGTERM, a job process still alive this long is killed (SIGKILL)


def cancel(store: Engine, job_id: int, force: bool = False) -> str:
    """Cancel a job. With a live process (running, or waiting in the queue): SIGTERM to its process group;
    the job ends its current unit and marks itself cancelled (a process still starting up is waited for,
    up to CANCEL_WAIT_S). force=True: SIGKILL first. With no live process (never launched, dead, killed
    by force): marked cancelled here, under the job's lock. A process that has not ended CANCEL_GRACE_S after the
    SIGTERM (a call that does not return, a handler that never runs) is killed then and the job marked
    cancelled, from a thread of this process. Returns the status after the call."""
    with read_scope(store) as s:
        job = get_or_raise(s, Job, job_id, JobError)
        if job.status in FINAL_STATUSES:
            return job.status
        pid, folder, stored, on_ray = job.pid, job.output_dir, job.status, job.backend == RAY
    if on_ray:
        remote.cancel(store, job_id, FINAL_STATUSES)
        with read_scope(store) as s:
            return s.get(Job, job_id).status
    folder = folder or str(job_dir(store, job_id))
    owner = owner_pid(folder)
    starting = owner is None and stored == "queued" and pid_alive(pid)  # launched, not yet holding the job
    if force and owner is not None:
        _stop_owner(folder)
    elif force and starting:
        signal_group(pid, signal.SIGKILL)
    elif owner is not None or starting:  # (a running job nobody owns is dead: its pid may be another's now)
        signal_group(owner or pid, signal.SIGTERM)
        threading.Thread(target=_kill_after_grace, args=(store, job_id, folder, owner or pid),
                         name=f"cancel-grace-{job_id}").start()
        deadline = time.monotonic() + CANCEL_WAIT_S
        while owner is None and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # starting up: SIGTERM ends it before it takes the job
            owner = owner_pid(folder)
    _write_unowned(store, job_id, folder, lambda job: job.status == "running" or (job.status == "queued" and not
                                                                                  pid_alive(job.pid)),
                   status="cancelled", finished_at=utcnow(), error="cancelled")
    with read_scope(store) as s:
        return s.get(Job, job_id).status


def _kill_after_grace(store: Engine, job_id: int, folder: str, pid: int, grace_s: Optional[float] = None) -> None:
    """SIGKILL the job process `pid` if it still owns (or, starting up, still is) the job after the grace
    period, then mark the job cancelled under its lock."""
    deadline = time.monotonic() + (CANCEL_GRACE_S if grace_s is None else grace_s)
    while time.monotonic() < deadline:
        if owner_pid(folder) != pid and not pid_alive(pid):
            return  # ended on its own (it wrote its end itself)
        time.sleep(0.2)
    if owner_pid(folder) == pid:
        _stop_owner(folder)
    elif pid_alive(pid):
        signal_group(pid, signal.SIGKILL)
    else:
        return
    _write_unowned(store, job_id, folder, lambda job: job.status in ("running", "queued"),
                   status="cancelled", finished_at=utcnow(), error="cancelled (killed: it did not stop on SIGTERM)")


def _write_unowned(store: Engine, job_id: int, folder: str, when: Any, **values: Any) -> bool:
    """Write `values` on a job nobody owns: only while holding its lock (so never under a live owner) and
    only when `when(job)` holds then. False when an owner holds the lock or `when` is false."""
    lock = JobLock(folder)
    if not lock.acquire():
        return False
    try:
        with session_scope(store) as s:
            job = s.get(Job, job_id)
            if not when(job):
                return False
            for key, value in values.items():
                setattr(job, key, value)
            return True
    finally:
        lock.release()


def resume(store: Engine, store_url: str, job_id: int, stop_owner: bool = False) -> int:
    """Launch an interrupted / failed / cancelled / dead job again under the same id; it continues from its last
    checkpoint (JobContext.last_checkpoint) and metrics it rewrites replace the old rows. Returns the pid. A web
    caller at the owner's ceiling of live jobs is refused, as for a new job."""
    if problem := admission_error(store):
        raise JobError(f"jobs: {problem}")
    reopen(store, job_id, stop_owner=stop_owner)
    return launch(store_url, job_id)


def reopen(store: Engine, job_id: int, stop_owner: bool = False) -> None:
    """Put an interrupted / failed / cancelled / dead job back in the queue (for a resume in this process or
    by `launch`), writing under the job's lock. A process still holding the job's lock (alive, perhaps
    stalled) is refused with JobError, or with stop_owner=True killed first. The owner is checked before
    anything is written: a stalled owner may hold the store's write lock."""
    with read_scope(store) as s:
        job = get_or_raise(s, Job, job_id, JobError)
        folder, on_ray = job.output_dir, job.backend == RAY
    if on_ray:
        try:
            remote.reopen(store, job_id, RESUMABLE, lambda j: shown_status(j)[0], stop_owner=stop_owner)
        except BackendError as exc:
            raise JobError(str(exc)) from None
        return
    owner = owner_pid(folder) if folder else None
    deadline = time.monotonic() + RELEASE_WAIT_S
    while owner is not None and not pid_alive(owner) and time.monotonic() < deadline:
        time.sleep(0.05)  # the owner is dying: its lock goes when its last process (e.g. a forked child) ends
        owner = owner_pid(folder)
    if owner is not None and not stop_owner:
        alive = "live process" if pid_alive(owner) else "a process started by dead process"
        raise JobError(f"job {job_id} is still owned by {alive} {owner} (stalled or still ending); wait for "
                       "it, or resume with stop-owner to kill it first")
    if owner is not None:
        _stop_owner(folder)
    problem: list[str] = []

    def resumable(job: Job) -> bool:  # we hold its lock: a "running" job is dead, a launched one too once gone
        dead = job.status == "running" or (job.status == "queued" and job.pid is not None and not pid_alive(job.pid))
        if job.status not in RESUMABLE and not dead:
            problem.append(job.status)
        return not problem

    if not _write_unowned(store, job_id, folder or str(job_dir(store, job_id)), resumable, status="queued", error="",
                          finished_at=None, pid=None):
        if problem:
            raise JobError(f"job {job_id} is {problem[0]}; only an interrupted, failed or cancelled job "
                           "can be resumed")
        raise JobError(f"job {job_id} was taken by another process meanwhile (its lock is held); look again")


def _stop_owner(folder: str) -> None:
    try:
        stop_owner(folder)
    except TimeoutError as exc:
        raise JobError(str(exc)) from None
