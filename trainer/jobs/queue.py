"""Background jobs: training, benchmark, comparison, persona-generation and judge runs as OS processes that
write to the store.

The app (or a shell) creates a Job row and `launch`es `python -m trainer job JOB_ID` in a new process
group, so the job outlives a closed browser and a restarted app. Every entry point runs a job through
trainer.job_runner.run_job; inside the job process `JobContext` takes the job through its life:

    queued --(its turn; see QUEUED_KINDS)--> running
    running --(normal exit)--> succeeded | --(exception)--> failed | --(SIGTERM / Cancel)--> cancelled
    running --(owner gone; written by the reaper under the job's lock)--> interrupted --(resume)--> queued

Kinds in QUEUED_KINDS use the accelerator and the cores: each starts in id order when it fits beside the
running ones (trainer.jobs.admission: memory and cores); other kinds (API-bound, e.g. "personas") start at once.

Only a job's owner writes its status. The owner is the job process: it holds an OS lock on the job's
folder for its whole life (trainer.jobs.owner) and heartbeats every HEARTBEAT_S seconds. Reading a job
(`list_jobs`, `job_detail`, and so the views and `python -m trainer jobs`) writes nothing: "stalled" (late
heartbeat, owner alive) and "dead" (owner gone) are derived when read (trainer.jobs.liveness), and
`stored_status` keeps what the row says. A dead job is marked interrupted only by the reaper
(`reap_dead_jobs`), which takes the job's lock first; Cancel of a job with no live process and `reopen`
write under that lock too (trainer.jobs.control: cancel, reopen, resume). `reopen` / `resume` refuse a job
whose owner is alive, even stalled (or stop it first with stop_owner=True), and the job process checks before
every write that the job row still names its pid (trainer.jobs.context), so a process woken after another took
over stops without writing.

Job folders are `lab_home()/jobs/<store id>/<job id>` (`--shared-dir`'s `jobs/...` when set: every node of a
cluster sees it): two stores sharing RLVER_LAB_HOME never share a folder, and creating a job whose folder
already exists is refused. With the ray backend (trainer.jobs.backend) `launch` submits the job as a Ray job
and Cancel, resume and the log go through trainer.jobs.remote: no lock file, the store's row and Ray decide.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from sqlalchemy import Engine, select

from storage import (
    Checkpoint,
    Job,
    Metric,
    as_dict,
    code_version,
    get_or_raise,
    lab_home,
    make_store,
    read_scope,
    session_scope,
    store_id,
)
from storage.models import utcnow
from trainer.checkpoint_layout import checkpoint_step, is_complete, list_checkpoints
from trainer.jobs import remote
from trainer.jobs.backend import LOCAL, RAY, BackendError, host_name, shared_root
from trainer.jobs.backend import current as current_backend
from trainer.jobs.commands import log_tail, start_command
from trainer.jobs.liveness import STALE_AFTER_S, admission_error, reap_dead_jobs, shown_status
from trainer.jobs.owner import pid_alive

HEARTBEAT_S = 2.0
QUEUE_POLL_S = 1.0
JOB_KINDS = ("train", "benchmark", "personas", "compare", "judge", "shadow", "import", "calibrate")
# kinds that use the accelerator and so wait until they fit (trainer.jobs.admission); the others call APIs and
# start at once (a persona generation or a judge run never waits behind a training job)
QUEUED_KINDS = ("train", "benchmark", "compare")
RESUMABLE = ("interrupted", "failed", "cancelled", "dead")
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "interrupted")


class JobCancelled(Exception):
    """Raised by JobContext.check_cancelled() (and by entering a job cancelled while it waited)."""


class JobError(ValueError):
    """A job cannot be started, resumed or cancelled in its current state."""


class JobOwnershipLost(JobError):
    """This process no longer owns its job (another process took it over); it stops without writing."""


# ---------------------------------------------------------------------------------------------- processes
def job_dir(store: Engine, job_id: int) -> Path:
    """The job's folder, keyed by the store's id (not created here; call outside a write transaction)."""
    return jobs_root(store) / str(job_id)


def jobs_root(store: Engine) -> Path:
    return (shared_root() or lab_home()) / "jobs" / store_id(store)


# ------------------------------------------------------------------------------------------ service API
def create_job(store: Engine, kind: str, config: dict[str, Any], name: str = "",
               parent_id: Optional[int] = None, seed: int = 0) -> int:
    """Record a queued job (nothing runs until `launch`). Returns its id. JobError when a web caller is at the
    owner's ceiling of live jobs (an experiment's cells included: its runner waits for room)."""
    if problem := admission_error(store):
        raise JobError(f"jobs: {problem}")
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
    """Start `python -m trainer job JOB_ID` in a new process group; record pid and log path; return pid (0 with
    the ray backend: the job is submitted as a Ray job, whose process records its pid when it claims the job).

    The store URL goes to the child in RLVER_LAB_DB, not on its command line, so a URL holding a
    password never shows in a process list or a log."""
    store = make_store(store_url)
    backend = current_backend()
    try:
        with read_scope(store) as s:
            job = get_or_raise(s, Job, job_id, JobError)
            if job.status != "queued":
                raise JobError(f"job {job_id} is {job.status}; only a queued job can be launched")
            if job.pid is not None and (job.backend == RAY or job.host not in ("", host_name())
                                        or pid_alive(job.pid)):
                raise JobError(f"job {job_id} already has a live process (pid {job.pid} on {job.host or 'this host'})")
            folder = Path(job.output_dir or job_dir(store, job_id))
        folder.mkdir(parents=True, exist_ok=True)
        if backend.kind == RAY:
            try:
                remote.launch(store, store_url, job_id, backend)
            except BackendError as exc:
                raise JobError(str(exc)) from None
            return 0
        log_path = folder / "job.log"
        try:
            proc = start_command(store_url, ["job", str(job_id)], log_path, f"reap-job-{job_id}")
        except OSError as exc:  # no process: the row ends failed, not queued for one that never comes
            remote.fail_unlaunched(store, job_id, f"could not start: {exc}")
            raise
        with session_scope(store) as s:
            job = s.get(Job, job_id)
            job.log_path, job.backend = str(log_path), LOCAL
            if job.status == "queued" and job.pid in (None, proc.pid):  # the child may have got there first
                job.pid, job.host, job.heartbeat_at = proc.pid, host_name(), utcnow()
        return proc.pid
    finally:
        store.dispose()


def set_log_path(store: Engine, job_id: int, path: str) -> None:
    """Record the job's log file unless it has one already (jobs.launch records the file it writes to)."""
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        job.log_path = job.log_path or path


def clone(store: Engine, job_id: int) -> int:
    """A new queued job with the same kind, config and seed; parent_id points at the original."""
    with read_scope(store) as s:
        job = get_or_raise(s, Job, job_id, JobError)
        kind, config, name, seed = job.kind, dict(job.config), job.name, job.seed
    return create_job(store, kind, config, name=f"{name} (clone of #{job_id})", parent_id=job_id, seed=seed)


# ------------------------------------------------------------------------------- reading (writes nothing)
def _job_dict(job: Job, stale_after_s: float = STALE_AFTER_S) -> dict[str, Any]:
    """Every Job column; `status` is the one shown (stalled / dead derived, the reason in `error`),
    `stored_status` what the row says."""
    out = as_dict(job)
    shown, why = shown_status(job, stale_after_s)
    out["stored_status"], out["status"] = job.status, shown
    if why:
        out["error"] = why
    return out


def list_jobs(store: Engine, kind: Optional[str] = None, limit: int = 100,
              stale_after_s: float = STALE_AFTER_S) -> list[dict[str, Any]]:
    """Newest first, as plain dicts (see _job_dict); reading writes nothing."""
    q = select(Job).order_by(Job.id.desc()).limit(limit)
    if kind:
        q = q.where(Job.kind == kind)
    with read_scope(store) as s:
        return [_job_dict(j, stale_after_s) for j in s.scalars(q)]


def get_job(store: Engine, job_id: int) -> Optional[dict[str, Any]]:
    """One job as list_jobs gives it (no metrics, checkpoints or log), or None."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        return _job_dict(job) if job is not None else None


def job_for(store: Engine, kind: str, key: str, value: int) -> Optional[dict[str, Any]]:
    """The newest job of `kind` whose config has `key` == value (e.g. the persona job of generation 3)."""
    with read_scope(store) as s:
        job = s.scalars(select(Job).where(Job.kind == kind, Job.config[key].as_integer() == int(value))
                        .order_by(Job.id.desc())).first()
        return _job_dict(job) if job is not None else None


def job_detail(store: Engine, job_id: int, log_lines: int = 200,
               stale_after_s: float = STALE_AFTER_S) -> Optional[dict[str, Any]]:
    """Everything a job view shows: the job's columns (see _job_dict), metrics as series {name: {"step":
    [..], "value": [..]}} in step order, checkpoints (oldest first) and the log tail. None when the job does
    not exist. Reading writes nothing."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        if job is None:
            return None
        out = _job_dict(job, stale_after_s)
        series: dict[str, dict[str, list]] = {}
        for m in s.scalars(select(Metric).where(Metric.job_id == job_id).order_by(Metric.step, Metric.name)):
            entry = series.setdefault(m.name, {"step": [], "value": []})
            entry["step"].append(m.step)
            entry["value"].append(m.value)
        out["metrics"] = series
        out["checkpoints"] = [{"step": c.step, "path": c.path, "metrics": c.metrics, "created_at": c.created_at}
                              for c in s.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id)
                                                 .order_by(Checkpoint.step, Checkpoint.id))]
    if out["backend"] == RAY:  # the Ray node its process runs on (two raylets of one machine share its host name)
        out["ray_node"] = remote.node_of(out["backend_address"], out["backend_job_id"])
    from_ray = remote.log_text(out["backend_address"], out["backend_job_id"]) if log_lines and \
        out["backend"] == RAY else None  # the Ray job's output, as Ray keeps it
    out["log_tail"] = "\n".join(from_ray.splitlines()[-log_lines:]) if from_ray is not None else \
        log_tail(out["log_path"], log_lines)
    return out


def last_checkpoint(store: Engine, job_id: int, disk_root: Optional[str | Path] = None) -> Optional[dict[str, Any]]:
    """The job's latest checkpoint {step, path, metrics}, or None. With disk_root (the checkpoints folder
    of a training job): the newest *complete* one (trainer.checkpoint_layout.is_complete), recorded or only on disk (a
    kill between writing a checkpoint and recording it)."""
    with read_scope(store) as s:
        rows = [{"step": c.step, "path": c.path, "metrics": dict(c.metrics)} for c in s.scalars(
            select(Checkpoint).where(Checkpoint.job_id == job_id)
            .order_by(Checkpoint.step.desc(), Checkpoint.id.desc()))]
    if disk_root is None:
        return rows[0] if rows else None
    root = Path(disk_root)
    on_disk = [{"step": checkpoint_step(p), "path": str(p), "metrics": {}} for p in list_checkpoints(root)]
    complete = [r for r in rows if is_complete(r["path"])] + on_disk
    return max(complete, key=lambda r: (r["step"], bool(r["metrics"])), default=None)


__all__ = ["HEARTBEAT_S", "QUEUED_KINDS", "RESUMABLE", "STALE_AFTER_S", "JobCancelled", "JobError",
           "JobOwnershipLost", "clone", "create_job", "get_job", "job_detail", "job_for", "last_checkpoint",
           "launch", "list_jobs", "log_tail", "pid_alive", "reap_dead_jobs", "set_log_path"]
