"""`python -m trainer compare`: two policies, the same personas, simulated user, seeds and rules; paired.

    python -m trainer compare --a POLICY --b POLICY [--profiles SPEC] [--simulator SPEC] [--seeds K]
        [--mode direct|think] [--max-new-tokens N] [--limit N] [--db URL] [--json]
    python -m trainer compare --resume COMPARISON_ID [--stop-owner] [--db URL] [--json]

POLICY is what the benchmark takes (default, a model folder, a training checkpoint folder, vllm:PATH,
openai:MODEL with --a-base-url / --b-base-url). Each side at each seed is an eval run of the benchmark
protocol; their dialogues are paired persona by persona (trainer/benchmarking/compare.py). Shown: per persona
both finals and the first turn where the replies, and the user's emotion, differ; then wins / ties / losses
of B over A with the mean difference and its paired bootstrap 95% interval and the sign test, by hidden need
and personality. --json: one object per persona and seed, then one summary object (wins, ties, losses,
mean_diff, ci_low, ci_high, sign_test_p, comparison_id). Every input of both sides is checked before a
dialogue is played. A comparison is a job run by this process (lock, heartbeat): killed, it shows as dead,
and --resume plays only what it lacks (the eval runs it finished are kept and linked). Exit status: 0 done,
1 a run failed or was stopped (continue with --resume), 2 bad input or the comparison's process still lives.
"""
from __future__ import annotations

import argparse
import json
import sys

from simulator.personas.store import open_store
from trainer.benchmarking import compare, compare_runs
from trainer.benchmarking.benchmark import BenchmarkInputError
from trainer.jobs.queue import JobError


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = compare.CompareConfig()
    p.add_argument("--a", default=None, help="policy A (the baseline; required unless --resume)")
    p.add_argument("--b", default=None, help="policy B (compared with A: a win is B ending higher)")
    p.add_argument("--a-base-url", default="", help="endpoint of an openai:MODEL policy A")
    p.add_argument("--b-base-url", default="", help="endpoint of an openai:MODEL policy B")
    p.add_argument("--profiles", default=d.profiles, help="persona spec (default: %(default)s)")
    p.add_argument("--simulator", default=d.simulator, help="the simulated user (default: %(default)s)")
    p.add_argument("--simulator-base-url", default="", help="endpoint of an openai:MODEL simulator")
    p.add_argument("--prompt-pack", default=d.prompt_pack, help="own | own:json | sage:DIR | v1")
    p.add_argument("--seeds", type=int, default=d.seeds, help="seeds per persona (default: %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed, help="the first seed (default: %(default)s)")
    p.add_argument("--mode", choices=("direct", "think"), default=d.mode)
    p.add_argument("--temperature", type=float, default=d.temperature, help="policy sampling temperature")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, help="cap per policy reply")
    p.add_argument("--limit", type=int, default=d.limit, help="only the first N personas (0 = all)")
    p.add_argument("--name", default="", help="a name for the comparison")
    p.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: the lab's SQLite file)")
    p.add_argument("--json", action="store_true", help="JSON lines on stdout, progress on stderr")
    p.add_argument("--resume", type=int, default=None, metavar="COMPARISON_ID",
                   help="continue a comparison that was cut off: only what it lacks is played (refused while the "
                        "process that runs it lives)")
    p.add_argument("--stop-owner", action="store_true",
                   help="with --resume: kill the process that still owns the comparison (e.g. a stalled one) first")


def _fmt(x) -> str:
    return "-" if x is None else f"{x:g}"


def run(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    try:
        if args.resume is not None:
            comparison_id = compare_runs.resume_comparison(store, args.resume, log=log, stop_owner=args.stop_owner,
                                                           clean_stdout=args.json)
        else:
            missing = [f"--{side}" for side in ("a", "b") if not getattr(args, side)]
            if missing:
                print(f"error: {', '.join(missing)}: required (a policy spec), unless --resume", file=sys.stderr)
                return 2
            config = compare.CompareConfig(
                a=args.a, b=args.b, a_base_url=args.a_base_url, b_base_url=args.b_base_url, profiles=args.profiles,
                simulator=args.simulator, simulator_base_url=args.simulator_base_url, prompt_pack=args.prompt_pack,
                seeds=args.seeds, seed=args.seed, mode=args.mode, temperature=args.temperature,
                max_new_tokens=args.max_new_tokens, limit=args.limit, name=args.name)
            comparison_id = compare_runs.run_comparison(store, config, log=log, clean_stdout=args.json)
    except (BenchmarkInputError, JobError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    stored = compare.get_comparison(store, comparison_id)
    if stored["status"] != "succeeded":
        print(f"error: comparison {comparison_id} {stored['status']}"
              + (f": {stored['error']}" if stored["error"] and stored["status"] != "cancelled" else "")
              + f"; continue it with --resume {comparison_id}", file=sys.stderr)
        return 1
    config = compare.CompareConfig.from_dict(stored["config"])
    pairs = compare.comparison_pairs(store, comparison_id)
    summary = stored["summary"]
    if args.json:
        for p in pairs:
            print(json.dumps(compare.persona_line(p), ensure_ascii=False))
        print(json.dumps({**{k: summary[k] for k in ("wins", "ties", "losses", "mean_diff", "ci_low", "ci_high",
                                                      "sign_test_p", "n")}, "comparison_id": comparison_id}))
        return 0
    print(f"comparison {comparison_id}: A = {config.a}, B = {config.b}")
    print(f"{'persona':<28} {'seed':>4} {'A':>6} {'B':>6} {'B-A':>6} {'reply diff':>10} {'emotion diff':>12}")
    for p in sorted(pairs, key=lambda p: -abs(p["diff"] or 0)):
        print(f"{p['persona'][:28]:<28} {p['seed']:>4} {_fmt(p['a_final']):>6} {_fmt(p['b_final']):>6} "
              f"{_fmt(p['diff']):>6} {_fmt(p['first_reply_diff_turn']):>10} {_fmt(p['first_emotion_diff_turn']):>12}")
    ci = f"[{summary['ci_low']:.1f}, {summary['ci_high']:.1f}]" if summary["n"] else "-"
    mean = f"{summary['mean_diff']:+.1f}" if summary["n"] else "-"
    print(f"B over A: {summary['wins']} wins, {summary['ties']} ties, {summary['losses']} losses; "
          f"mean difference {mean}, 95% paired bootstrap {ci}, sign test p = {summary['sign_test_p']:.3f}")
    return 0
