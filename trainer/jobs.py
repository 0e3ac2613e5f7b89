"""Background jobs: training and benchmark runs as separate OS processes that write to the store.

The app (or a shell) creates a Job row and `launch`es `python -m trainer job JOB_ID` in a new process
group, so the job outlives a closed browser and a restarted app. Inside the job process `JobContext`
takes the job through its life:

    queued --(its turn: no other live job running, no older live job waiting)--> running
    running --(normal exit)--> succeeded | --(exception)--> failed | --(SIGTERM / Cancel)--> cancelled
    running --(heartbeat stopped or pid gone; see mark_stale_jobs)--> interrupted --(resume)--> queued

One job runs at a time per store; others wait in id order. Liveness is a pid on this host plus a
heartbeat row updated every HEARTBEAT_S seconds by a thread of the job process.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import traceback
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import Engine, select

from storage import Checkpoint, Job, Metric, code_version, lab_home, make_engine, read_scope, session_scope
from storage.db import PROJECT_ROOT
from storage.models import utcnow

HEARTBEAT_S = 2.0
STALE_AFTER_S = 30.0
QUEUE_POLL_S = 1.0
JOB_KINDS = ("train", "benchmark")
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "interrupted")


class JobCancelled(Exception):
    """Raised by JobContext.check_cancelled() (and by entering a job cancelled while it waited)."""


class JobError(ValueError):
    """A job cannot be started, resumed or cancelled in its current state."""


# ---------------------------------------------------------------------------------------------- processes
def pid_alive(pid: Optional[int]) -> bool:
    """True when process `pid` exists on this host and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _fresh(job: Job, stale_after_s: float, now: Optional[datetime] = None) -> bool:
    now = now or utcnow()
    return job.heartbeat_at is not None and now - job.heartbeat_at <= timedelta(seconds=stale_after_s)


def _live(job: Job, stale_after_s: float = STALE_AFTER_S) -> bool:
    return pid_alive(job.pid) and _fresh(job, stale_after_s)


def job_dir(job_id: int) -> Path:
    path = lab_home() / "jobs" / str(job_id)
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------------------------ service API
def create_job(engine: Engine, kind: str, config: dict[str, Any], name: str = "",
               parent_id: Optional[int] = None, seed: int = 0) -> int:
    """Record a queued job (nothing runs until `launch`). Returns its id."""
    if kind not in JOB_KINDS:
        raise JobError(f"kind: unknown job kind {kind!r}; one of {', '.join(JOB_KINDS)}")
    if not isinstance(config, dict):
        raise JobError(f"config: must be a dict, got {type(config).__name__}")
    with session_scope(engine) as s:
        job = Job(kind=kind, name=name or kind, config=config, status="queued", seed=int(seed),
                  code_version=code_version(), parent_id=parent_id)
        s.add(job)
        s.flush()
        job.output_dir = str(job_dir(job.id))
        return job.id


def launch(engine_url: str, job_id: int) -> int:
    """Start `python -m trainer job JOB_ID` in a new process group; record pid and log path; return pid.

    The store URL goes to the child in RLVER_LAB_DB, not on its command line, so a URL holding a
    password never shows in a process list or a log."""
    engine = make_engine(engine_url)
    try:
        with read_scope(engine) as s:
            job = s.get(Job, job_id)
            if job is None:
                raise JobError(f"job {job_id} does not exist")
            if job.status != "queued":
                raise JobError(f"job {job_id} is {job.status}; only a queued job can be launched")
            if _live(job):
                raise JobError(f"job {job_id} already has a live process (pid {job.pid})")
        log_path = job_dir(job_id) / "job.log"
        env = dict(os.environ, RLVER_LAB_DB=engine_url, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "trainer", "job", str(job_id)], cwd=PROJECT_ROOT,
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        # Reap the child when it ends so it never lingers as a zombie of the launching process.
        threading.Thread(target=proc.wait, daemon=True, name=f"reap-job-{job_id}").start()
        with session_scope(engine) as s:
            job = s.get(Job, job_id)
            job.log_path = str(log_path)
            if job.status == "queued" and job.pid in (None, proc.pid):  # the child may have got there first
                job.pid, job.heartbeat_at = proc.pid, utcnow()
        return proc.pid
    finally:
        engine.dispose()


def cancel(engine: Engine, job_id: int, force: bool = False) -> str:
    """Cancel a job. Queued: marked cancelled (its waiting process, if any, is signalled). Running: SIGTERM
    to its process group; the job ends its current unit and marks itself cancelled. force=True: SIGKILL
    and mark cancelled at once. Returns the status after the call."""
    with session_scope(engine) as s:
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
    with read_scope(engine) as s:
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


def mark_stale_jobs(engine: Engine, stale_after_s: float = STALE_AFTER_S) -> list[int]:
    """Mark interrupted every running job whose heartbeat stopped or whose process is gone, and every
    launched queued job whose process is gone. Returns their ids."""
    now, marked = utcnow(), []
    with session_scope(engine) as s:
        for job in s.scalars(select(Job).where(Job.status.in_(("running", "queued")))):
            if job.status == "queued" and job.pid is None:
                continue  # created, never launched
            if not pid_alive(job.pid):
                reason = f"process {job.pid} is gone"
            elif not _fresh(job, stale_after_s, now):
                reason = f"no heartbeat since {job.heartbeat_at} (more than {stale_after_s:g} s)"
            else:
                continue
            job.status, job.finished_at = "interrupted", now
            job.error = f"interrupted: {reason}; resume continues from the last checkpoint"
            marked.append(job.id)
    return marked


def resume(engine: Engine, engine_url: str, job_id: int) -> int:
    """Launch an interrupted / failed / cancelled job again under the same id; it continues from its last
    checkpoint (JobContext.last_checkpoint) and metrics it rewrites replace the old rows. Returns the pid."""
    reopen(engine, job_id)
    return launch(engine_url, job_id)


def reopen(engine: Engine, job_id: int) -> None:
    """Put an interrupted / failed / cancelled job back in the queue (for a resume in this process or by
    `launch`)."""
    mark_stale_jobs(engine)
    with session_scope(engine) as s:
        job = s.get(Job, job_id)
        if job is None:
            raise JobError(f"job {job_id} does not exist")
        if job.status not in ("interrupted", "failed", "cancelled"):
            raise JobError(f"job {job_id} is {job.status}; only an interrupted, failed or cancelled job "
                           "can be resumed")
        job.status, job.error, job.finished_at, job.pid = "queued", "", None, None


def clone(engine: Engine, job_id: int) -> int:
    """A new queued job with the same kind, config and seed; parent_id points at the original."""
    with read_scope(engine) as s:
        job = s.get(Job, job_id)
        if job is None:
            raise JobError(f"job {job_id} does not exist")
        kind, config, name, seed = job.kind, dict(job.config), job.name, job.seed
    return create_job(engine, kind, config, name=f"{name} (clone of #{job_id})", parent_id=job_id, seed=seed)


def _job_dict(job: Job) -> dict[str, Any]:
    return {c: getattr(job, c) for c in Job.__table__.columns.keys()}


def list_jobs(engine: Engine, kind: Optional[str] = None, limit: int = 100) -> list[dict[str, Any]]:
    """Newest first, as plain dicts (every Job column)."""
    q = select(Job).order_by(Job.id.desc()).limit(limit)
    if kind:
        q = q.where(Job.kind == kind)
    with read_scope(engine) as s:
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


def job_detail(engine: Engine, job_id: int, log_lines: int = 200) -> Optional[dict[str, Any]]:
    """Everything a job view shows: the job's columns, metrics as series {name: {"step": [..], "value":
    [..]}} in step order, checkpoints (oldest first) and the log tail. None when the job does not exist."""
    with read_scope(engine) as s:
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


def last_checkpoint(engine: Engine, job_id: int) -> Optional[dict[str, Any]]:
    """The job's latest checkpoint {step, path, metrics}, or None."""
    with read_scope(engine) as s:
        c = s.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id)
                      .order_by(Checkpoint.step.desc(), Checkpoint.id.desc()).limit(1)).first()
        return None if c is None else {"step": c.step, "path": c.path, "metrics": dict(c.metrics)}


# ------------------------------------------------------------------------------- inside the job process
class JobContext:
    """The job's side: `with JobContext(engine, job_id) as ctx:` waits for its turn in the queue, marks the
    job running, heartbeats, and on exit marks it succeeded / failed (with the error) / cancelled.

    SIGTERM (Cancel) only sets `cancelled`; the work loop checks it between units (or calls
    check_cancelled()) so a step or dialogue in progress ends cleanly."""

    def __init__(self, engine: Engine, job_id: int, heartbeat_s: float = HEARTBEAT_S,
                 stale_after_s: float = STALE_AFTER_S, install_signals: bool = True):
        self.engine, self.job_id = engine, job_id
        self.heartbeat_s, self.stale_after_s = heartbeat_s, stale_after_s
        self.install_signals = install_signals
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._old_handler: Any = None
        self._signals_installed = False
        with read_scope(engine) as s:
            job = s.get(Job, job_id)
            if job is None:
                raise JobError(f"job {job_id} does not exist")
            self.kind, self.config, self.seed = job.kind, dict(job.config), job.seed
            self.output_dir = job.output_dir or str(job_dir(job_id))
        self.last_checkpoint = last_checkpoint(engine, job_id)

    @property
    def resume_from(self) -> Optional[str]:
        """Path of the last checkpoint when this run resumes an earlier one, else None."""
        return self.last_checkpoint["path"] if self.last_checkpoint else None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise JobCancelled(f"job {self.job_id} cancelled")

    def request_cancel(self, *_: Any) -> None:
        self._cancel.set()

    # -- life cycle
    def __enter__(self) -> "JobContext":
        if self.install_signals and threading.current_thread() is threading.main_thread():
            self._old_handler = signal.signal(signal.SIGTERM, self.request_cancel)
            self._signals_installed = True
        with session_scope(self.engine) as s:
            job = s.get(Job, self.job_id)
            if job.status != "queued":
                self._restore_signals()
                raise JobError(f"job {self.job_id} is {job.status}; only a queued job can run")
            job.status, job.pid, job.heartbeat_at = "queued", os.getpid(), utcnow()
        self._thread = threading.Thread(target=self._heartbeat, daemon=True, name=f"heartbeat-{self.job_id}")
        self._thread.start()
        try:
            self._wait_turn()
        except BaseException:
            self._stop_heartbeat()
            self._restore_signals()
            raise
        return self

    def _wait_turn(self) -> None:
        announced = False
        while True:
            mark_stale_jobs(self.engine, self.stale_after_s)  # a dead job ahead never blocks the queue
            with session_scope(self.engine) as s:  # BEGIN IMMEDIATE: the claim below is atomic
                me = s.get(Job, self.job_id)
                cancelled = me.status == "cancelled" or self.cancelled
                if cancelled:
                    me.status, me.finished_at, me.error = "cancelled", me.finished_at or utcnow(), "cancelled"
                    ahead = []
                else:
                        ahead = [j for j in s.scalars(select(Job).where(
                        Job.id != self.job_id, Job.pid.is_not(None), Job.status.in_(("running", "queued"))))
                             if _live(j, self.stale_after_s) and (j.status == "running" or j.id < self.job_id)]
                if not ahead and not cancelled:
                    me.status, me.started_at, me.heartbeat_at, me.error = "running", utcnow(), utcnow(), ""
                    me.finished_at = None
                    print(f"job {self.job_id} running (pid {os.getpid()})", flush=True)
                    return
            if cancelled:
                raise JobCancelled(f"job {self.job_id} cancelled while queued")
            if not announced:
                print(f"job {self.job_id} queued behind job(s) {', '.join(str(j.id) for j in ahead)}", flush=True)
                announced = True
            self._stop.wait(QUEUE_POLL_S)

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._stop_heartbeat()
        self._restore_signals()
        if exc is None:
            status, error = ("cancelled", "cancelled") if self.cancelled else ("succeeded", "")
        elif isinstance(exc, (JobCancelled, KeyboardInterrupt)):
            status, error = "cancelled", "cancelled"
        else:
            status, error = "failed", f"{exc_type.__name__}: {exc}"
            traceback.print_exception(exc_type, exc, tb)
        with session_scope(self.engine) as s:
            job = s.get(Job, self.job_id)
            job.status, job.error, job.finished_at, job.heartbeat_at = status, error, utcnow(), utcnow()
        print(f"job {self.job_id} {status}" + (f": {error}" if status == "failed" else ""), flush=True)
        return isinstance(exc, JobCancelled)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                with session_scope(self.engine) as s:
                    job = s.get(Job, self.job_id)
                    job.heartbeat_at = utcnow()
                    if job.status == "interrupted":  # marked stale by mistake (e.g. a stalled machine)
                        job.status, job.error, job.finished_at = "running", "", None
            except Exception as e:  # a busy store must not kill the job; the next beat retries
                print(f"heartbeat failed: {e}", file=sys.stderr, flush=True)

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _restore_signals(self) -> None:
        if self._signals_installed:
            signal.signal(signal.SIGTERM, self._old_handler if self._old_handler is not None else signal.SIG_DFL)
            self._signals_installed = False

    # -- what the work loop reports
    def progress(self, step: int, total: int) -> None:
        with session_scope(self.engine) as s:
            job = s.get(Job, self.job_id)
            job.step, job.total_steps = int(step), int(total)
            job.progress = min(1.0, step / total) if total > 0 else 0.0
            job.heartbeat_at = utcnow()

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Write metrics of one step; a (step, name) written before is replaced, never duplicated."""
        values = {str(k): float(v) for k, v in metrics.items() if v is not None}
        with session_scope(self.engine) as s:
            existing = {m.name: m for m in s.scalars(select(Metric).where(
                Metric.job_id == self.job_id, Metric.step == int(step), Metric.name.in_(list(values))))}
            for name, value in values.items():
                if name in existing:
                    existing[name].value = value
                else:
                    s.add(Metric(job_id=self.job_id, step=int(step), name=name, value=value))

    def add_checkpoint(self, step: int, path: str, metrics: Optional[dict[str, Any]] = None) -> None:
        """Record a checkpoint written completely at `path` (a rewrite of the same step replaces it)."""
        with session_scope(self.engine) as s:
            row = s.scalars(select(Checkpoint).where(Checkpoint.job_id == self.job_id,
                                                     Checkpoint.step == int(step))).first()
            if row is None:
                s.add(Checkpoint(job_id=self.job_id, step=int(step), path=str(path), metrics=metrics or {}))
            else:
                row.path, row.metrics = str(path), metrics or {}
        self.last_checkpoint = {"step": int(step), "path": str(path), "metrics": metrics or {}}

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "JobCancelled", "JobContext", "JobError", "cancel", "clone",
           "create_job", "job_detail", "last_checkpoint", "launch", "list_jobs", "log_tail", "mark_stale_jobs",
           "pid_alive", "reopen", "resume"]
