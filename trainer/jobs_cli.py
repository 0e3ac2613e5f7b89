"""`python -m trainer job JOB_ID [--db URL]`: run a recorded job in this process (what `jobs.launch` starts).

The job's kind picks the work: "train" runs the RL trainer, "benchmark" the Sentient benchmark runner.
Exit status: 0 succeeded, 1 failed, 2 the job cannot run (unknown id, wrong state), 143 cancelled.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional

from sqlalchemy import Engine

from storage import make_engine
from trainer.jobs import JobCancelled, JobContext, JobError

EXIT_CANCELLED = 143


def _run_train(engine: Engine, ctx: JobContext) -> None:
    from trainer.config import TrainConfig
    from trainer.rl_trainer import RLTrainer

    RLTrainer(TrainConfig.from_dict(ctx.config), engine=engine, job=ctx).train()


def _run_benchmark(engine: Engine, ctx: JobContext) -> None:
    from trainer.benchmark import run_benchmark_job

    run_benchmark_job(engine, ctx)


RUNNERS: dict[str, Callable[[Engine, JobContext], None]] = {"train": _run_train, "benchmark": _run_benchmark}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", type=int, help="id of a queued job in the store")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or "
                                                   "lab_data/lab.db)")


def run(args: argparse.Namespace) -> int:
    engine = make_engine(args.db)
    try:
        ctx = JobContext(engine, args.job_id)
        if ctx.kind not in RUNNERS:
            print(f"job {args.job_id}: unknown kind {ctx.kind!r}; one of {', '.join(RUNNERS)}", file=sys.stderr)
            return 2
        with ctx:
            RUNNERS[ctx.kind](engine, ctx)
        return EXIT_CANCELLED if ctx.cancelled else 0
    except JobCancelled as e:
        print(str(e), file=sys.stderr)
        return EXIT_CANCELLED
    except JobError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception:  # already recorded as failed (with the error) and printed by JobContext
        return 1
    finally:
        engine.dispose()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer job", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
