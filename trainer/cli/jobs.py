"""`python -m trainer job JOB_ID [--db URL]`: run a recorded job in this process (what `jobs.launch` starts).
`python -m trainer jobs [JOB_ID] [--kind K] [--db URL] [--json]`: list the jobs, or show one.

The job runs through trainer.job_runner.run_job, as every job does; its kind picks the work: "train" runs
the RL trainer, "benchmark" the Sentient benchmark runner, "compare" a paired comparison, "personas" a
persona generation, "judge" a judge run. Exit status of `job`: 0 succeeded, 1 failed,
2 the job cannot run (unknown id, wrong state, owned by another live process), 143 cancelled. Listing
writes nothing: a job whose owner is gone shows as "dead" and one whose heartbeat is late while its
process lives as "stalled", the reason in its error (trainer.jobs.liveness), so the CLI alone shows the
truth; `jobs JOB_ID` exits 2 for an unknown job. With --json each job also
gives its host and backend (local | ray, with Ray's submission id), its last checkpoint and policy_path, the
trained model in it (None without a checkpoint); `jobs JOB_ID --json` of a Ray job also its Ray node id, and a
training job across Ray nodes (`nodes` > 1) its `ranks`: each rank's number, node rank, Ray node id and node IP.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional

from storage import make_store
from trainer.checkpoint_layout import policy_path
from trainer.jobs import queue as job_queue


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", type=int, help="id of a queued job in the store")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or "
                                                   "lab_data/lab.db)")


def run(args: argparse.Namespace) -> int:
    from trainer.job_runner import run_job

    store = make_store(args.db)
    try:
        if problem := _node_problem(store, args.job_id):
            print(f"error: job {args.job_id}: {problem}", file=sys.stderr)
            return 2
        if int(os.environ.get("WORLD_SIZE", 1)) > 1:  # one rank a GPU (a Ray job asking for several): join first
            from trainer.config import TrainConfig
            from trainer.learning.distributed import init_distributed

            detail = job_queue.get_job(store, args.job_id)
            if detail is not None and detail["kind"] == "train":
                init_distributed(TrainConfig.from_dict(detail["config"]).zero_stage)
        return run_job(store, args.job_id)
    finally:
        store.dispose()


def _node_problem(store: Any, job_id: int) -> str:
    """A Ray job on a node whose code or environment differs from the submitter's: the job ends failed with the
    one line naming the node (trainer.jobs.remote.node_problem); '' otherwise."""
    from trainer.jobs import remote

    if not remote.node_problem():
        return ""
    job = job_queue.get_job(store, job_id) or {}
    problem = remote.node_problem(remote.node_of(job.get("backend_address", ""), job.get("backend_job_id", "")))
    remote.fail_unlaunched(store, job_id, problem)
    return problem


# ------------------------------------------------------------------------------------ python -m trainer jobs
LIST_COLUMNS = ("id", "kind", "status", "step", "total_steps", "pid", "heartbeat_at", "name", "error", "host",
                "backend", "backend_job_id")


def add_jobs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", type=int, nargs="?", default=None, help="show this job only")
    parser.add_argument("--kind", choices=job_queue.JOB_KINDS, default=None)
    parser.add_argument("--limit", type=int, default=50, help="newest jobs listed (default 50)")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or "
                                                   "lab_data/lab.db)")
    parser.add_argument("--json", action="store_true", help="one JSON object per job")


def _row(job: dict[str, Any], checkpoint: Optional[str] = None) -> dict[str, Any]:
    row = {k: (str(job[k]) if k == "heartbeat_at" and job[k] is not None else job[k]) for k in LIST_COLUMNS}
    row.update(checkpoint=checkpoint, policy_path=policy_path(checkpoint))
    if "ray_node" in job:  # one job shown: the Ray node its process runs on
        row["ray_node"] = job["ray_node"]
    ranks = (job.get("config") or {}).get("ray_ranks")  # a training job across Ray nodes: where each rank runs
    if ranks:
        row["ranks"] = ranks
    return row


def run_jobs(args: argparse.Namespace) -> int:
    store = make_store(args.db)
    try:
        if args.job_id is not None:
            detail = job_queue.job_detail(store, args.job_id, log_lines=0)
            if detail is None:
                print(f"error: job {args.job_id} does not exist", file=sys.stderr)
                return 2
            found = [detail]
        else:
            found = job_queue.list_jobs(store, kind=args.kind, limit=args.limit)
        checkpoints = [(job_queue.last_checkpoint(store, job["id"]) or {}).get("path") for job in found]
    finally:
        store.dispose()
    for job, checkpoint in zip(found, checkpoints):
        row = _row(job, checkpoint)
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            steps = f"{row['step']}/{row['total_steps']}"
            print(f"#{row['id']:<5} {row['kind']:<10} {row['status']:<12} step {steps:<9} pid {row['pid'] or '-':<8} "
                  f"{row['name'][:40]}" + (f"  ({row['error'][:200]})" if row["error"] else ""))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer job", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
