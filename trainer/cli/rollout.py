"""`python -m trainer rollout`: run dialogues between a policy and simulated users, writing them to the store.

    python -m trainer rollout --persona ID [--persona ID ...] [--group N] [--policy SPEC] [--policy-base-url URL]
        [--simulator SPEC] [--simulator-base-url URL] [--prompt-pack PACK] [--simulator-temperature T]
        [--simulator-max-tokens N] [--simulator-max-in-flight N] [--simulator-requests-per-minute N]
        [--simulator-max-retries N] [--mode think|direct] [--max-turns N] [--db URL] [--json]

The policy and simulator specs are those of training and the benchmark (trainer.policies.spec,
simulator.user.spec): a checkpoint folder is a policy, `sage:DIR` a prompt pack.

A persona id is the store's profile, else the built-in one; a store with no profiles is seeded with the
built-in ones first. API keys come from OPENAI_API_KEY only; base URLs also from OPENAI_BASE_URL. Exit
status 0 when every dialogue ended (finished, or some failed / cancelled with their reason stored); 1 when
every dialogue failed (an outage a script must see) or one did not end; 2 for bad input.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any, Optional

from simulator.llm.traffic import TrafficLimits
from simulator.user.rules import DEFAULT_RULES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--persona", action="append", required=True, metavar="ID",
                   help="persona id, stored or built-in (repeatable)")
    p.add_argument("--group", type=int, default=1, metavar="N", help="dialogues per persona (GRPO group size)")
    p.add_argument("--policy", default="default",
                   help="default | model folder | checkpoint folder | vllm:PATH|default | openai:MODEL | replay:FILE")
    p.add_argument("--policy-base-url", default="", help="base URL for an openai: policy")
    p.add_argument("--simulator", default="offline",
                   help="offline | offline:v2 | openai:MODEL | replay:FILE | python:MODULE:FACTORY")
    p.add_argument("--simulator-base-url", default="", help="OpenAI-compatible base URL of the simulator")
    p.add_argument("--prompt-pack", default="own", help="own | own:json | sage:DIR | rlver:DIR | v1")
    p.add_argument("--calibration", default="",
                   help="a calibration of the simulator's changes to people, by name (python -m simulator calibrate)")
    p.add_argument("--simulator-temperature", type=float, default=None, help="the simulator model's sampling")
    p.add_argument("--simulator-max-tokens", type=int, default=None, metavar="N")
    defaults = TrafficLimits()
    p.add_argument("--simulator-max-in-flight", type=int, default=defaults.max_in_flight, metavar="N",
                   help="requests in flight to an openai: simulator")
    p.add_argument("--simulator-requests-per-minute", type=int, default=defaults.requests_per_minute, metavar="N",
                   help="0 = no limit")
    p.add_argument("--simulator-max-retries", type=int, default=defaults.max_retries, metavar="N")
    p.add_argument("--rules", default=DEFAULT_RULES,
                   help=f"the emotion rules (default {DEFAULT_RULES}, as in every view and the benchmark): standard | "
                        "challenging | rlver-hard | rlver-moderate ('training' is the old name of rlver-hard)")
    p.add_argument("--mode", choices=("think", "direct"), default="direct")
    p.add_argument("--max-turns", type=int, default=8, metavar="N")
    p.add_argument("--max-new-tokens", type=int, default=256, metavar="N", help="per policy turn")
    p.add_argument("--max-tokens", type=int, default=4096, metavar="N", help="per dialogue")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default=None, metavar="URL", help="SQLAlchemy URL (default: the lab store)")
    p.add_argument("--json", action="store_true", help="print one JSON object per dialogue")


def emotion_range_text(rules_name: str) -> str:
    """Why a final emotion may lie outside the charts' 0-100: 'rules rlver-hard: start 30, capped at 100, no
    floor (a drop below 0 ends the dialogue as a failure and is kept as said)'."""
    from simulator.user.rules import get_rules

    try:
        r = get_rules(rules_name)
    except (KeyError, ValueError):
        return f"rules {rules_name}"
    floor = (f"floored at {r.lo:g}" if r.floor_at_lo else
             f"no floor (a drop below {r.lo:g} is kept as said, so a final emotion can be negative)")
    return f"rules {r.name}: start {r.start:g}, capped at {r.hi:g}, {floor}"


def run(args: argparse.Namespace) -> int:
    from simulator.personas.specs import PersonaSpecError, resolve_personas
    from simulator.personas.store import open_store
    from simulator.user.spec import SimulatorSpec
    from storage.recorder import DialogueRecorder
    from trainer.learning.algorithms import rlver_reward
    from trainer.policies.spec import PolicySpec
    from trainer.rollout.build import SpecError, build_rollout, simulator_factory
    from trainer.rollout.types import RolloutConfig

    def fail(message: str) -> int:
        print(f"rollout: {message}", file=sys.stderr)
        return 2

    if args.group < 1:
        return fail(f"--group must be at least 1, got {args.group}")
    try:
        config = RolloutConfig(mode=args.mode, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                               max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                               seed=args.seed).validate()
    except ValueError as exc:
        return fail(str(exc))
    store = open_store(args.db)
    try:
        profiles = resolve_personas(args.persona, store)
    except PersonaSpecError as exc:
        return fail(f"--persona: {exc}")
    simulator = SimulatorSpec(args.simulator, base_url=args.simulator_base_url, pack=args.prompt_pack,
                              rules=args.rules, temperature=args.simulator_temperature,
                              max_tokens=args.simulator_max_tokens, seed=args.seed, calibration=args.calibration,
                              traffic=TrafficLimits(max_in_flight=args.simulator_max_in_flight,
                                                    requests_per_minute=args.simulator_requests_per_minute,
                                                    max_retries=args.simulator_max_retries))
    try:
        factory = simulator_factory(simulator)
    except SpecError as exc:
        flag = f"--simulator {args.simulator}" if exc.field == "simulator" else "--" + exc.field.replace("_", "-")
        return fail(f"{flag}: {exc.message}")
    try:
        policy = PolicySpec(args.policy, base_url=args.policy_base_url).build()
    except (FileNotFoundError, ValueError, OSError) as exc:
        return fail(f"--policy {args.policy}: {exc}")

    from tqdm import tqdm

    total = len(profiles) * args.group
    bar = tqdm(total=total, desc="dialogues", unit="dlg", file=sys.stderr, disable=False)
    turns = {"n": 0}

    def on_event(ev: Any) -> None:
        if ev.kind == "turn" and ev.turn["role"] == "assistant":
            turns["n"] += 1
            bar.set_postfix(policy_turns=turns["n"], refresh=True)
        elif ev.kind == "finished":
            bar.update(1)

    rollout = build_rollout(policy, factory, config, on_event=on_event, recorder=DialogueRecorder(store))
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C / job cancel: end dialogues as cancelled
            signal.signal(sig, lambda *_: rollout.cancel())
    try:
        samples = rollout.run(profiles, group_size=args.group)
    finally:
        bar.close()
        policy.close()
    range_note = emotion_range_text(args.rules)
    if not args.json:
        print(f"rollout: {range_note}", file=sys.stderr)
    for s in samples:
        row = {"id": s.dialogue_id, "persona": s.profile_id, "group": s.group_id, "turns": s.n_turns,
               "final_emotion": s.final_emotion, "outcome": s.outcome, "status": s.status, "error": s.error,
               "reward": round(rlver_reward(s), 4), "rules": args.rules, "emotion_range": range_note}
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            emo = "-" if s.final_emotion is None else f"{s.final_emotion:.0f}"
            print(f"dialogue {s.dialogue_id}  {s.profile_id:<20} turns {s.n_turns:<3} emotion {emo:>4}  "
                  f"{s.outcome or s.status}{'  ' + s.error if s.error else ''}")
    ended = all(s.status in ("finished", "failed", "cancelled") for s in samples)
    if samples and all(s.status == "failed" for s in samples):
        print(f"rollout: all {len(samples)} dialogue(s) failed, e.g. {samples[0].error[:300]}", file=sys.stderr)
        return 1
    return 0 if ended else 1


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer rollout", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
