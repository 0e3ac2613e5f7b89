"""`python -m trainer shadow --set human:NAME --simulator SPEC [...]`: shadow judgements of a human set.

    python -m trainer shadow --set human:esconv --simulator offline [--seed 0] [--db URL] [--json]
    python -m trainer shadow --resume JOB_ID [--stop-owner]   # continue a run that was cut off

Records a "shadow" job (listed by `python -m trainer jobs`, shown dead when killed) and runs it here as its
owner: the simulator plays over every reply of the set's dialogues from its own running emotion, its
judgements stored beside the people's turns under its fingerprint (trainer.benchmarking.shadow_jobs). A
resume plays only the turns not yet judged and stores what an uninterrupted run would. Then `python -m
simulator agreement --set human:NAME` compares the judgements with the people's ratings. Exit status 0 when
done, 1 when stopped with turns left, 2 on bad input or a refused resume.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="set_spec", default=None, help="the human set: human:NAME")
    parser.add_argument("--simulator", default="offline", help="simulator spec (offline, openai:MODEL, "
                                                               "python:MODULE:FACTORY)")
    parser.add_argument("--base-url", default="", help="endpoint of an openai: simulator")
    parser.add_argument("--pack", default="own", help="prompt pack of an openai: simulator")
    parser.add_argument("--rules", default="rlver-hard", help="emotion rules preset")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--calibration", default="", help="a calibration of the simulator (python -m simulator "
                                                          "calibrate): its changes mapped onto people's scale")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (each turn's is derived from it)")
    parser.add_argument("--resume", type=int, default=None, metavar="JOB_ID")
    parser.add_argument("--stop-owner", action="store_true", help="with --resume: kill a stalled owner first")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default RLVER_LAB_DB)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")


def run(args: argparse.Namespace) -> int:
    from storage import make_store
    from trainer.benchmarking import shadow_jobs
    from trainer.jobs.queue import JobError

    store = make_store(args.db)
    try:
        if args.resume is not None:
            job_id = args.resume
            summary = shadow_jobs.resume_shadow(store, job_id, stop_owner=args.stop_owner, clean_stdout=args.json)
        else:
            if not args.set_spec:
                raise ValueError("--set: required (human:NAME), unless --resume")
            settings = {"spec": args.simulator, "base_url": args.base_url, "pack": args.pack, "rules": args.rules,
                        "temperature": args.temperature, "calibration": args.calibration}
            job_id, summary = shadow_jobs.run_shadow_foreground(store, settings, args.set_spec, args.seed,
                                                                clean_stdout=args.json)
    except (ValueError, JobError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    if summary is None:
        print(f"error: shadow job {job_id} was cancelled before it began", file=sys.stderr)
        return 1
    summary = {"job_id": job_id, **summary}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"shadow job {job_id} · {summary['set']} · fingerprint {summary['fingerprint_hash'][:12]}: "
              f"{summary['played']} turn(s) judged now, {summary['errors']} error(s), {summary['left']} left of "
              f"{summary['turns']}")
    if summary["left"]:
        print(f"stopped with {summary['left']} turn(s) left; continue with python -m trainer shadow --resume {job_id}",
              file=sys.stderr)
        return 1
    return 0
