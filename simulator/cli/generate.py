"""`python -m simulator personas generate --spec FILE --base-url URL --model NAME [...]`: write persona
candidates with an LLM (simulator.personas.generation), print progress on stderr and a summary (candidates
per status, the generation id, the dedupe threshold) on stdout. Exit 0; 1 when every call failed or the
generation failed; 2 for bad options (the message names the option)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from simulator.personas.generation import DEFAULT_THRESHOLD


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="FILE", help="generation spec (YAML or JSON): count, seed, "
                   "needs, personalities, languages, traits, ages, topics, each a list or value -> share")
    p.add_argument("--base-url", required=True, metavar="URL",
                   help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, metavar="NAME")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable holding the API key (default OPENAI_API_KEY; unset: no key)")
    p.add_argument("--dedupe-threshold", type=float, default=DEFAULT_THRESHOLD, metavar="X",
                   help=f"MiniLM similarity of persona + background at which a candidate is a duplicate "
                        f"(default {DEFAULT_THRESHOLD})")
    p.add_argument("--accept", action="store_true", help="accept every valid, non-duplicate candidate at once")
    p.add_argument("--max-in-flight", type=int, default=4, help="requests in flight at once (default 4)")
    p.add_argument("--temperature", type=float, default=0.9)
    p.add_argument("--max-tokens", type=int, default=900, help="tokens per answer (default 900)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per call (default 120)")
    p.add_argument("--no-json-schema", action="store_true", help="send no response_format (for endpoints without it)")
    p.add_argument("--db", default=None, help="SQLAlchemy URL (default: RLVER_LAB_DB or the lab's SQLite file)")
    p.add_argument("--json", action="store_true", help="one JSON object with the summary and every candidate")


def option_errors(args: argparse.Namespace) -> list[str]:
    """'--option: problem' for each bad option value (the spec file is read later)."""
    errs = []
    if not str(args.base_url).startswith(("http://", "https://")):
        errs.append(f"--base-url: {args.base_url!r} is not an http(s) URL")
    if not args.model.strip():
        errs.append("--model: is empty")
    if not 0 < args.dedupe_threshold <= 1:
        errs.append(f"--dedupe-threshold: must be in (0, 1], got {args.dedupe_threshold:g}")
    if args.api_key_env is not None and args.api_key_env not in os.environ:
        errs.append(f"--api-key-env: the environment variable {args.api_key_env} is not set")
    if args.max_in_flight < 1:
        errs.append(f"--max-in-flight: must be at least 1, got {args.max_in_flight}")
    if args.max_tokens < 1:
        errs.append(f"--max-tokens: must be at least 1, got {args.max_tokens}")
    if not args.timeout > 0:
        errs.append(f"--timeout: must be above 0, got {args.timeout:g}")
    return errs


def summary_line(g: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {k}" for k, n in g["counts"].items() if n)
    return (f"generation {g['id']} {g['status']}: {g['n_done']} of {g['n_planned']} candidate(s)"
            + (f": {counts}" if counts else "") + f" (dedupe threshold {g['settings'].get('threshold', 0):.2f})"
            + (f"; error: {g['error']}" if g["error"] else ""))


def run(args: argparse.Namespace) -> int:
    from simulator.personas import generation_store
    from simulator.personas.generation import SpecError, load_spec
    from simulator.personas.store import open_store

    errs = option_errors(args)
    try:
        spec = load_spec(args.spec)
    except SpecError as e:
        errs += [f"--spec: {args.spec}: {k}: {v}" for k, v in e.errors.items()]
    if errs:
        for line in errs:
            print(line, file=sys.stderr)
        return 2
    try:
        gen = generation_store.make_generator(args.base_url, args.model,
                                              api_key_env=args.api_key_env or generation_store.DEFAULT_KEY_ENV,
                                              threshold=args.dedupe_threshold, temperature=args.temperature,
                                              max_tokens=args.max_tokens, max_in_flight=args.max_in_flight,
                                              timeout=args.timeout, json_schema=not args.no_json_schema)
    except ValueError as e:
        print(f"--model: {e}", file=sys.stderr)
        return 2
    store = open_store(args.db)
    print(f"generating {spec.count} persona(s) with {args.model} at {gen.fingerprint()['endpoint']}; "
          f"dedupe threshold {gen.threshold:.2f}", file=sys.stderr)

    def progress(cand: Any, done: int, planned: int) -> None:
        name = cand.profile.get("name", "") if isinstance(cand.profile, dict) else ""
        near = f" (similarity {cand.similarity:.2f} to {cand.nearest_id})" if cand.similarity is not None else ""
        why = f": {cand.validation_error[:200]}" if cand.validation_error else ""
        print(f"[{done}/{planned}] slot {cand.slot['slot']}: {cand.status} {name!r}{near}{why}", file=sys.stderr,
              flush=True)

    gid = generation_store.run_generation(store, spec, gen, on_result=progress)
    accepted = [p.id for p in generation_store.accept_all_valid(store, gid)] if args.accept else []
    g = generation_store.get_generation(store, gid)
    cands = generation_store.list_candidates(store, gid)
    if args.json:
        keys = ("id", "slot", "status", "similarity", "nearest_id", "validation_error", "lint_warnings", "attempts",
                "persona_id")
        print(json.dumps({"generation_id": gid, "status": g["status"], "counts": g["counts"], "error": g["error"],
                          "dedupe_threshold": gen.threshold, "accepted": accepted,
                          "candidates": [{**{k: c[k] for k in keys}, "name": c["profile"].get("name", "")}
                                         for c in cands]}, ensure_ascii=False))
    else:
        print(summary_line(g))
        if accepted:
            print(f"accepted {len(accepted)} as personas: {', '.join(accepted)}")
    all_failed = cands and all(c["validation_error"].startswith("the call failed") for c in cands)
    return 1 if g["status"] == "failed" or all_failed else 0
