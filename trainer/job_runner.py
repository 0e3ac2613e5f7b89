"""Run a recorded job in this process: the one runner behind `python -m trainer train`, `resume` and `job`. It sits
above trainer.jobs (the queue, the owner lock, the context), trainer.learning and trainer.benchmarking, whose work
it starts by the job's kind
(what `jobs.launch` starts, so also the app's Launch, Resume and benchmark buttons).

    run_job(store, job_id) -> exit status

The job's kind picks the work (RUNNERS: "train" the RL trainer, "benchmark" the Sentient benchmark runner,
"compare" a paired comparison (trainer.benchmarking.compare_runs), "personas" a persona generation:
simulator.personas.generation_store.run_generation_job, "judge" a judge run: trainer.benchmarking.judge_jobs, "shadow" a simulator's shadow judgements of a human set:
trainer.benchmarking.shadow_jobs, "import" a human-played corpus: trainer.import_jobs, "calibrate" a simulator
fitted to a human set: trainer.benchmarking.calibrate_jobs).
Rank 0 holds the JobContext (queue, heartbeat, ownership, final status) and writes its output to the job's
log as well as to the terminal; under the `deepspeed` launcher the other ranks get the job from rank 0 and
run the same work with a RankJob, which never writes to the store's job row.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from storage import Store
from trainer.checkpoint_layout import policy_path
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.context import JobContext
from trainer.jobs.foreground import job_log

# exit status of a job run: the job cannot run = unknown id, wrong state, or owned by another live process
EXIT_OK, EXIT_FAILED, EXIT_CANNOT_RUN, EXIT_CANCELLED = 0, 1, 2, 143


@dataclass
class RankJob:
    """What ranks other than 0 need of the job (rank 0 holds the real JobContext and does the reporting)."""

    job_id: int
    kind: str
    config: dict[str, Any]
    output_dir: str
    resume_from: Optional[str]
    cancelled: bool = False  # rank 0 decides when to stop and tells the others (RLTrainer._cancelled)


def _run_train(store: Store, job: Any) -> dict[str, Any]:
    from trainer.config import TrainConfig
    from trainer.learning.distributed import check_ranks, world
    from trainer.learning.rl_trainer import RLTrainer

    config = TrainConfig.from_dict(job.config)
    check_ranks(config.nodes, config.gpus, world()[1])  # the shape planned is the shape run
    return RLTrainer(config, store=store, job=job).train()


def _run_benchmark(store: Store, job: Any) -> dict[str, Any]:
    from trainer.benchmarking.benchmark import run_benchmark_job

    run_benchmark_job(store, job)
    return {}


def _run_compare(store: Store, job: Any) -> dict[str, Any]:
    from trainer.benchmarking.compare_runs import run_comparison_job

    return run_comparison_job(store, job)


def _run_judge(store: Store, job: Any) -> dict[str, Any]:
    from trainer.benchmarking.judge_jobs import run_judge_job

    return run_judge_job(store, job)


def _run_shadow(store: Store, job: Any) -> dict[str, Any]:
    from trainer.benchmarking.shadow_jobs import shadow_job

    return shadow_job(store, job)


def _run_calibrate(store: Store, job: Any) -> dict[str, Any]:
    from trainer.benchmarking.calibrate_jobs import calibrate_job

    return calibrate_job(store, job)


def _run_import(store: Store, job: Any) -> dict[str, Any]:
    from trainer.import_jobs import run_import_job

    return run_import_job(store, job)


def _run_personas(store: Store, job: Any) -> dict[str, Any]:
    from simulator.personas.generation_store import run_generation_job

    status = run_generation_job(store, int(job.config["generation_id"]), cancelled=lambda: job.cancelled,
                                progress=job.progress)
    return {"generation_status": status}


RUNNERS: dict[str, Callable[[Store, Any], dict[str, Any]]] = {"train": _run_train, "benchmark": _run_benchmark,
                                                              "personas": _run_personas, "compare": _run_compare,
                                                              "judge": _run_judge, "shadow": _run_shadow,
                                                              "import": _run_import, "calibrate": _run_calibrate}
DISTRIBUTED_KINDS = ("train",)  # kinds whose work every rank shares; other ranks skip the rest


def run_job(store: Store, job_id: int, as_json: bool = False) -> int:
    """Run job `job_id` (queued) to its end in this process; with as_json, end with one JSON line (job_id,
    status, steps, metrics, checkpoint, error). Returns the exit status (EXIT_*)."""
    from trainer.learning.distributed import broadcast_object, world  # torch: imported only when a job runs

    if world()[0] != 0:
        info = broadcast_object(None)
        if info is None:  # rank 0 could not start the job
            return EXIT_CANNOT_RUN
        if info.kind in DISTRIBUTED_KINDS:
            RUNNERS[info.kind](store, info)
        return EXIT_OK
    summary: dict[str, Any] = {}
    try:
        ctx = JobContext(store, job_id)
        if ctx.kind not in RUNNERS:
            raise job_queue.JobError(f"job {job_id}: unknown kind {ctx.kind!r}; one of {', '.join(RUNNERS)}")
    except job_queue.JobError as exc:
        broadcast_object(None)  # the other ranks wait for the job: it will not run
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_CANNOT_RUN
    else:
        with job_log(store, ctx):
            code, summary = _run(store, ctx, broadcast_object)
    if as_json:
        print(json.dumps(job_result(store, job_id, summary), default=str))
    return code


def _run(store: Store, ctx: Any, broadcast_object: Callable[[Any], Any]) -> tuple[int, dict[str, Any]]:
    """Rank 0's side: the job's life (JobContext) around its work; (exit status, the work's summary)."""
    announced = False
    try:
        with ctx:
            broadcast_object(RankJob(ctx.job_id, ctx.kind, ctx.config, ctx.output_dir, ctx.resume_from))
            announced = True
            summary = RUNNERS[ctx.kind](store, ctx)
        return (EXIT_CANCELLED if ctx.cancelled else EXIT_OK), summary
    except job_queue.JobCancelled as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CANCELLED, {}
    except job_queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN, {}
    except Exception:  # recorded as failed (with the error) and printed by JobContext
        return EXIT_FAILED, {}
    finally:
        if not announced:
            broadcast_object(None)  # the other ranks wait for the job: it will not run


def follow_on_backend(store: Store, store_url: str, job_id: int, as_json: bool = False, poll_s: float = 1.0) -> int:
    """With the ray backend (`--jobs ray...`): launch queued job `job_id` as a Ray job and follow it to its end
    here, its output (as Ray keeps it) echoed on stderr; Ctrl-C cancels it. Returns the exit status."""
    import time

    from trainer.jobs import remote

    job_queue.launch(store_url, job_id)
    echoed = 0
    try:
        while True:
            job = job_queue.get_job(store, job_id) or {}
            text = remote.log_text(job.get("backend_address", ""), job.get("backend_job_id", "")) or ""
            sys.stderr.write(text[echoed:])
            sys.stderr.flush()
            echoed = max(echoed, len(text))
            if job.get("status") in (*job_queue.FINAL_STATUSES, "dead"):
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        print(f"job {job_id}: cancelling its Ray job", file=sys.stderr, flush=True)
        job_control.cancel(store, job_id)
        job = job_queue.get_job(store, job_id) or {}
    if as_json:
        print(json.dumps(job_result(store, job_id, {}), default=str))
    return {"succeeded": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(job.get("status", ""), EXIT_FAILED)


def job_result(store: Store, job_id: int, summary: dict[str, Any]) -> dict[str, Any]:
    """The job as the `--json` line describes it: job_id, status, steps, metrics (the last step's),
    checkpoint (the latest path), policy_path (the trained model: the checkpoint's `policy/` folder), error."""
    detail = job_queue.job_detail(store, job_id, log_lines=0) or {}
    last = job_queue.last_checkpoint(store, job_id)
    metrics = summary.get("metrics") or {name: series["value"][-1]
                                         for name, series in (detail.get("metrics") or {}).items()}
    return {"job_id": job_id, "status": detail.get("status"), "steps": detail.get("step"),
            "metrics": metrics, "checkpoint": last["path"] if last else None,
            "policy_path": policy_path(last["path"] if last else None), "error": detail.get("error", "")}
