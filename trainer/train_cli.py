"""`python -m trainer train --config FILE [--db URL] [--json]` and `python -m trainer resume JOB_ID`.

Both run a training job recorded in the store, in this process: the job row carries status, pid,
heartbeat, progress, metrics, checkpoints and the log file (stdout is also written to the job's log).
`--json` ends the output with one JSON line: job_id, status, steps, metrics, checkpoint, policy_path (the
trained model: the checkpoint's `policy/` folder), error.
Under the `deepspeed` launcher every rank runs the same command; rank 0 owns the job row.

Exit status: 0 succeeded, 1 failed, 2 bad input (invalid config, unknown job, wrong state), 143 cancelled.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

import yaml

EXIT_CANCELLED = 143


class _Tee:
    """Write to the terminal and to the job's log file."""

    def __init__(self, stream: Any, log: Any):
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.log.write(text)
        self.log.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _RankJob:
    """What ranks other than 0 need of the job (rank 0 holds the real JobContext)."""

    def __init__(self, info: dict[str, Any]):
        self.job_id, self.output_dir, self.resume_from = info["job_id"], info["output_dir"], info["resume_from"]
        self.cancelled = False


# ----------------------------------------------------------------------------------------------- train
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="training config YAML (see configs/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config setting (YAML value), e.g. --set steps=3")
    parser.add_argument("--name", default="", help="job name (default: the config file's name)")
    _common(parser)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or "
                                                   "lab_data/lab.db)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line describing the job")
    # the `deepspeed` launcher passes --local_rank (LOCAL_RANK is also in the environment)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)


def load_config(path: str, overrides: list[str]) -> Any:
    """The config file with KEY=VALUE overrides applied (ConfigError on any problem)."""
    from trainer.config import ConfigError, TrainConfig

    base = TrainConfig.from_yaml(path).to_dict()
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError({"--set": f"expected KEY=VALUE, got {item!r}"})
        base[key.strip()] = yaml.safe_load(value)
    return TrainConfig.from_dict(base)


def run(args: argparse.Namespace) -> int:
    from trainer.config import ConfigError

    try:
        config = load_config(args.config, args.set)
        config.validate()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from simulator.persona_service import open_store
    from trainer import jobs
    from trainer.distributed import broadcast_object, init_distributed

    rank, _ = init_distributed(config.zero_stage)
    engine = open_store(args.db)
    try:
        job_id = None
        if rank == 0:
            job_id = jobs.create_job(engine, "train", config.to_dict(), name=args.name or Path(args.config).stem,
                                     seed=config.seed)
        job_id = broadcast_object(job_id)
        return _run_job(engine, job_id, args.json)
    finally:
        engine.dispose()


# ---------------------------------------------------------------------------------------------- resume
def add_resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", type=int, help="an interrupted, failed or cancelled training job")
    parser.add_argument("--detach", action="store_true",
                        help="start the job in the background (python -m trainer job) and return")
    parser.add_argument("--stop-owner", action="store_true",
                        help="if a process still owns the job (alive, perhaps stalled), kill it first instead of "
                             "refusing")
    _common(parser)


def run_resume(args: argparse.Namespace) -> int:
    from storage import default_url, make_engine
    from trainer import jobs
    from trainer.config import TrainConfig
    from trainer.distributed import broadcast_object, init_distributed

    engine = make_engine(args.db)
    try:
        detail = jobs.job_detail(engine, args.job_id, log_lines=0)
        if detail is None or detail["kind"] != "train":
            print(f"error: job {args.job_id} is not a training job in this store", file=sys.stderr)
            return 2
        config = TrainConfig.from_dict(detail["config"])
        rank, _ = init_distributed(config.zero_stage)
        problem = ""
        if rank == 0:
            try:
                if args.detach:
                    pid = jobs.resume(engine, args.db or default_url(), args.job_id, stop_owner=args.stop_owner)
                    print(f"job {args.job_id} resumed in the background (pid {pid})")
                else:
                    jobs.reopen(engine, args.job_id, stop_owner=args.stop_owner)
            except jobs.JobError as exc:
                problem = str(exc)
        problem = broadcast_object(problem)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        if args.detach:
            return 0
        return _run_job(engine, args.job_id, args.json)
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------------------ the job run
def _run_job(engine: Any, job_id: int, as_json: bool) -> int:
    """Run the training job `job_id` (queued) in this process; print the JSON line when asked."""
    from trainer.distributed import broadcast_object, world

    if world()[0] != 0:
        info = broadcast_object(None)
        _train(engine, _RankJob(info))
        return 0
    from trainer import jobs

    ctx = jobs.JobContext(engine, job_id)
    log = open(Path(ctx.output_dir) / "job.log", "a", encoding="utf-8")
    _record_log_path(engine, job_id, log.name)
    old_out, old_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(old_out, log), _Tee(old_err, log)
    summary: dict[str, Any] = {}
    code = 0
    try:
        with ctx:
            broadcast_object({"job_id": job_id, "output_dir": ctx.output_dir, "resume_from": ctx.resume_from})
            summary = _train(engine, ctx)
        code = EXIT_CANCELLED if ctx.cancelled else 0
    except jobs.JobCancelled as exc:
        print(str(exc), file=sys.stderr)
        code = EXIT_CANCELLED
    except jobs.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    except Exception:  # recorded as failed (with the error) and printed by JobContext
        code = 1
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        log.close()
    if as_json:
        print(json.dumps(_result(engine, job_id, summary), default=str))
    return code


def _train(engine: Any, job: Any) -> dict[str, Any]:
    from trainer.config import TrainConfig
    from trainer.rl_trainer import RLTrainer

    config = TrainConfig.from_dict(job.config) if hasattr(job, "config") else _config_of(engine, job.job_id)
    return RLTrainer(config, engine=engine, job=job).train()


def _config_of(engine: Any, job_id: int) -> Any:
    from storage import Job, read_scope
    from trainer.config import TrainConfig

    with read_scope(engine) as s:
        return TrainConfig.from_dict(dict(s.get(Job, job_id).config))


def _record_log_path(engine: Any, job_id: int, path: str) -> None:
    from storage import Job, session_scope

    with session_scope(engine) as s:
        job = s.get(Job, job_id)
        job.log_path = job.log_path or path


def _result(engine: Any, job_id: int, summary: dict[str, Any]) -> dict[str, Any]:
    from trainer import jobs

    detail = jobs.job_detail(engine, job_id, log_lines=0) or {}
    last = jobs.last_checkpoint(engine, job_id)
    metrics = summary.get("metrics") or {name: series["value"][-1]
                                         for name, series in (detail.get("metrics") or {}).items()}
    return {"job_id": job_id, "status": detail.get("status"), "steps": detail.get("step"),
            "metrics": metrics, "checkpoint": last["path"] if last else None,
            "policy_path": jobs.policy_path(last["path"] if last else None), "error": detail.get("error", "")}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer train", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
