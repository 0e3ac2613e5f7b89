"""`python -m trainer judge`: rate a set of stored dialogues with the social-cognition judge.

    python -m trainer judge --eval-run 3 --model gpt-4.1 [--base-url URL]
    python -m trainer judge --job 7 --step 40 --model M      # a training step's dialogues
    python -m trainer judge --collection gpt-4.1_result.jsonl --model M   # imported transcripts
    python -m trainer judge --dialogues 12 13 14 --model M

The key comes from OPENAI_API_KEY, the endpoint from --base-url or OPENAI_BASE_URL. Dialogues already
judged without error by the same judge fingerprint are skipped (--force judges them again). Exit status 0
when at least one dialogue was judged or nothing was left to judge, 1 when every one failed, 2 on bad input.
"""
from __future__ import annotations

import argparse
import json
import sys

from simulator.evaluation.judge import DEFAULT_PROMPT_VERSION, DIMENSION_LABELS, DIMENSIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_argument_group("which dialogues (exactly one)")
    which.add_argument("--eval-run", type=int, help="the dialogues of a benchmark eval run")
    which.add_argument("--job", type=int, help="the dialogues of a training job (all steps, or --step)")
    which.add_argument("--step", type=int, help="with --job: one training step")
    which.add_argument("--collection", help="imported transcripts: the collection (file name) they came from")
    which.add_argument("--dialogues", type=int, nargs="+", metavar="ID", help="dialogue ids")
    parser.add_argument("--model", required=True, help="the judge model at the endpoint")
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
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default RLVER_LAB_DB)")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of the table")


def run(args: argparse.Namespace) -> int:
    from simulator.evaluation.judge import Judge
    from simulator.evaluation.judge_store import dialogue_scores, judge_and_store, select_dialogues, summarize
    from simulator.user.backends import make_backend
    from storage import make_store

    try:
        if args.temperature < 0:
            raise ValueError(f"--temperature: must be >= 0, got {args.temperature}")
        for name in ("max_tokens", "max_in_flight"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: must be at least 1, got {getattr(args, name)}")
        backend = make_backend(f"openai:{args.model}", base_url=args.base_url, temperature=args.temperature,
                               max_tokens=args.max_tokens, timeout=args.timeout, max_retries=args.max_retries,
                               max_in_flight=args.max_in_flight)
        judge = Judge(backend, prompt_version=args.prompt_version, json_schema=not args.no_json_schema)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = make_store(args.db)
    try:
        try:
            items = select_dialogues(store, eval_run_id=args.eval_run, job_id=args.job, step=args.step,
                                     collection=args.collection, dialogue_ids=args.dialogues)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        report = judge_and_store(store, judge, items, force=args.force)
        ids = [i.dialogue_id for i in items]
        group = next((g for g in summarize(dialogue_scores(store, ids)) if g["judge_hash"] == report["judge_hash"]),
                     None)
    finally:
        store.dispose()
    failed = [r for r in report["results"] if r.status != "ok"]
    summary = {"judge_hash": report["judge_hash"], "fingerprint": report["fingerprint"], "dialogues": len(items),
               "judged": report["judged"], "skipped": report["skipped"], "ok": report["ok"],
               "errors": report["errors"], "means": (group or {}).get("means", {}), "n": (group or {}).get("n", 0),
               "failures": [{"dialogue_id": r.dialogue_id, "kind": r.error_kind, "error": r.error} for r in failed]}
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        _print_table(summary)
    return 1 if report["judged"] and not report["ok"] else 0


def _print_table(s: dict) -> None:
    fp = s["fingerprint"]
    print(f"judge {fp['model']} @ {fp['endpoint']} · prompt {fp['prompt_version']} "
          f"({fp['prompt_sha256'][:12]}) · temperature {fp['temperature']} · fp {s['judge_hash']}")
    print(f"{s['dialogues']} dialogues: {s['judged']} judged now ({s['ok']} ok), {s['skipped']} already judged")
    for f in s["failures"]:
        print(f"  dialogue {f['dialogue_id']}: {f['kind']}: {f['error']}")
    if s["means"]:
        print(f"mean over {s['n']} judged dialogues (1-5):")
        for d in DIMENSIONS:
            print(f"  {DIMENSION_LABELS[d]:<20} {s['means'][d]:.2f}")
