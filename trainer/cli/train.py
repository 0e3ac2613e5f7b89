"""`python -m trainer train --config FILE|--preset NAME [--db URL] [--json]` and `python -m trainer resume JOB_ID`.

`--preset` names one of trainer.presets (cpu-demo, paper-ppo-7b, ...); with `--config` too, the preset comes
first and the file's settings override it; `--set KEY=VALUE` overrides both.

`resume` takes any job the runner knows (trainer.job_runner.RUNNERS: a benchmark, comparison, persona
generation or judge run too) and continues it in this process, as `python -m trainer job` would.
Both run a training job recorded in the store, in this process: the job row carries status, pid,
heartbeat, progress, metrics, checkpoints and the log file (stdout is also written to the job's log).
`--json` ends the output with one JSON line: job_id, status, steps, metrics, checkpoint, policy_path (the
trained model: the checkpoint's `policy/` folder), error.
Under the `deepspeed` launcher every rank runs the same command; rank 0 owns the job row.

The job runs through trainer.job_runner.run_job, as every job does. Exit status: 0 succeeded, 1 failed,
2 bad input (invalid config, unknown job, wrong state), 143 cancelled.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Optional

import yaml


# ----------------------------------------------------------------------------------------------- train
def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config setting (YAML value), e.g. --set steps=3")
    parser.add_argument("--name", default="", help="job name (default: the config file's or the preset's name)")
    _common(parser)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """--config and --preset (at least one), shared by `train` and `plan`."""
    from trainer.presets import preset_names

    parser.add_argument("--config", default=None, help="training config YAML (see configs/)")
    parser.add_argument("--preset", default=None, choices=preset_names(),
                        help="a named preset; with --config, the file's settings override the preset's")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or "
                                                   "lab_data/lab.db)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line describing the job")
    # the `deepspeed` launcher passes --local_rank (LOCAL_RANK is also in the environment)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)


def load_config(path: Optional[str], overrides: list[str], preset: Optional[str] = None) -> Any:
    """The preset's settings, then the config file's, then the KEY=VALUE overrides (ConfigError on any
    problem, naming --config / --preset when neither is given)."""
    from trainer.config import ConfigError, TrainConfig
    from trainer.presets import preset_dict

    if not path and not preset:
        raise ConfigError({"--config": "give a config file (--config FILE) or a preset (--preset NAME)"})
    base: dict[str, Any] = {}
    if preset:
        try:
            base = TrainConfig.from_dict(preset_dict(preset)).to_dict()
        except ValueError as exc:  # ConfigError is a ValueError too
            raise ConfigError({"--preset": str(exc)}) from None
    if path:
        base.update(_file_settings(path))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError({"--set": f"expected KEY=VALUE, got {item!r}"})
        base[key.strip()] = yaml.safe_load(value)
    return TrainConfig.from_dict(base)


def run(args: argparse.Namespace) -> int:
    from trainer.config import ConfigError
    from trainer.job_runner import EXIT_CANNOT_RUN, run_job

    try:
        config = load_config(args.config, args.set, args.preset)
        config.validate()
        if config.nodes > 1 and not on_ray():  # here the ranks are this process and its launcher's
            from trainer.learning.distributed import check_ranks

            check_ranks(config.nodes, config.gpus, int(os.environ.get("WORLD_SIZE", 1)))
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    from simulator.personas.store import open_store
    from trainer.jobs import queue as job_queue
    from trainer.learning.distributed import broadcast_object, init_distributed

    rank, _ = (0, 1) if on_ray() else init_distributed(config.zero_stage)  # on Ray the job's ranks run there
    store = open_store(args.db)
    try:
        job_id = None
        if rank == 0:
            job_id = job_queue.create_job(store, "train", config.to_dict(), name=args.name or job_name(args),
                                          seed=config.seed)
        job_id = broadcast_object(job_id)
        if on_ray() and rank == 0:
            from storage import default_url
            from trainer.job_runner import follow_on_backend

            return follow_on_backend(store, args.db or default_url(), job_id, args.json)
        return run_job(store, job_id, args.json)
    finally:
        store.dispose()


def _file_settings(path: str) -> dict[str, Any]:
    """Only the settings a config file states (checked like a whole config), to lay over a preset."""
    from trainer.config import ConfigError, TrainConfig

    full = TrainConfig.from_yaml(path)  # raises ConfigError naming a bad field or file
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError({"config": f"{path} must be a mapping of settings"})
    return {k: v for k, v in full.to_dict().items() if k in data}


def on_ray() -> bool:
    """True when this command's jobs go to a Ray cluster (`python -m trainer --jobs ray...`)."""
    from trainer.jobs.backend import RAY, current

    return current().kind == RAY


def job_name(args: argparse.Namespace) -> str:
    """The default job name: the config file's stem, else the preset's name."""
    return Path(args.config).stem if args.config else args.preset


# ---------------------------------------------------------------------------------------------- resume
def add_resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", type=int, help="an interrupted, failed, cancelled or dead job (training, benchmark, "
                                                 "comparison, persona generation or judge run)")
    parser.add_argument("--detach", action="store_true",
                        help="start the job in the background (python -m trainer job) and return")
    parser.add_argument("--stop-owner", action="store_true",
                        help="if a process still owns the job (alive, perhaps stalled), kill it first instead of "
                             "refusing")
    _common(parser)


def run_resume(args: argparse.Namespace) -> int:
    from storage import default_url, make_store
    from trainer.config import TrainConfig
    from trainer.job_runner import EXIT_CANNOT_RUN, RUNNERS, run_job
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue
    from trainer.learning.distributed import broadcast_object, init_distributed

    store = make_store(args.db)
    try:
        detail = job_queue.get_job(store, args.job_id)
        if detail is None or detail["kind"] not in RUNNERS:
            print(f"error: job {args.job_id} is not a job in this store that can be resumed", file=sys.stderr)
            return EXIT_CANNOT_RUN
        rank = 0
        if detail["kind"] == "train":  # only training spans ranks (the deepspeed launcher)
            rank, _ = init_distributed(TrainConfig.from_dict(detail["config"]).zero_stage)
        problem = ""
        if rank == 0:
            try:
                if args.detach:
                    pid = job_control.resume(store, args.db or default_url(), args.job_id, stop_owner=args.stop_owner)
                    print(f"job {args.job_id} resumed in the background " + (f"(pid {pid})" if pid else "(a Ray job)"))
                else:
                    job_control.reopen(store, args.job_id, stop_owner=args.stop_owner)
            except job_queue.JobError as exc:
                problem = str(exc)
        problem = broadcast_object(problem)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return EXIT_CANNOT_RUN
        if args.detach:
            return 0
        if on_ray() and rank == 0:
            from trainer.job_runner import follow_on_backend

            return follow_on_backend(store, args.db or default_url(), args.job_id, args.json)
        return run_job(store, args.job_id, args.json)
    finally:
        store.dispose()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer train", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
