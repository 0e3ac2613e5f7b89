"""JobContext: the job process's side of a job (queue, heartbeat, ownership, what the work loop reports).

`with JobContext(store, job_id) as ctx:` takes the job's OS lock (trainer.jobs.owner; refused with
JobError when a live process holds it), waits for its turn in the queue, marks the job running,
heartbeats, and on exit marks it succeeded / failed (with the error) / cancelled.

Ownership: the job row names the owner's pid. Every write of the context (heartbeat, progress, metrics,
checkpoints, the final status) first checks, in the same transaction, that the row still names this
process. When it does not (another process took the job over, e.g. after a lock that did not span
hosts), the process writes nothing more: the write raises JobOwnershipLost, `cancelled` turns true so the
work loop stops at its next check, and the exit leaves the row to its new owner.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from simulator.access import current_access
from simulator.llm.traffic import write_snapshot
from storage import Checkpoint, Job, Metric, get_or_raise, read_scope, session_scope
from storage.models import utcnow
from trainer.jobs.admission import (behind_text, job_resources, jobs_ahead, machine_limits, too_big_error,
                                   write_resources)
from trainer.jobs.backend import LOCAL, host_name
from trainer.jobs.liveness import reap_dead_jobs, shown_status
from trainer.jobs.owner import JobLock, owner_pid, pid_alive
from trainer.jobs.queue import (
    HEARTBEAT_S,
    QUEUE_POLL_S,
    QUEUED_KINDS,
    STALE_AFTER_S,
    JobCancelled,
    JobError,
    JobOwnershipLost,
    job_dir,
    last_checkpoint,
)
from trainer.learning.ray_ranks import RANKS_ENV

# kinds that wait for each other only, at most LANE_LIMITS[kind] at once per store (the owner raises it with
# the named environment variable, which `python -m app --max-generations N` sets): persona generations, so
# one visitor cannot start a dozen at once; corpus imports one at a time (each holds its file in memory)
LANE_LIMITS = {"personas": ("RLVER_LAB_MAX_GENERATIONS", 1), "import": ("RLVER_LAB_MAX_IMPORTS", 1)}


def lane_limit(kind: str) -> int:
    """How many live jobs of `kind` may run at once per store (0: no limit, the kind has no lane)."""
    if kind not in LANE_LIMITS:
        return 0
    variable, default = LANE_LIMITS[kind]
    text = os.environ.get(variable, "")
    return max(1, int(text)) if text.strip().isdigit() else default


LOCK_WAIT_S = 2.0  # a reaper holds a dead job's lock for one write: a new owner waits that long for it


class JobContext:
    """The job's side: see the module docstring. SIGTERM (Cancel) only sets `cancelled`; the work loop
    checks it between units (or calls check_cancelled()) so a step or dialogue in progress ends cleanly."""

    def __init__(self, store: Any, job_id: int, heartbeat_s: float = HEARTBEAT_S,
                 stale_after_s: float = STALE_AFTER_S, install_signals: bool = True):
        self.store, self.job_id = store, job_id
        self.heartbeat_s, self.stale_after_s = heartbeat_s, stale_after_s
        self.install_signals = install_signals
        self._cancel = threading.Event()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._old_handler: Any = None
        self._signals_installed = False
        self._pid = os.getpid()
        self._threads_before = 0
        with read_scope(store) as s:
            job = get_or_raise(s, Job, job_id, JobError)
            self.kind, self.config, self.seed = job.kind, dict(job.config), job.seed
            self.output_dir = job.output_dir or str(job_dir(store, job_id))
            self.backend = job.backend or LOCAL
        self._host = host_name()
        # a local job's owner also holds the lock file of its folder; a Ray job's is decided by the store alone
        self._lock = JobLock(self.output_dir) if self.backend == LOCAL else None
        self.last_checkpoint = last_checkpoint(store, job_id, self._checkpoint_root())

    def _checkpoint_root(self) -> Optional[Path]:
        """Where a training job's checkpoint folders are (None for other kinds)."""
        if self.kind != "train":
            return None
        return Path(self.config.get("output_dir") or self.output_dir) / "checkpoints"

    @property
    def resume_from(self) -> Optional[str]:
        """Path of the last complete checkpoint when this run resumes an earlier one, else None."""
        return self.last_checkpoint["path"] if self.last_checkpoint else None

    @property
    def cancelled(self) -> bool:
        """True after Cancel (SIGTERM) or once this process no longer owns the job."""
        return self._cancel.is_set() or self._lost.is_set()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def check_cancelled(self) -> None:
        if self._lost.is_set():
            raise JobOwnershipLost(f"job {self.job_id}: this process no longer owns it")
        if self.cancelled:
            raise JobCancelled(f"job {self.job_id} cancelled")

    def request_cancel(self, *_: Any) -> None:
        self._cancel.set()

    # -- ownership
    def _own(self, s: Session) -> Job:
        """The job row, after checking (in the caller's write transaction) that it still names us."""
        job = s.get(Job, self.job_id)
        if self._lost.is_set() or job.pid != self._pid or (job.host and job.host != self._host):
            self._lost.set()
            raise JobOwnershipLost(f"job {self.job_id} is now owned by pid {job.pid} on {job.host or 'its host'}; "
                                   f"this process ({self._pid} on {self._host}) stops without writing")
        return job

    def check_owner(self) -> None:
        """Raise JobOwnershipLost when the job row no longer names this process (a read, for callers
        about to write files of the job)."""
        with read_scope(self.store) as s:
            self._own(s)

    # -- life cycle
    def __enter__(self) -> "JobContext":
        if self._lock is not None:
            deadline = time.monotonic() + LOCK_WAIT_S
            while not self._lock.acquire() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not self._lock.held:
                raise JobError(f"job {self.job_id} is owned by live process {owner_pid(self.output_dir)}; one "
                               "process per job")
        elif not Path(self.output_dir).is_dir():  # a Ray job on a node that does not see the shared folder
            raise JobError(f"job {self.job_id}: its folder {self.output_dir} is not visible on {self._host}; mount "
                           "the lab's --shared-dir at the same path on every node (docs/cluster.md)")
        if self.install_signals and threading.current_thread() is threading.main_thread():
            self._old_handler = signal.signal(signal.SIGTERM, self.request_cancel)
            self._signals_installed = True
        try:
            self._take_resources()  # before the claim: a claimed job goes straight to its turn
            self._claim()
            if os.environ.get(RANKS_ENV):  # a training job across Ray nodes: where each rank runs
                self.record_config("ray_ranks", json.loads(os.environ[RANKS_ENV]))
            self._thread = threading.Thread(target=self._heartbeat, daemon=True, name=f"heartbeat-{self.job_id}")
            self._thread.start()
            self._wait_turn()
        except BaseException:
            self._stop_heartbeat()
            self._restore_signals()
            self._release()
            raise
        return self

    def _claim(self) -> None:
        """Take the job in the store: one conditional UPDATE (under the store's write lock), which succeeds only
        for a queued job that names no process or names this one (its launcher wrote our pid first). So two
        processes, on one host or two, never both own a job, whatever the file system's locks do."""
        now = utcnow()
        with session_scope(self.store) as s:
            taken = s.execute(update(Job).where(
                Job.id == self.job_id, Job.status == "queued",
                or_(Job.pid.is_(None), and_(Job.pid == self._pid, Job.host.in_((self._host, "")))))
                .values(pid=self._pid, host=self._host, heartbeat_at=now)
                .execution_options(synchronize_session=False)).rowcount
            if taken != 1:
                job = s.get(Job, self.job_id)
                if job.status != "queued":
                    raise JobError(f"job {self.job_id} is {job.status}; only a queued job can run")
                if self._lock is not None and job.host in (self._host, "") and not pid_alive(job.pid):
                    job.pid, job.host, job.heartbeat_at = self._pid, self._host, now  # launched, died unclaimed
                    return
                raise JobError(f"job {self.job_id} is claimed by process {job.pid} on {job.host or 'another host'}; "
                               "one process per job")

    def _take_resources(self) -> None:
        """Write what this job takes (trainer.jobs.admission) and fix its torch threads for its whole life."""
        if self.kind not in QUEUED_KINDS or self.backend != LOCAL:
            return
        limits = machine_limits()
        comparison = None
        if self.kind == "compare":
            from storage import Comparison

            with read_scope(self.store) as s:
                row = s.get(Comparison, int(self.config.get("comparison_id", 0)))
                comparison = dict(row.config or {}) if row is not None else {}
        self.resources = job_resources(self.kind, self.config, limits, comparison)
        too_big = too_big_error(self.resources, limits)
        if too_big and current_access().from_web:  # refused with both figures, never clamped to fit
            self._refuse(too_big)
        if too_big:  # the command line's job runs alone, as the machine allows
            print(f"job {self.job_id}: {too_big}; it runs alone", flush=True)
            self.resources = replace(self.resources, memory_gib=limits.memory_gib)
        write_resources(self.output_dir, self.resources)
        import torch

        self._threads_before = torch.get_num_threads()  # given back at exit (a job run in a shell's process)
        torch.set_num_threads(self.resources.threads)
        print(f"job {self.job_id} takes {self.resources.memory_gib:.1f} of {limits.memory_gib:.1f} GiB "
              f"({self.resources.why}) and {self.resources.threads} of {limits.cores} cores' threads", flush=True)

    def _refuse(self, problem: str) -> None:
        """End this job, not yet started, as failed with `problem` (JobError)."""
        with session_scope(self.store) as s:
            job = s.get(Job, self.job_id)  # not claimed yet, but its lock is this process's
            job.status, job.error, job.finished_at = "failed", problem, utcnow()
        raise JobError(problem)

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
        if self._threads_before:
            import torch

            torch.set_num_threads(self._threads_before)
            self._threads_before = 0

    def _wait_turn(self) -> None:
        announced = False
        while True:
            if self.kind in QUEUED_KINDS or lane_limit(self.kind):
                reap_dead_jobs(self.store)  # a dead job ahead never blocks the queue
            with session_scope(self.store) as s:  # BEGIN IMMEDIATE: the claim below is atomic
                me = self._own(s)
                cancelled = me.status == "cancelled" or self.cancelled
                if cancelled:
                    me.status, me.finished_at, me.error = "cancelled", me.finished_at or utcnow(), "cancelled"
                    ahead = []
                elif self.backend != LOCAL:  # Ray started it once the resources it asked for were free
                    ahead = []
                else:
                    ahead = self._ahead(s) if self.kind in QUEUED_KINDS else self._ahead_in_lane(s)
                if not ahead and not cancelled:
                    me.status, me.started_at, me.heartbeat_at, me.error = "running", utcnow(), utcnow(), ""
                    me.finished_at = None
                    print(f"job {self.job_id} running (pid {self._pid})", flush=True)
                    return
            if cancelled:
                raise JobCancelled(f"job {self.job_id} cancelled while queued")
            if not announced:
                print(f"job {self.job_id} {behind_text(ahead)}", flush=True)
                announced = True
            self._stop.wait(QUEUE_POLL_S)

    def _ahead(self, s: Session) -> list[Job]:
        return jobs_ahead(s, self.job_id, self.stale_after_s)

    def _ahead_in_lane(self, s: Session) -> list[Job]:
        """For a kind with a lane (queue.LANE_LIMITS): its live jobs before this one when the lane is full."""
        limit = lane_limit(self.kind)
        if not limit:
            return []
        live = [j for j in s.scalars(select(Job).where(Job.id != self.job_id, Job.pid.is_not(None),
                                                       Job.kind == self.kind, Job.status.in_(("running", "queued"))))
                if shown_status(j, self.stale_after_s)[0] != "dead" and (j.status == "running" or j.id < self.job_id)]
        return live if len(live) >= limit else []

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._stop_heartbeat()
        self._restore_signals()
        if not self._lost.is_set():
            try:  # the final API counters (the last heartbeat may have seen a request still in flight)
                write_snapshot(self.output_dir)
            except OSError as e:
                print(f"could not write the traffic counters: {e}", file=sys.stderr, flush=True)
        try:
            if self._lost.is_set() or isinstance(exc, JobOwnershipLost):
                self._lost.set()
                print(f"job {self.job_id}: another process owns the job now; pid {self._pid} stopped without "
                      "writing", flush=True)
                if exc is None:
                    raise JobOwnershipLost(f"job {self.job_id}: this process no longer owns it")
                return False
            if exc is None:
                status, error = ("cancelled", "cancelled") if self.cancelled else ("succeeded", "")
            elif isinstance(exc, (JobCancelled, KeyboardInterrupt)):
                status, error = "cancelled", "cancelled"
            else:
                status, error = "failed", f"{exc_type.__name__}: {exc}"
                traceback.print_exception(exc_type, exc, tb)
            try:
                with session_scope(self.store) as s:
                    job = self._own(s)
                    job.status, job.error, job.finished_at, job.heartbeat_at = status, error, utcnow(), utcnow()
            except JobOwnershipLost as lost:
                print(str(lost), flush=True)
                raise
            print(f"job {self.job_id} {status}" + (f": {error}" if status == "failed" else ""), flush=True)
            return isinstance(exc, JobCancelled)
        finally:
            self._release()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                with session_scope(self.store) as s:
                    job = self._own(s)
                    job.heartbeat_at = utcnow()
                write_snapshot(self.output_dir)  # API traffic counters, for the views (none without an API)
            except JobOwnershipLost:
                return
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

    # -- what the work loop reports (each write checks ownership first)
    def progress(self, step: int, total: int) -> None:
        with session_scope(self.store) as s:
            job = self._own(s)
            job.step, job.total_steps = int(step), int(total)
            job.progress = min(1.0, step / total) if total > 0 else 0.0
            job.heartbeat_at = utcnow()

    def record_config(self, key: str, value: Any) -> None:
        """Add what the run resolved (e.g. its personas' set and hash) to the job's stored config under `key`."""
        with session_scope(self.store) as s:
            job = self._own(s)
            job.config = {**dict(job.config or {}), key: value}
        self.config[key] = value

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Write metrics of one step; a (step, name) written before is replaced, never duplicated."""
        values = {str(k): float(v) for k, v in metrics.items() if v is not None}
        with session_scope(self.store) as s:
            self._own(s)
            existing = {m.name: m for m in s.scalars(select(Metric).where(
                Metric.job_id == self.job_id, Metric.step == int(step), Metric.name.in_(list(values))))}
            for name, value in values.items():
                if name in existing:
                    existing[name].value = value
                else:
                    s.add(Metric(job_id=self.job_id, step=int(step), name=name, value=value))

    def add_checkpoint(self, step: int, path: str, metrics: Optional[dict[str, Any]] = None) -> None:
        """Record a checkpoint written completely at `path` (a rewrite of the same step replaces it)."""
        with session_scope(self.store) as s:
            self._own(s)
            row = s.scalars(select(Checkpoint).where(Checkpoint.job_id == self.job_id,
                                                     Checkpoint.step == int(step))).first()
            if row is None:
                s.add(Checkpoint(job_id=self.job_id, step=int(step), path=str(path), metrics=metrics or {}))
            else:
                row.path, row.metrics = str(path), metrics or {}
        self.last_checkpoint = {"step": int(step), "path": str(path), "metrics": metrics or {}}

    def forget_checkpoints(self, paths: list[str]) -> None:
        """Delete the rows of checkpoints whose folders were pruned, so they are never listed or offered."""
        if not paths:
            return
        with session_scope(self.store) as s:
            self._own(s)
            for row in s.scalars(select(Checkpoint).where(Checkpoint.job_id == self.job_id,
                                                          Checkpoint.path.in_([str(p) for p in paths]))):
                s.delete(row)
