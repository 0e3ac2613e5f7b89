"""Benchmarks started from the command line, as jobs: `python -m trainer benchmark` records a "benchmark" job
and runs it in its own process as the job's owner (trainer.jobs.foreground), so it is shown, derived dead
when killed, and resumed like a job the app launched; `--resume EVAL_RUN_ID` reopens the eval run's job
(refused while its process lives) and plays only the personas it has not finished.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from sqlalchemy import Engine

from storage import EvalRun, session_scope
from trainer.benchmarking.benchmark import (
    RECORDED_KEYS,
    BenchmarkConfig,
    BenchmarkInputError,
    BenchmarkResult,
    check_config,
    run_benchmark,
)
from trainer.benchmarking.eval_runs import get_eval_run
from trainer.jobs.foreground import resume_foreground, run_foreground
from trainer.jobs.queue import create_job, get_job


def run_benchmark_foreground(store: Engine, config: BenchmarkConfig, log: Callable[[str], None] = print,
                             clean_stdout: bool = False) -> Optional[BenchmarkResult]:
    """Check every input, record a "benchmark" job and run it here to its end (None: cancelled before it
    began). BenchmarkInputError naming every bad input, before anything is recorded."""
    cfg = check_config(store, config)
    job_id = create_job(store, "benchmark", cfg.to_dict(), name=cfg.name or f"benchmark {cfg.policy}", seed=cfg.seed)
    return run_foreground(store, job_id, lambda ctx: run_benchmark(store, cfg, job=ctx, log=log), clean_stdout)


def resume_benchmark(store: Engine, eval_run_id: int, log: Callable[[str], None] = print, stop_owner: bool = False,
                     clean_stdout: bool = False) -> Optional[BenchmarkResult]:
    """Continue eval run `eval_run_id` here as its job's owner. Refused (JobError) while another process owns
    it, naming its pid; an eval run recorded before runs were jobs gets a job first."""
    stored = get_eval_run(store, eval_run_id)
    if stored is None:
        raise BenchmarkInputError(f"resume: eval run {eval_run_id} does not exist")
    if stored["status"] == "succeeded":
        raise BenchmarkInputError(f"resume: eval run {eval_run_id} already finished (score {stored['score']})")
    job_id = stored["job_id"]
    job = get_job(store, job_id) if job_id is not None else None
    if job is None:
        job_id = _adopt(store, eval_run_id, stored)
    elif job["kind"] != "benchmark":
        raise BenchmarkInputError(f"resume: eval run {eval_run_id} is played by {job['kind']} job {job_id}; resume "
                                  f"that job (python -m trainer resume {job_id}, or the view's Resume)")
    return resume_foreground(store, job_id, lambda ctx: run_benchmark(store, None, eval_run_id, job=ctx, log=log),
                             stop_owner=stop_owner, clean_stdout=clean_stdout)


def _adopt(store: Engine, eval_run_id: int, stored: dict[str, Any]) -> int:
    """A job for an eval run that has none (recorded before command-line runs were jobs); its id."""
    config = {k: v for k, v in (stored["config"] or {}).items() if k not in RECORDED_KEYS}
    job_id = create_job(store, "benchmark", config, name=stored["name"] or f"eval run {eval_run_id}",
                        seed=stored["seed"] or 0)
    with session_scope(store) as s:
        s.get(EvalRun, eval_run_id).job_id = job_id
    return job_id
