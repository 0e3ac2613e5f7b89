"""Background jobs: training and benchmark runs as separate OS processes that write to the store.

The app (or a shell) creates a Job row and `launch`es `python -m trainer job JOB_ID` in a new process
group, so the job outlives a closed browser and a restarted app. Every entry point runs a job through
trainer.job_runner.run_job; inside the job process `JobContext` takes the job through its life:

    queued --(its turn: no other live job running, no older live job waiting)--> running
    running --(normal exit)--> succeeded | --(exception)--> failed | --(SIGTERM / Cancel)--> cancelled
    running --(heartbeat stopped or pid gone; see mark_stale_jobs)--> interrupted --(resume)--> queued

One job runs at a time per store; others wait in id order. Liveness is a pid on this host plus a
heartbeat row updated every HEARTBEAT_S seconds by a thread of the job process. Listing jobs or reading
one (`list_jobs`, `job_detail`, and so the views and `python -m trainer jobs`) first marks stale jobs
interrupted, with the reason in `error`.

One writer per job: the job process holds an OS lock on its folder for its whole life
(trainer.job_owner), so `reopen` / `resume` refuse a job whose owner is alive, even stalled (or stop it
first with stop_owner=True), and the job process checks before every write that the job row still names
its pid (trainer.job_context), so a process woken after another took over stops without writing.

Job folders are `lab_home()/jobs/<store id>/<job id>`: two stores sharing RLVER_LAB_HOME never share a
folder, and creating a job whose folder already exists is refused.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError

from storage import (Checkpoint, Job, Metric, code_version, lab_home, make_engine, read_scope, session_scope,
                     store_id)
from storage.db import PROJECT_ROOT
from storage.models import utcnow
from trainer.job_owner import owner_pid, pid_alive, stop_owner

HEARTBEAT_S = 2.0
STALE_AFTER_S = 30.0
QUEUE_POLL_S = 1.0
RELEASE_WAIT_S = 10.0  # how long reopen waits for the lock of an owner that has died
JOB_KINDS = ("train", "benchmark")
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "interrupted")
STATE_FILE = "trainer_state.pt"  # what makes a checkpoint folder complete (trainer.checkpoints writes it last)
POLICY_DIR = "policy"  # the trained model inside a checkpoint folder (a Hugging Face folder, LoRA merged)


class JobCancelled(Exception):
    """Raised by JobContext.check_cancelled() (and by entering a job cancelled while it waited)."""


class JobError(ValueError):
    """A job cannot be started, resumed or cancelled in its current state."""


class JobOwnershipLost(JobError):
    """This process no longer owns its job (another process took it over); it stops without writing."""


# ---------------------------------------------------------------------------------------------- processes
def _fresh(job: Job, stale_after_s: float, now: Optional[datetime] = None) -> bool:
    now = now or utcnow()
    return job.heartbeat_at is not None and now - job.heartbeat_at <= timedelta(seconds=stale_after_s)


def _live(job: Job, stale_after_s: float = STALE_AFTER_S) -> bool:
    return pid_alive(job.pid) and _fresh(job, stale_after_s)


def job_dir(store: Engine, job_id: int) -> Path:
    """The job's folder, keyed by the store's id (not created here; call outside a write transaction)."""
    return jobs_root(store) / str(job_id)


def jobs_root(store: Engine) -> Path:
    return lab_home() / "jobs" / store_id(store)


# ------------------------------------------------------------------------------------------ service API
def create_job(store: Engine, kind: str, config: dict[str, Any], name: str = "",
               parent_id: Optional[int] = None, seed: int = 0) -> int:
    """Record a queued job (nothing runs until `launch`). Returns its id."""
    if kind not in JOB_KINDS:
        raise JobError(f"kind: unknown job kind {kind!r}; one of {', '.join(JOB_KINDS)}")
    if not isinstance(config, dict):
        raise JobError(f"config: must be a dict, got {type(config).__name__}")
    root = jobs_root(store)
    with session_scope(store) as s:
        job = Job(kind=kind, name=name or kind, config=config, status="queued", seed=int(seed),
                  code_version=code_version(), parent_id=parent_id)
        s.add(job)
        s.flush()
        folder = root / str(job.id)
        try:
            folder.mkdir(parents=True)
        except FileExistsError:  # the transaction rolls back: no job without its own folder
            raise JobError(f"job folder {folder} already exists (left by a deleted job, or a copy of this store "
                           "shares its id); move it away and try again") from None
        job.output_dir = str(folder)
        return job.id


def launch(store_url: str, job_id: int) -> int:
    """Start `python -m trainer job JOB_ID` in a new process group; record pid and log path; return pid.

    The store URL goes to the child in RLVER_LAB_DB, not on its command line, so a URL holding a
    password never shows in a process list or a log."""
    store = make_engine(store_url)
    try:
        with read_scope(store) as s:
            job = s.get(Job, job_id)
            if job is None:
                raise JobError(f"job {job_id} does not exist")
            if job.status != "queued":
                raise JobError(f"job {job_id} is {job.status}; only a queued job can be launched")
            if _live(job):
                raise JobError(f"job {job_id} already has a live process (pid {job.pid})")
            folder = Path(job.output_dir or job_dir(store, job_id))
        folder.mkdir(parents=True, exist_ok=True)
        log_path = folder / "job.log"
        proc = start_command(store_url, ["job", str(job_id)], log_path, f"reap-job-{job_id}")
        with session_scope(store) as s:
            job = s.get(Job, job_id)
            job.log_path = str(log_path)
            if job.status == "queued" and job.pid in (None, proc.pid):  # the child may have got there first
                job.pid, job.heartbeat_at = proc.pid, utcnow()
        return proc.pid
    finally:
        store.dispose()


def start_command(store_url: str, args: list[str], log_path: Path, name: str) -> subprocess.Popen:
    """Start `python -m trainer ARGS` in a new process group (outliving its launcher), output appended to
    log_path; the store URL goes in RLVER_LAB_DB, never on the command line. The child is reaped when it ends
    so it never lingers as a zombie of the launching process."""
    env = dict(os.environ, RLVER_LAB_DB=store_url, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=PROJECT_ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    threading.Thread(target=proc.wait, daemon=True, name=name).start()
    return proc


def set_log_path(store: Engine, job_id: int, path: str) -> None:
    """Record the job's log file unless it has one already (jobs.launch records the file it writes to)."""
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        job.log_path = job.log_path or path


def cancel(store: Engine, job_id: int, force: bool = False) -> str:
    """Cancel a job. Queued: marked cancelled (its waiting process, if any, is signalled). Running: SIGTERM
    to its process group; the job ends its current unit and marks itself cancelled. force=True: SIGKILL
    and mark cancelled at once. Returns the status after the call."""
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        if job is None:
            raise JobError(f"job {job_id} does not exist")
        if job.status in FINAL_STATUSES:
            return job.status
        pid, status = job.pid, job.status
        if status == "queued" or force or not pid_alive(pid):
            job.status, job.finished_at = "cancelled", utcnow()
            job.error = job.error or "cancelled"
    if pid_alive(pid):
        _signal_group(pid, signal.SIGKILL if force else signal.SIGTERM)
    with read_scope(store) as s:
        return s.get(Job, job_id).status


def _signal_group(pid: int, sig: int) -> None:
    """Signal the job's process group (its own session); never our own group."""
    try:
        pgid = os.getpgid(pid)
        if pgid == pid and pgid != os.getpgrp():
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def mark_stale_jobs(store: Engine, stale_after_s: float = STALE_AFTER_S) -> list[int]:
    """Mark interrupted every running job whose heartbeat stopped or whose process is gone, and every
    launched queued job whose process is gone. Returns their ids.

    A queued job is judged by its process only: a job process starting up on a busy machine can take
    longer than `stale_after_s` to import torch and send its first heartbeat."""
    now, marked = utcnow(), []
    with session_scope(store) as s:
        for job in s.scalars(select(Job).where(Job.status.in_(("running", "queued")))):
            if job.status == "queued" and job.pid is None:
                continue  # created, never launched
            if not pid_alive(job.pid):
                reason = f"process {job.pid} is gone"
            elif job.status == "running" and not _fresh(job, stale_after_s, now):
                reason = f"no heartbeat since {job.heartbeat_at} (more than {stale_after_s:g} s)"
            else:
                continue
            job.status, job.finished_at = "interrupted", now
            job.error = f"interrupted: {reason}; resume continues from the last checkpoint"
            marked.append(job.id)
    return marked


def _mark_stale_if_possible(store: Engine) -> None:
    """mark_stale_jobs for a reader: a store whose write lock stays taken (e.g. by a stalled process)
    delays it by the busy timeout but never fails the read."""
    try:
        mark_stale_jobs(store)
    except OperationalError as exc:
        print(f"could not mark stale jobs (store busy): {exc.orig}", file=sys.stderr)


def resume(store: Engine, store_url: str, job_id: int, stop_owner: bool = False) -> int:
    """Launch an interrupted / failed / cancelled job again under the same id; it continues from its last
    checkpoint (JobContext.last_checkpoint) and metrics it rewrites replace the old rows. Returns the pid."""
    reopen(store, job_id, stop_owner=stop_owner)
    return launch(store_url, job_id)


def reopen(store: Engine, job_id: int, stop_owner: bool = False) -> None:
    """Put an interrupted / failed / cancelled job back in the queue (for a resume in this process or by
    `launch`). A process still holding the job's lock (alive, perhaps stalled) is refused with JobError,
    or with stop_owner=True killed first. The owner is checked before anything is written: a stalled owner
    may hold the store's write lock."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        if job is None:
            raise JobError(f"job {job_id} does not exist")
        folder = job.output_dir
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
    mark_stale_jobs(store)
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        if job.status not in ("interrupted", "failed", "cancelled"):
            raise JobError(f"job {job_id} is {job.status}; only an interrupted, failed or cancelled job "
                           "can be resumed")
        job.status, job.error, job.finished_at, job.pid = "queued", "", None, None


def _stop_owner(folder: str) -> None:
    try:
        stop_owner(folder)
    except TimeoutError as exc:
        raise JobError(str(exc)) from None


def clone(store: Engine, job_id: int) -> int:
    """A new queued job with the same kind, config and seed; parent_id points at the original."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        if job is None:
            raise JobError(f"job {job_id} does not exist")
        kind, config, name, seed = job.kind, dict(job.config), job.name, job.seed
    return create_job(store, kind, config, name=f"{name} (clone of #{job_id})", parent_id=job_id, seed=seed)


def _job_dict(job: Job) -> dict[str, Any]:
    return {c: getattr(job, c) for c in Job.__table__.columns.keys()}


def list_jobs(store: Engine, kind: Optional[str] = None, limit: int = 100) -> list[dict[str, Any]]:
    """Newest first, as plain dicts (every Job column); stale jobs are marked interrupted first."""
    _mark_stale_if_possible(store)
    q = select(Job).order_by(Job.id.desc()).limit(limit)
    if kind:
        q = q.where(Job.kind == kind)
    with read_scope(store) as s:
        return [_job_dict(j) for j in s.scalars(q)]


def log_tail(path: str, max_lines: int = 200, max_bytes: int = 65536) -> str:
    """The last lines of a log file ('' when there is none yet)."""
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - max_bytes))
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-max_lines:])


def job_detail(store: Engine, job_id: int, log_lines: int = 200) -> Optional[dict[str, Any]]:
    """Everything a job view shows: the job's columns, metrics as series {name: {"step": [..], "value":
    [..]}} in step order, checkpoints (oldest first) and the log tail. None when the job does not exist.
    A stale job is marked interrupted first."""
    _mark_stale_if_possible(store)
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        if job is None:
            return None
        out = _job_dict(job)
        series: dict[str, dict[str, list]] = {}
        for m in s.scalars(select(Metric).where(Metric.job_id == job_id).order_by(Metric.step, Metric.name)):
            entry = series.setdefault(m.name, {"step": [], "value": []})
            entry["step"].append(m.step)
            entry["value"].append(m.value)
        out["metrics"] = series
        out["checkpoints"] = [{"step": c.step, "path": c.path, "metrics": c.metrics, "created_at": c.created_at}
                              for c in s.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id)
                                                 .order_by(Checkpoint.step, Checkpoint.id))]
    out["log_tail"] = log_tail(out["log_path"], log_lines)
    return out


def last_checkpoint(store: Engine, job_id: int, disk_root: Optional[str | Path] = None) -> Optional[dict[str, Any]]:
    """The job's latest checkpoint {step, path, metrics}, or None. With disk_root (the checkpoints folder
    of a training job): the newest *complete* one (its STATE_FILE written), recorded or only on disk (a
    kill between writing a checkpoint and recording it)."""
    with read_scope(store) as s:
        rows = [{"step": c.step, "path": c.path, "metrics": dict(c.metrics)} for c in s.scalars(
            select(Checkpoint).where(Checkpoint.job_id == job_id).order_by(Checkpoint.step.desc(), Checkpoint.id.desc()))]
    if disk_root is None:
        return rows[0] if rows else None
    root = Path(disk_root)
    on_disk = [{"step": int(p.name[5:]), "path": str(p), "metrics": {}} for p in root.glob("step-*")
               if p.name[5:].isdigit() and (p / STATE_FILE).exists()] if root.is_dir() else []
    complete = [r for r in rows if (Path(r["path"]) / STATE_FILE).exists()] + on_disk
    return max(complete, key=lambda r: (r["step"], bool(r["metrics"])), default=None)


def policy_path(checkpoint_path: Optional[str]) -> Optional[str]:
    """Where the model of a checkpoint folder is (None without a checkpoint): what `--policy` and
    `model:` take to use the trained policy."""
    return str(Path(checkpoint_path) / POLICY_DIR) if checkpoint_path else None


def __getattr__(name: str) -> Any:
    """JobContext (the job process's side) lives in trainer.job_context; imported on first use."""
    if name == "JobContext":
        from trainer.job_context import JobContext

        return JobContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "JobCancelled", "JobContext", "JobError", "JobOwnershipLost", "cancel",
           "clone", "create_job", "job_detail", "last_checkpoint", "launch", "list_jobs", "log_tail",
           "mark_stale_jobs", "pid_alive", "policy_path", "reopen", "resume", "set_log_path", "start_command"]
