"""Which backend runs the lab's jobs: `local` (a process of the launching machine, the default) or `ray` (a Ray
job on a cluster, through the Ray Jobs API: trainer.jobs.ray_jobs), and the shared folder of job folders.

The app and the commands take `--jobs local|ray://HEAD:10001|auto|http://HEAD:8265` and `--shared-dir PATH`;
`configure` checks them once at start (one line naming the problem) and installs them in the environment
(RLVER_LAB_JOBS, RLVER_LAB_SHARED_DIR), where `launch` and the job processes it starts read them:

- `ray` needs a PostgreSQL store (a SQLite file cannot be written from several machines; docs/store.md) and
  a shared folder every node sees, for the job folders (logs, checkpoints, API counters);
- the Ray address is resolved once to the cluster's Jobs API (the dashboard's http address), which is what
  the job rows record, so any process reading the store can ask Ray about a job.
"""
from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from sqlalchemy.engine import make_url

from trainer.jobs.ray_jobs import BackendError, resolve_address

JOBS_ENV = "RLVER_LAB_JOBS"
SHARED_ENV = "RLVER_LAB_SHARED_DIR"
LOCAL, RAY = "local", "ray"
RAY_PREFIXES = ("ray://", "http://", "https://")


@dataclass(frozen=True)
class Backend:
    """`kind` local | ray; `address`: the Ray cluster's Jobs API (http://HEAD:8265) for ray, '' for local."""

    kind: str
    address: str = ""


def current() -> Backend:
    """The backend this process launches jobs with (RLVER_LAB_JOBS: unset or `local`, else a resolved address)."""
    value = os.environ.get(JOBS_ENV, "").strip()
    if not value or value == LOCAL:
        return Backend(LOCAL)
    return Backend(RAY, value)


def host_name() -> str:
    """This machine's name as job rows record it (the owner's host)."""
    return socket.gethostname()


def is_ray_setting(value: str) -> bool:
    return value == "auto" or value == RAY or value.startswith(RAY_PREFIXES)


def check_jobs_value(value: str) -> str:
    """`--jobs` as given -> the same, or BackendError naming what is allowed."""
    value = (value or LOCAL).strip()
    if value == LOCAL or is_ray_setting(value):
        return value
    raise BackendError(f"--jobs: {value!r} is not a job backend; use local, auto, ray://HEAD:10001 or "
                       "http://HEAD:8265 (the Ray dashboard)")


def check_store_for_ray(store_url: str) -> None:
    """A SQLite store with the ray backend: refused in one line (the nodes must all reach the store)."""
    try:
        backend = make_url(store_url).get_backend_name()
    except Exception:  # an unparsable URL is the store's own error, said when it is opened
        return
    if backend != "postgresql":
        raise BackendError(f"--jobs ray needs a PostgreSQL store that every node reaches (docs/store.md), not "
                           f"{backend}: give --db postgresql://USER@HOST:5432/DB")


def check_shared_dir(path: Optional[str]) -> Path:
    """The shared folder of job folders: it must exist, be a folder and take a file written and read back.
    Returns the absolute path; BackendError naming --shared-dir otherwise."""
    if not path:
        raise BackendError("--shared-dir: the ray backend needs a folder every node sees (NFS or the like) for the "
                           "job folders and checkpoints; give --shared-dir PATH")
    folder = Path(path).expanduser().absolute()
    if not folder.is_dir():
        raise BackendError(f"--shared-dir {folder}: not a folder (mount the shared file system there first)")
    probe = folder / f".rlver-lab-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.write_text(host_name())
        ok = probe.read_text() == host_name()
        probe.unlink()
    except OSError as exc:
        raise BackendError(f"--shared-dir {folder}: cannot write there ({exc.strerror or exc})") from None
    if not ok:
        raise BackendError(f"--shared-dir {folder}: a file written there read back differently")
    return folder


def configure(jobs: Optional[str], shared_dir: Optional[str], store_url: str) -> Backend:
    """Check the backend settings and install them for this process and every process it starts. Raises
    BackendError (one line) when they cannot work: a SQLite store with ray, a shared folder missing or not
    writable, a cluster that cannot be reached."""
    value = check_jobs_value(jobs or os.environ.get(JOBS_ENV, "") or LOCAL)
    folder = check_shared_dir(shared_dir) if shared_dir else None
    if value == LOCAL:
        os.environ[JOBS_ENV] = LOCAL
    else:
        check_store_for_ray(store_url)
        folder = folder or check_shared_dir(os.environ.get(SHARED_ENV))
        os.environ[JOBS_ENV] = resolve_address(value)
    if folder is not None:
        os.environ[SHARED_ENV] = str(folder)
    return current()


def shared_root() -> Optional[Path]:
    """The shared folder of job folders (RLVER_LAB_SHARED_DIR), or None: the lab home's."""
    value = os.environ.get(SHARED_ENV, "").strip()
    return Path(value) if value else None


def job_resources(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    """What a job asks the cluster for (Ray's entrypoint_num_cpus / _num_gpus / _memory): the GPUs of its
    config's `gpus` (a training job's per node; a benchmark's or a comparison's 1 when it runs a local model on
    a GPU), every job one CPU; `resources: {cpus, gpus, memory_gib}` in a job's config overrides either."""
    gpus = int(config.get("gpus") or 0)
    cpus: float = 1.0
    memory = 0
    extra = config.get("resources") or {}
    if isinstance(extra, dict):
        gpus = int(extra.get("gpus", gpus) or 0)
        cpus = float(extra.get("cpus", cpus) or 0)
        memory = int(float(extra.get("memory_gib", 0) or 0) * 2 ** 30)
    out: dict[str, Any] = {"entrypoint_num_cpus": cpus}
    if gpus:
        out["entrypoint_num_gpus"] = gpus
    if memory:
        out["entrypoint_memory"] = memory
    return out


def store_url_for_nodes(store_url: str) -> str:
    """The store URL a Ray job gets, without its password (Ray shows a job's environment on its dashboard):
    the nodes read the password from their own ~/.pgpass or PGPASSWORD."""
    url = make_url(store_url)
    return url.set(password=None).render_as_string(hide_password=False) if url.password else store_url
