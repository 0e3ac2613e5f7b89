"""The ray backend: a lab job as a Ray job, through the Ray Jobs API (ray.job_submission.JobSubmissionClient).

The Ray job's entrypoint is the local backend's command, `python -m trainer job ID` (under torchrun with one
rank a GPU when a training job asks for several GPUs), run from the lab's checkout on the node Ray picks, with
the resources the job names (trainer.jobs.backend.job_resources). The job process then is what a local one is:
it claims the job in the store, heartbeats, writes its status; Ray captures its output (the job's log view
reads it back from Ray) and stops it on Cancel (SIGTERM, then SIGKILL after STOP_WAIT_S).

Ray is imported only here and only when the ray backend is used (`pip install -e '.[cluster]'`).
"""
from __future__ import annotations

import json
import shlex
import sys
import time
import urllib.request
from functools import lru_cache
from typing import Any, Optional


class BackendError(ValueError):
    """The job backend settings cannot work, or the cluster refused a job (one line naming the flag or job)."""


class AlreadySubmitted(BackendError):
    """Ray already has a job of this submission id: this attempt was submitted before (it is not submitted again)."""

RAY_MISSING = "the ray backend needs Ray: pip install -e '.[cluster]' (make setup installs it)"
TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")
MISSING, UNREACHABLE = "MISSING", "UNREACHABLE"  # no such Ray job; the cluster did not answer
AGENT_WAIT_S = 60.0  # a head that has just started has no job agent yet: submit retries that long
STOP_WAIT_S = 15  # after Cancel's SIGTERM, Ray waits this long (a local job's grace too) before SIGKILL


@lru_cache(maxsize=8)
def _client(address: str) -> Any:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError:
        raise BackendError(RAY_MISSING) from None
    return JobSubmissionClient(address)


def resolve_address(value: str) -> str:
    """`auto`, `ray://HEAD:10001` or `http://HEAD:8265` -> the cluster's Jobs API address (http://...);
    BackendError in one line when the cluster cannot be reached."""
    target = None if value in ("auto", "ray") else value
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError:
        raise BackendError(RAY_MISSING) from None
    try:
        client = JobSubmissionClient(target or "auto")
        client.list_jobs()  # a real request: the Jobs API answers
        return client.get_address()
    except Exception as exc:  # ConnectionError, a refused ray:// client, no local cluster for auto
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendError(f"--jobs {value}: cannot reach the Ray cluster's Jobs API ({first[:300]}); start it "
                           "with `ray start --head` (docs/cluster.md)") from None


def entrypoint(python: str, project_root: str, job_id: int, gpus: int, nodes: int = 1, cpus: float = 1.0) -> str:
    """The shell command Ray runs: the lab's own job command from its checkout; for a training job across
    nodes (nodes > 1, `gpus` per node) the driver that places its ranks (trainer.learning.ray_ranks)."""
    cmd = [python, "-m", "trainer", "job", str(job_id)]
    if nodes > 1:
        cmd = [python, "-m", "trainer.learning.ray_ranks", str(job_id), f"--nodes={nodes}", f"--gpus={gpus}",
               f"--cpus={cpus:g}"]
    elif gpus > 1:  # one rank a GPU, the lab's DeepSpeed path (torchrun-style RANK / WORLD_SIZE / MASTER_ADDR)
        cmd = [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}", "-m", "trainer",
               "job", str(job_id)]
    return f"cd {shlex.quote(project_root)} && exec {' '.join(shlex.quote(c) for c in cmd)}"


def submission_id(store_key: str, job_id: int, attempt: int) -> str:
    """The Ray submission id of one attempt of a lab job (lab-<store id>-job<id>-attempt<n>): the same attempt
    submitted twice is refused by Ray (AlreadySubmitted), never run twice."""
    return f"lab-{store_key}-job{job_id}-attempt{attempt}"


def submit(address: str, job_id: int, env: dict[str, str], resources: dict[str, Any], project_root: str,
           name: str = "", submission: Optional[str] = None, store_key: str = "", nodes: int = 1) -> str:
    """Submit job `job_id` as a Ray job under the submission id `submission` (Ray makes one when None); returns
    the submission id. AlreadySubmitted when Ray has that id already; BackendError when it refuses the job. With
    nodes > 1, `resources` are what each node's ranks ask (the driver itself asks nothing and runs on the head)."""
    gpus = int(resources.get("entrypoint_num_gpus") or 0)
    cpus = float(resources.get("entrypoint_num_cpus") or 1.0)
    command = entrypoint(sys.executable, project_root, job_id, gpus, nodes, cpus)
    resources = resources if nodes <= 1 else {}
    env_vars = dict(env, RAY_JOB_STOP_WAIT_TIME_S=str(STOP_WAIT_S), PYTHONUNBUFFERED="1")
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return _client(address).submit_job(
                entrypoint=command,
                runtime_env={"env_vars": env_vars}, metadata={"rlver_lab_job": str(job_id), "rlver_lab_store": store_key,
                                                               "name": name[:100]},
                submission_id=submission, **resources)
        except BackendError:
            raise
        except Exception as exc:
            if "No available agent" in str(exc) and time.monotonic() < deadline:  # a head still starting up
                time.sleep(1.0)
                continue
            if submission and "already exists" in str(exc):
                raise AlreadySubmitted(f"job {job_id}: Ray job {submission} was submitted already") from None
            raise BackendError(f"job {job_id}: the Ray cluster at {address} refused it: {exc}") from None


def state(address: str, submission_id: str) -> str:
    """Ray's status of the job (PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED), MISSING when Ray does not know
    it (a restarted head forgets its jobs), UNREACHABLE when the cluster does not answer."""
    try:
        client = _client(address)
        return str(client.get_job_status(submission_id).value)
    except BackendError:
        return UNREACHABLE
    except RuntimeError as exc:
        return MISSING if "does not exist" in str(exc) else UNREACHABLE
    except Exception:
        return UNREACHABLE


def ended(address: str, submission_id: str) -> bool:
    """True when Ray says the job's process has ended (or Ray no longer knows the job)."""
    return state(address, submission_id) in (*TERMINAL, MISSING)


def stop(address: str, submission_id: str) -> bool:
    """Ask Ray to stop the job (SIGTERM, SIGKILL after STOP_WAIT_S); False when it had ended or Ray is away."""
    try:
        return bool(_client(address).stop_job(submission_id))
    except Exception:
        return False


def logs(address: str, submission_id: str) -> Optional[str]:
    """The job's output as Ray keeps it, or None when the cluster cannot give it."""
    try:
        return _client(address).get_job_logs(submission_id)
    except Exception:
        return None


LOAD_TTL_S = 5.0  # a listing of many waiting jobs asks the cluster once
_loads: dict[str, tuple[float, Optional[dict[str, Any]]]] = {}


def cluster_load(address: str) -> Optional[dict[str, Any]]:
    """What the cluster holds and what waits for it, from the dashboard's autoscaler report (what `ray status`
    prints): {"totals": {resource: amount}, "demand": [({resource: amount}, count), ...]}; None when the
    cluster does not say. Kept LOAD_TTL_S seconds."""
    seen = _loads.get(address)
    if seen is not None and time.monotonic() - seen[0] < LOAD_TTL_S:
        return seen[1]
    _loads[address] = (time.monotonic(), _read_load(address))
    return _loads[address][1]


def _read_load(address: str) -> Optional[dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{address.rstrip('/')}/api/cluster_status", timeout=10) as answer:
            report = json.load(answer)["data"]["clusterStatus"]["loadMetricsReport"]
        totals = {name: float(pair[1]) for name, pair in report["usage"].items() if not name.startswith("node:")}
        return {"totals": totals, "demand": [(dict(shape), int(count)) for shape, count in report["resourceDemand"]]}
    except Exception:
        return None


def node_of(address: str, submission_id: str) -> str:
    """The Ray node id the job runs on ('' when unknown)."""
    try:
        return _client(address).get_job_info(submission_id).driver_node_id or ""
    except Exception:
        return ""
