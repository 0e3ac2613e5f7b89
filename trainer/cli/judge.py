"""`python -m trainer judge`: rate a set of stored dialogues with the social-cognition judge.

    python -m trainer judge --eval-run 3 --model gpt-4.1 [--base-url URL]
    python -m trainer judge --job 7 --step 40 --model M      # a training step's dialogues
    python -m trainer judge --collection gpt-4.1_result.jsonl --model M   # imported transcripts
    python -m trainer judge --dialogues 12 13 14 --model M
    python -m trainer judge --resume JOB_ID [--stop-owner]   # continue a judge run that was cut off

The key comes from OPENAI_API_KEY, the endpoint from --base-url or OPENAI_BASE_URL. Dialogues already
judged without error by the same judge fingerprint are skipped (--force judges them again). A run is a job
(trainer/benchmarking/judge_jobs.py) owned by this process (lock, heartbeat): it is listed with the other jobs
(`python -m trainer jobs`, the Training view), a killed run shows as dead, and --resume (or
`python -m trainer resume JOB_ID`) judges only the dialogues of its set not yet judged, with its recorded
settings; a resume while the run's process lives is refused, naming its pid. Ctrl-C stops the run (what was
judged is kept; resume it later). Exit status 0 when at least one dialogue was judged or nothing was left to
judge, 1 when every one failed or the run was stopped, 2 on bad input or a refused resume.
"""
from __future__ import annotations

import argparse
import json
import sys

from simulator.evaluation.judge import DEFAULT_PROMPT_VERSION, DIMENSION_LABELS, DIMENSIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_argument_group("which dialogues (exactly one, unless --resume)")
    which.add_argument("--eval-run", type=int, help="the dialogues of a benchmark eval run")
    which.add_argument("--job", type=int, help="the dialogues of a training job (all steps, or --step)")
    which.add_argument("--step", type=int, help="with --job: one training step")
    which.add_argument("--collection", help="imported transcripts: the collection (file name) they came from")
    which.add_argument("--dialogues", type=int, nargs="+", metavar="ID", help="dialogue ids")
    parser.add_argument("--model", default=None, help="the judge model at the endpoint (required unless --resume)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (default OPENAI_BASE_URL, "
                                                         "else api.openai.com)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per call")
    parser.add_argument("--max-retries", type=int, default=4, help="retries of a failed call (429, 5xx, ...)")
    parser.add_argument("--max-in-flight", type=int, default=8, help="judge calls in flight at once")
    parser.add_argument("--prompt-version", default=DEFAULT_PROMPT_VERSION,
                        help="a file of simulator/prompts/judge/ (default %(default)s)")
    parser.add_argument("--no-json-schema", action="store_true",
                        help="do not send response_format (for endpoints that refuse it); the answer is still "
                             "parsed as JSON, with one repair request")
    parser.add_argument("--force", action="store_true", help="judge again dialogues this judge already rated")
    parser.add_argument("--resume", type=int, default=None, metavar="JOB_ID",
                        help="continue this judge job with its recorded settings: only its dialogues not yet "
                             "judged (refused while the process that runs it lives)")
    parser.add_argument("--stop-owner", action="store_true",
                        help="with --resume: kill the process that still owns the job (e.g. a stalled one) first")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default RLVER_LAB_DB)")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of the table")


def run(args: argparse.Namespace) -> int:
    from storage import make_store
    from trainer.benchmarking import judge_jobs
    from trainer.jobs.queue import JobError

    settings = {"model": args.model, "base_url": args.base_url, "temperature": args.temperature,
                "max_tokens": args.max_tokens, "timeout": args.timeout, "max_retries": args.max_retries,
                "max_in_flight": args.max_in_flight, "prompt_version": args.prompt_version,
                "json_schema": not args.no_json_schema}
    selection = {"eval_run_id": args.eval_run, "job_id": args.job, "step": args.step,
                 "collection": args.collection, "dialogue_ids": args.dialogues}
    store = make_store(args.db)
    try:
        if args.resume is not None:
            given = [f"--{k.replace('_', '-')}" for k in ("eval_run", "job", "step", "collection", "dialogues",
                                                          "model", "base_url") if getattr(args, k) is not None]
            if given or args.force:
                raise ValueError(f"--resume: the job's recorded dialogues and settings are used; leave out "
                                 f"{', '.join(given + ['--force'] * args.force)}")
            job_id, summary = args.resume, judge_jobs.resume_judge(store, args.resume, stop_owner=args.stop_owner,
                                                                   clean_stdout=args.json)
        else:
            job_id, summary = judge_jobs.run_judge_foreground(store, settings, selection, force=args.force,
                                                              clean_stdout=args.json)
    except (ValueError, JobError) as exc:  # JobError is a ValueError too: bad input or a refused resume
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    if summary is None:
        print(f"error: judge job {job_id} was cancelled before it began", file=sys.stderr)
        return 1
    summary = {"job_id": job_id, **summary}
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        _print_table(summary)
    if summary["left"]:
        print(f"stopped with {summary['left']} dialogue(s) left to judge; continue with "
              f"python -m trainer judge --resume {job_id}", file=sys.stderr)
        return 1
    return 1 if summary["judged"] and not summary["ok"] else 0


def _print_table(s: dict) -> None:
    fp = s["fingerprint"]
    print(f"judge {fp['model']} @ {fp['endpoint']} · prompt {fp['prompt_version']} "
          f"({fp['prompt_sha256'][:12]}) · temperature {fp['temperature']} · fp {s['judge_hash']}")
    print(f"judge job {s['job_id']} · {s['dialogues']} dialogues: {s['judged']} judged now ({s['ok']} ok), "
          f"{s['skipped']} already judged" + (f", {s['left']} left" if s["left"] else ""))
    for f in s["failures"]:
        print(f"  dialogue {f['dialogue_id']}: {f['kind']}: {f['error']}")
    if s["means"]:
        print(f"mean over {s['n']} judged dialogues (1-5):")
        for d in DIMENSIONS:
            print(f"  {DIMENSION_LABELS[d]:<20} {s['means'][d]:.2f}")
