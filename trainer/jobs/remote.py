"""Launch, Cancel, resume and log of a job run by the ray backend (trainer.jobs.ray_jobs), on the job's row alone.

No lock file decides for these jobs (the owner may run on any node): every write here is one write transaction
that first checks the row is still as it was read (status, pid, host, heartbeat), under the store's write lock
(docs/store.md), so it never races the owner, and Ray is asked whether the job's process has ended.

A Ray job runs `python -m trainer job ID` from the lab's checkout on whichever node Ray picks. The launcher
passes what it runs in the job's environment (`submitted_env`): the code version (storage.db.code_version: the
git commit, with "+dirty") and the environment's fingerprint (Python and the versions of the packages a job's
results depend on). The job process compares them with its node's before it takes the job (`node_problem`,
docs/cluster.md); a node that differs refuses it in one line naming the node and what differs, and the job ends
failed with that line (no figures from other code).
"""
from __future__ import annotations

import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Optional

from sqlalchemy import Engine

from storage import Job, read_scope, session_scope, store_id
from storage.db import PROJECT_ROOT, code_version
from storage.models import utcnow
from trainer.jobs import ray_jobs
from trainer.jobs.backend import RAY, SHARED_ENV, Backend, host_name, job_resources, store_url_for_nodes
from trainer.jobs.ray_jobs import BackendError

# what a Ray job's process gets from the launcher's environment: the lab's settings (the store URL without its
# password, the shared folder, the backend), the offline switches; never a key (nodes keep their own)
PASSED_ENV = ("RLVER_LAB_HOME", "RLVER_LAB_JOBS", SHARED_ENV, "RLVER_LAB_WARM_STARTS", "RLVER_LAB_ACCESS",
              "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM", "HF_HOME")
END_WAIT_S = 60.0  # how long Cancel and stop-owner wait for Ray to say the job's process has ended
CODE_ENV, PYTHON_ENV = "RLVER_LAB_SUBMITTED_CODE", "RLVER_LAB_SUBMITTED_ENV"
FINGERPRINT_PACKAGES = ("torch", "transformers", "deepspeed", "sqlalchemy", "ray")


def job_env(store_url: str) -> dict[str, str]:
    """The environment a Ray job's process gets (runtime_env env_vars)."""
    env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
    env.update({k: v for k, v in os.environ.items() if k.startswith("RLVER_LAB_ACCESS")})
    env["RLVER_LAB_DB"] = store_url_for_nodes(store_url)
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env.update(submitted_env())  # what the node must hold too (node_problem)
    return env


def environment_fingerprint() -> str:
    """Python's version and the installed versions of FINGERPRINT_PACKAGES, e.g. "python 3.11.7; torch 2.5.1; ..."."""
    parts = [f"python {platform.python_version()}"]
    for name in FINGERPRINT_PACKAGES:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} -")
    return "; ".join(parts)


def submitted_env() -> dict[str, str]:
    """What the launcher passes to a Ray job: its code version and environment fingerprint."""
    return {CODE_ENV: code_version(), PYTHON_ENV: environment_fingerprint()}


def node_problem(node: Optional[str] = None) -> str:
    """'' when this node runs what the job was submitted with (or nothing was passed: a local job), else one line
    naming the node and the difference."""
    wanted_code, wanted_env = os.environ.get(CODE_ENV), os.environ.get(PYTHON_ENV)
    where = f"node {host_name()}" + (f" (Ray node {node})" if node else "")
    if wanted_code and wanted_code != code_version():
        return (f"{where} holds code {code_version()}, the job was submitted with {wanted_code}: bring its checkout "
                "to the same commit (docs/cluster.md)")
    if wanted_env and wanted_env != environment_fingerprint():
        mine = dict(p.split(" ", 1) for p in environment_fingerprint().split("; "))
        theirs = dict(p.split(" ", 1) for p in wanted_env.split("; "))
        differs = ", ".join(f"{k} {mine.get(k, '-')} (submitted with {v})" for k, v in theirs.items()
                            if mine.get(k) != v)
        return f"{where} runs another environment: {differs}; install the same versions there (make setup)"
    return ""


def launch(store: Engine, store_url: str, job_id: int, backend: Backend) -> str:
    """Submit queued job `job_id` as a Ray job and record it on the row; returns the submission id. Its
    submission id is the attempt's own (ray_jobs.submission_id): a job submitted already (the row names its Ray
    job) is refused, and so by Ray is a second submission of the same attempt. A job the cluster refuses ends
    failed with Ray's reason (BackendError), so no row waits queued for a process that never comes."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        kind, config, name, folder, attempt = job.kind, dict(job.config), job.name, job.output_dir, job.attempt
        if job.backend == RAY and job.backend_job_id:
            raise ray_jobs.AlreadySubmitted(f"job {job_id} was submitted already as Ray job {job.backend_job_id}")
    store_key = store_id(store)
    submission = ray_jobs.submission_id(store_key, job_id, attempt)
    nodes = int(config.get("nodes") or 1) if kind == "train" else 1  # a training job across nodes: ray_ranks
    try:
        ray_jobs.submit(backend.address, job_id, job_env(store_url), job_resources(kind, config), str(PROJECT_ROOT),
                        name, submission=submission, store_key=store_key, nodes=nodes)
    except ray_jobs.AlreadySubmitted:
        raise
    except BackendError as exc:
        fail_unlaunched(store, job_id, str(exc), backend=RAY, backend_address=backend.address)
        raise
    finally:  # the row names its Ray job whatever Ray answered: a second launch of this attempt is refused
        with session_scope(store) as s:
            job = s.get(Job, job_id)
            job.backend, job.backend_address, job.backend_job_id = RAY, backend.address, submission
            job.log_path = str(Path(folder) / "job.log")
    return submission


def fail_unlaunched(store: Engine, job_id: int, reason: str, **values: Any) -> None:
    """A job whose launch failed (no process was started, or the cluster refused it) ends failed with the reason,
    unless a process took it meanwhile."""
    write_if_unchanged(store, job_id, _row(store, job_id), lambda j: j.status == "queued" and j.pid is None,
                       status="failed", finished_at=utcnow(), error=f"failed: {reason}", **values)


def _row(store: Engine, job_id: int) -> tuple:
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        return job.status, job.pid, job.host, job.heartbeat_at


def write_if_unchanged(store: Engine, job_id: int, seen: tuple, when: Callable[[Job], bool], **values: Any) -> bool:
    """Write `values` on the job only when its row is as `seen` (status, pid, host, heartbeat) and `when(job)`."""
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        if (job.status, job.pid, job.host, job.heartbeat_at) != seen or not when(job):
            return False
        for key, value in values.items():
            setattr(job, key, value)
        return True


def wait_ended(address: str, submission: str, timeout_s: float = END_WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not ray_jobs.ended(address, submission):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def cancel(store: Engine, job_id: int, final_statuses: tuple) -> None:
    """Cancel: Ray stops the job (SIGTERM: the process ends its unit and marks itself cancelled; SIGKILL after
    ray_jobs.STOP_WAIT_S). A job whose process never took it, or was killed, is marked cancelled here once Ray
    says it ended. Ray cannot stop a job it has not started (PENDING: waiting for resources): a job no process
    took is marked cancelled at once, and should Ray start it later, its process finds it cancelled and ends."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        address, submission = job.backend_address, job.backend_job_id
    unclaimed = lambda j: j.status not in final_statuses and j.pid is None  # noqa: E731
    if submission:
        ray_jobs.stop(address, submission)
        seen = _row(store, job_id)
        if ray_jobs.state(address, submission) == "PENDING" and \
                write_if_unchanged(store, job_id, seen, unclaimed, status="cancelled", finished_at=utcnow(),
                                   error="cancelled before Ray started it"):
            return
        ray_jobs.stop(address, submission)  # again: it may have started since (a stop before that does nothing)
        wait_ended(address, submission)
    if submission and not ray_jobs.ended(address, submission):
        return  # still ending (or the cluster does not answer): the process writes its own status
    seen = _row(store, job_id)
    write_if_unchanged(store, job_id, seen, lambda j: j.status not in final_statuses, status="cancelled",
                       finished_at=utcnow(), error="cancelled")


def reopen(store: Engine, job_id: int, resumable: tuple, shown: Callable[[Job], str],
           stop_owner: bool = False) -> None:
    """Put a dead / interrupted / failed / cancelled Ray job back in the queue (pid cleared: the next process to
    claim it in the store owns it). A live owner (running or stalled, Ray says its job runs) is refused with
    BackendError, or with stop_owner=True stopped through Ray first."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        status, address, submission = shown(job), job.backend_address, job.backend_job_id
    if status in ("running", "stalled", "queued") and submission:
        if not stop_owner:
            raise BackendError(f"job {job_id} is still owned by Ray job {submission} ({status}); wait for it, or "
                               "resume with stop-owner to stop it first")
        ray_jobs.stop(address, submission)
        if not wait_ended(address, submission):
            raise BackendError(f"job {job_id}: Ray job {submission} has not ended after {END_WAIT_S:g} s")
        with read_scope(store) as s:
            status = shown(s.get(Job, job_id))
    if status not in resumable and status != "dead" and not (stop_owner and status in ("running", "queued")):
        raise BackendError(f"job {job_id} is {status}; only an interrupted, failed or cancelled job can be resumed")
    seen = _row(store, job_id)
    if not write_if_unchanged(store, job_id, seen, lambda j: True, status="queued", error="", finished_at=None,
                              pid=None, host="", backend_job_id="", attempt=_attempt(store, job_id) + 1):
        raise BackendError(f"job {job_id} was taken by another process meanwhile; look again")


def _attempt(store: Engine, job_id: int) -> int:
    with read_scope(store) as s:
        return s.get(Job, job_id).attempt


def log_text(address: str, submission: str) -> Optional[str]:
    """The job's output from Ray (None when the cluster cannot give it: the caller reads the log file)."""
    return ray_jobs.logs(address, submission) if submission else None


def node_of(address: str, submission: str) -> str:
    """The Ray node id the job's process runs (or ran) on; '' when unknown."""
    return ray_jobs.node_of(address, submission) if submission else ""
