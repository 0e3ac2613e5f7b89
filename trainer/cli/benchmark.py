"""`python -m trainer benchmark`: score a policy on the Sentient benchmark and record the eval run.

    python -m trainer benchmark --policy default|PATH|openai:MODEL|replay:FILE
        --simulator offline|openai:MODEL|replay:FILE [--prompt-pack own|sage:DIR]
        [--simulator-base-url URL] [--profiles SPEC] [--limit N] [--db URL] [--out FILE] [--json]
        [--resume EVAL_RUN_ID]

SPEC is a persona spec (simulator.personas.specs): builtin (default), builtin:train, builtin:heldout, persona ids,
or a profiles file (file:PATH, or PATH).

Replay: with a SAGE `*_result.jsonl` F, `--policy replay:F --simulator replay:F --profiles F` plays every
recorded dialogue through this runner and its rules; the published row and every dialogue's final emotion
come out again exactly when the lab follows SAGE's protocol (a dialogue the rules end elsewhere than the
record fails, naming the turn).

Every run is a job (trainer/jobs/foreground.py): this process owns it (lock, heartbeat), so the Benchmark
view shows it, and a killed run shows as dead. --resume continues an eval run that was cut off (killed,
Ctrl-C, failed): its stored settings are used, the profiles it already finished are skipped, and every
dialogue's seed comes from its persona, so the result equals an uninterrupted run's. A resume while the run's
process is alive is refused, naming its pid (--stop-owner kills it first). --out writes the run's dialogues
as a SAGE `*_result.jsonl` file, which
`python -m simulator score FILE` scores to the same numbers. --json prints exactly one JSON object on
stdout (score, success, failure, n, ci_low, ci_high, eval_run_id, n_errors, protocol_hash, truncations);
progress goes to stderr.
Exit status: 0 done, 1 the run failed, 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from simulator.personas.store import open_store
from trainer.benchmarking import benchmark_jobs, protocol
from trainer.benchmarking.benchmark import BenchmarkConfig, BenchmarkInputError
from trainer.jobs.queue import JobError


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = BenchmarkConfig()
    p.add_argument("--policy", default=d.policy, help="default (SmolLM2-135M-Instruct) | model folder | "
                                                      "vllm:PATH | openai:MODEL (default: %(default)s)")
    p.add_argument("--policy-base-url", default=d.policy_base_url,
                   help="OpenAI-compatible endpoint of an openai:MODEL policy (default OPENAI_BASE_URL)")
    p.add_argument("--simulator", default=d.simulator,
                   help="offline | openai:MODEL | replay:FILE (default: %(default)s)")
    p.add_argument("--prompt-pack", default=d.prompt_pack,
                   help="simulator prompts and policy system prompt: own | own:json | sage:DIR | v1 (default: %(default)s)")
    p.add_argument("--calibration", default=d.calibration,
                   help="a calibration of the simulator's changes to people, by name (python -m simulator calibrate)")
    p.add_argument("--simulator-temperature", type=float, default=None, help="openai simulator temperature")
    p.add_argument("--simulator-max-tokens", type=int, default=None, help="openai simulator max tokens per call")
    p.add_argument("--simulator-base-url", default=d.simulator_base_url,
                   help="OpenAI-compatible endpoint of the simulator (key from OPENAI_API_KEY)")
    p.add_argument("--profiles", default=d.profiles,
                   help="builtin | builtin:train | builtin:heldout | file:PATH (profiles JSONL or a SAGE "
                        "*_result.jsonl) | persona ids (default: %(default)s)")
    p.add_argument("--limit", type=int, default=d.limit, help="only the first N profiles (0 = all)")
    p.add_argument("--mode", choices=("direct", "think"), default=d.mode)
    p.add_argument("--temperature", type=float, default=d.temperature, help="policy sampling temperature")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens,
                   help=f"cap per policy reply (0 = the protocol's: none for API and replay policies, as SAGE; "
                        f"{protocol.LOCAL_REPLY_CAP} for local engines)")
    p.add_argument("--no-stop-on-repetition", dest="stop_on_repetition", action="store_false",
                   help="local engines: let a reply that falls into a loop run on to the cap (recorded)")
    p.add_argument("--max-tokens", type=int, default=d.max_tokens,
                   help="cap per dialogue, prompt + reply (0 = the model's context)")
    p.add_argument("--concurrency", type=int, default=d.concurrency, help="dialogues in flight at once")
    for side in ("simulator", "policy"):
        p.add_argument(f"--{side}-max-in-flight", type=int, default=getattr(d, f"{side}_max_in_flight"),
                       help=f"openai {side}: requests in flight per endpoint (default: %(default)s)")
        p.add_argument(f"--{side}-requests-per-minute", type=int, default=0,
                       help=f"openai {side}: requests per minute per endpoint (0 = no limit)")
        p.add_argument(f"--{side}-max-retries", type=int, default=getattr(d, f"{side}_max_retries"),
                       help=f"openai {side}: retries of a call on 429, 5xx or timeouts (default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--name", default="", help="label of the eval run")
    p.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or lab_data/lab.db)")
    p.add_argument("--out", default=None, help="write the dialogues as a SAGE *_result.jsonl file")
    p.add_argument("--json", action="store_true", help="print one JSON object with the result")
    p.add_argument("--resume", type=int, default=None, metavar="EVAL_RUN_ID",
                   help="continue this eval run, skipping the profiles it finished (refused while the process "
                        "that runs it lives)")
    p.add_argument("--stop-owner", action="store_true",
                   help="with --resume: kill the process that still owns the run (e.g. a stalled one) first")


def config_from_args(args: argparse.Namespace) -> BenchmarkConfig:
    return BenchmarkConfig(policy=args.policy, policy_base_url=args.policy_base_url, simulator=args.simulator,
                           simulator_base_url=args.simulator_base_url, prompt_pack=args.prompt_pack,
                           calibration=args.calibration, simulator_temperature=args.simulator_temperature,
                           simulator_max_tokens=args.simulator_max_tokens, profiles=args.profiles,
                           limit=args.limit, mode=args.mode, temperature=args.temperature,
                           max_new_tokens=args.max_new_tokens, max_tokens=args.max_tokens,
                           concurrency=args.concurrency, seed=args.seed, name=args.name,
                           stop_on_repetition=args.stop_on_repetition,
                           **{f"{side}_{limit}": getattr(args, f"{side}_{limit}") for side in ("simulator", "policy")
                              for limit in ("max_in_flight", "requests_per_minute", "max_retries")}).validate()


def run(args: argparse.Namespace) -> int:
    from simulator.evaluation.transcripts import export_sage_jsonl

    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if args.json else (lambda msg: print(msg, flush=True))
    store = open_store(args.db)
    try:
        if args.resume is not None:
            result = benchmark_jobs.resume_benchmark(store, args.resume, log=log, stop_owner=args.stop_owner,
                                                     clean_stdout=args.json)
        else:
            result = benchmark_jobs.run_benchmark_foreground(store, config_from_args(args), log=log,
                                                             clean_stdout=args.json)
        if result is None:
            print("error: the benchmark was cancelled before it began", file=sys.stderr)
            return 1
        if args.out and result.dialogue_ids:
            n = export_sage_jsonl(store, result.dialogue_ids, args.out)
            log(f"wrote {n} dialogue(s) to {args.out}")
    except (BenchmarkInputError, JobError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    from simulator.evaluation.scoring import format_summary

    summary = result.summary
    if summary is None:
        print(f"error: eval run {result.eval_run_id} scored no dialogues", file=sys.stderr)
        return 1
    if args.json:
        keys = ("score", "success", "failure", "n", "ci_low", "ci_high", "n_errors")
        print(json.dumps({**{k: getattr(summary, k) for k in keys}, "eval_run_id": result.eval_run_id,
                          "status": result.status, "protocol_hash": result.protocol.get("protocol_hash"),
                          "truncations": result.truncations}, ensure_ascii=False))
    else:
        print(format_summary(summary, f"eval run {result.eval_run_id} ({result.status})"))
    return 0 if result.status == "succeeded" else 1


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer benchmark", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
