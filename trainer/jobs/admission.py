"""Which accelerator-bound jobs (train, benchmark, compare) may run side by side on one machine.

A job of those kinds starts when no older one of them waits (first come, first served) and it fits beside
the ones running: their memory plus its own within the memory limit, their threads plus its own within the
core limit. The owner sets both limits (`python -m app --job-memory-gib G --job-cores N`, or the environment
variables below for jobs started from a shell); the defaults come from the machine: its physical memory
(the first GPU's when CUDA is present) less RESERVED_GIB, and its cores.

A job's threads are fixed for its life, so its numbers never depend on what else ran beside it: a training
job takes every core (it runs alone unless the owner raises --job-cores), a benchmark or a comparison half of
them (two side by side on any machine). Its memory is the plan's per-device peak for training, and for a
benchmark or comparison the policy's weights, its KV cache for the dialogues in flight and the process's
own PROCESS_GIB (torch, the offline simulator). What a job took is written to `resources.json` in its folder,
which is what the other jobs read.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage import Job, read_scope
from storage.models import utcnow
from trainer.jobs.backend import LOCAL
from trainer.jobs.liveness import STALE_AFTER_S, shown_status
from trainer.jobs.queue import QUEUED_KINDS

CORES_VAR, MEMORY_VAR = "RLVER_LAB_JOB_CORES", "RLVER_LAB_JOB_MEMORY_GIB"
RESERVED_GIB = 2.0  # left to the app, the OS and the page cache when the memory limit comes from the machine
PROCESS_GIB = 1.5  # a job process before its policy: torch, transformers, the offline simulator's scorer
DEFAULT_CONTEXT = 2048  # tokens per dialogue when a config names no cap
RESOURCES_FILE = "resources.json"


@dataclass
class JobResources:
    memory_gib: float  # on the job's device (the GPU's memory on CUDA)
    threads: int
    why: str  # how memory_gib was found, for the log and the views

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MachineLimits:
    memory_gib: float
    cores: int
    source: str


def machine_limits() -> MachineLimits:
    """The owner's limits (environment) or the machine's."""
    cores_text, memory_text = os.environ.get(CORES_VAR, "").strip(), os.environ.get(MEMORY_VAR, "").strip()
    cores = int(cores_text) if cores_text.isdigit() and int(cores_text) > 0 else (os.cpu_count() or 1)
    try:
        memory = float(memory_text)
    except ValueError:
        memory = 0.0
    if memory > 0:
        return MachineLimits(memory, cores, "owner")
    return MachineLimits(max(1.0, _device_memory_gib() - RESERVED_GIB), cores, "machine")


def _device_memory_gib() -> float:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory / 2 ** 30
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30


def job_threads(kind: str, limits: MachineLimits) -> int:
    return limits.cores if kind == "train" else max(1, limits.cores // 2)


def job_resources(kind: str, config: dict[str, Any], limits: MachineLimits,
                  comparison_config: Optional[dict[str, Any]] = None) -> JobResources:
    """What a job of `kind` with `config` takes; the whole memory limit when it cannot be estimated (so it
    runs alone rather than beside a job it might not fit with). An estimate above the limit is kept as it is
    (too_big_error says so)."""
    threads = job_threads(kind, limits)
    try:
        if kind == "train":
            memory, why = _train_gib(config)
        elif kind == "compare":
            # a comparison's sides run as benchmarks with their defaults: 16 dialogues in flight, no length cap
            sides = [_inference_gib(str(comparison_config.get(side, "default")), 16, 0) for side in ("a", "b")]
            memory, why = max(sides), "the larger side's policy (the sides play one after the other)"
        else:
            memory = _inference_gib(str(config.get("policy", "default")), int(config.get("concurrency", 16) or 16),
                                    int(config.get("max_tokens", 0) or 0))
            why = "policy weights + KV cache for the dialogues in flight + the process"
    except Exception as exc:  # an estimate, never a reason for the job to fail: it runs alone instead
        memory, why = limits.memory_gib, f"not estimated ({type(exc).__name__}: {exc}): runs alone"
    return JobResources(round(memory, 2), threads, why)


def too_big_error(resources: JobResources, limits: MachineLimits) -> str:
    """Why a job estimated at `resources` cannot run on this machine at all ('' when it can)."""
    if resources.memory_gib <= limits.memory_gib + 1e-9:
        return ""
    limit = "--job-memory-gib" if limits.source == "owner" else "the machine's memory less the app's share"
    return (f"memory: this job needs an estimated {resources.memory_gib:,.1f} GiB ({resources.why}), more than "
            f"the {limits.memory_gib:,.1f} GiB jobs may take ({limit}); lower its concurrency or max_tokens, or "
            "pick a smaller model")


def _train_gib(config: dict[str, Any]) -> tuple[float, str]:
    from trainer.config import TrainConfig
    from trainer.plan import plan_config

    train = TrainConfig.from_dict(config)
    plan = plan_config(train, probe=False)
    if plan.extra.get("gpus", 1) > 1:
        raise ValueError("a job over several GPUs takes the machine")
    return plan.per_gpu_gib, "the plan's per-device peak (python -m trainer plan)"


def _inference_gib(policy: str, concurrency: int, max_tokens: int) -> float:
    from trainer.plan_shapes import model_shape
    from trainer.plan_memory import kv_bytes_per_token
    from trainer.policies.spec import PolicySpec

    spec = PolicySpec(policy)
    if spec.kind == "vllm":
        raise ValueError("vLLM takes a fixed share of the GPU")
    if spec.kind not in ("default", "folder"):  # an API or a replay: no weights in the process
        return PROCESS_GIB
    shape = model_shape(policy)
    import torch

    dtype_bytes = 2 if torch.cuda.is_available() else 4
    kv = kv_bytes_per_token(shape, dtype_bytes) * max(1, concurrency) * (max_tokens or DEFAULT_CONTEXT)
    return PROCESS_GIB + (shape.total_params * dtype_bytes + kv) / 2 ** 30


def write_resources(folder: str | Path, resources: JobResources) -> None:
    path = Path(folder) / RESOURCES_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(resources.to_dict()), encoding="utf-8")
    os.replace(tmp, path)


def read_resources(folder: str | Path, limits: Optional[MachineLimits] = None) -> JobResources:
    """What a job wrote it takes; a job that wrote nothing (started before this existed) takes the machine."""
    limits = limits or machine_limits()
    try:
        data = json.loads((Path(folder) / RESOURCES_FILE).read_text(encoding="utf-8"))
        return JobResources(float(data["memory_gib"]), int(data["threads"]), str(data.get("why", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return JobResources(limits.memory_gib, limits.cores, "not recorded: takes the machine")


def fits(mine: JobResources, running: list[JobResources], limits: MachineLimits) -> bool:
    """Whether `mine` fits beside `running` within the limits (a lone job always starts)."""
    if not running:
        return True
    memory = sum(r.memory_gib for r in running) + mine.memory_gib
    threads = sum(r.threads for r in running) + mine.threads
    return memory <= limits.memory_gib + 1e-9 and threads <= limits.cores


def jobs_ahead(s: Session, job_id: int, stale_after_s: float = STALE_AFTER_S) -> list[Job]:
    """The live local jobs of the queued kinds job `job_id` waits behind ([] when it may start): every one when an
    older one still waits (first come, first served); else the running ones (stalled included: its process
    still holds the memory) when it does not fit beside them. Local jobs on different machines run one at a
    time. Dead ones never block. A job of the ray backend waits for nothing here, and none waits for it: Ray
    starts each when the resources it asked for are free (trainer.jobs.ray_jobs)."""
    me = s.get(Job, job_id)
    if me is not None and me.backend != LOCAL:
        return []
    live = [j for j in s.scalars(select(Job).where(Job.id != job_id, Job.pid.is_not(None), Job.backend == LOCAL,
                                                   Job.kind.in_(QUEUED_KINDS), Job.status.in_(("running", "queued"))))
            if shown_status(j, stale_after_s)[0] != "dead" and (j.status == "running" or j.id < job_id)]
    running = [j for j in live if j.status == "running"]
    if len(running) < len(live):
        return live
    if not running or me is None or any(j.host != me.host for j in running + [me]):
        return running  # a job on another machine is not this machine's to share
    limits = machine_limits()
    mine = read_resources(me.output_dir, limits)
    return [] if fits(mine, [read_resources(j.output_dir, limits) for j in running], limits) else running


def behind_text(ahead: list[Job], now: Any = None) -> str:
    """'queued behind #2 (benchmark, about 4 min left)' naming the first job ahead, its kind and its time
    left at its pace so far (its progress over the time since it started), and how many more wait before."""
    if not ahead:
        return "queued"
    first = min(ahead, key=lambda j: (j.status != "running", j.id))
    left = "time left unknown"
    done = float(first.progress or 0.0)
    if first.status == "running" and first.started_at is not None and 0 < done < 1:
        eta = ((now or utcnow()) - first.started_at).total_seconds() * (1 - done) / done  # at its pace so far
        left = f"about {eta:.0f} s left" if eta < 90 else f"about {eta / 60:.0f} min left" if eta < 5400 \
            else f"about {eta / 3600:.1f} h left"
    elif first.status == "queued":
        left = "itself waiting"
    more = f", then {len(ahead) - 1} more" if len(ahead) > 1 else ""
    return f"queued behind #{first.id} ({first.kind}, {left}){more}"


def queued_behind(store: Any, job_id: Optional[int]) -> str:
    """behind_text for a queued job of the queued kinds (what the CLI prints, for the views), or for a job of the
    ray backend what it waits for; '' otherwise."""
    if job_id is None:
        return ""
    with read_scope(store) as s:
        job = s.get(Job, int(job_id))
        if job is None or job.status != "queued" or job.kind not in QUEUED_KINDS:
            return ""
        if job.backend != LOCAL:  # Ray starts it: what it waits for is Ray's to say (trainer.jobs.liveness)
            return shown_status(job)[1] or "queued (submitted to Ray)"
        return behind_text(jobs_ahead(s, int(job_id)))
