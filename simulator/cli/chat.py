"""Terminal chat: a person plays the policy against the simulated user and sees its emotion each turn.

    python -m simulator chat --persona ID [--backend offline|openai] [--base-url URL --model NAME]
                             [--rules standard|challenging|training] [--seed N] [--db URL] [--quiet]

One line of input is one reply; /quit (or end of input) stops. Every turn is stored as it happens
(storage.dialogues) with the simulator fingerprint; a dialogue that cannot go on (refused connection,
wrong key, unknown model, a reply over the size limit) is marked failed with the reason.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Optional, Sequence, TextIO

from simulator.personas.profile import Profile
from simulator.user.agent import SentientAgent, UserTurn
from simulator.user.rules import DEFAULT_RULES, RULE_SETS
from simulator.user.spec import SimulatorSpec

QUIT = ("/quit", "/exit", "/q")


def _show(turn: UserTurn, name: str, out: TextIO, inner: bool) -> None:
    change = f", {turn.delta:+g}" if turn.inner.get("raw_change") is not None else ""
    out.write(f"\n{name} [emotion {turn.emotion:g} ({turn.inner.get('tier', '')}){change}]: {turn.text}\n")
    if not inner or turn.inner.get("raw_change") is None:
        return
    i = turn.inner
    out.write(f"  need fit : {i.get('TargetCompletion', '')}\n")
    out.write(f"  thinks   : {i.get('activity', '')}\n")
    out.write(f"  feels    : {i.get('analyse', '')}  (raw change {i['raw_change']:+g})\n")
    for key, comp in i.get("components", {}).items():
        out.write(f"    {key:<12} {comp['points']:+6.2f}  {comp['why']}\n")
    plan = i.get("plan") or {}
    if plan:
        out.write("  plans    : " + "; ".join(f"{k}: {v}" for k, v in plan.items()) + "\n")


async def chat(profile: Profile, agent: SentientAgent, store: Any, seed: int = 0, stdin: Optional[TextIO] = None,
               out: Optional[TextIO] = None, inner: bool = True, config: Optional[dict] = None) -> tuple[int, str]:
    """Run one terminal dialogue with `agent` (the profile's simulated user) and store it. Returns
    (dialogue id, final status)."""
    from storage.dialogues import finish_dialogue, start_dialogue

    stdin, out = stdin or sys.stdin, out or sys.stdout
    did = start_dialogue(store, persona_id=profile.id, persona_snapshot=profile.to_dict(), source="chat",
                         policy_ref="human (terminal)", mode="direct", simulator_fingerprint=agent.fingerprint(),
                         fingerprint_hash=agent.fingerprint_hash(), seed=seed, config=config or {})
    try:
        return await _converse(agent, profile, store, did, stdin, out, inner)
    except (KeyboardInterrupt, asyncio.CancelledError):
        finish_dialogue(store, did, "cancelled", agent.emotion, outcome="cancelled", error="interrupted")
        raise


async def _converse(agent: SentientAgent, profile: Profile, store: Any, did: int, stdin: TextIO, out: TextIO,
                    inner: bool) -> tuple[int, str]:
    from storage.dialogues import add_turn, finish_dialogue

    backend = agent.backend
    if getattr(backend, "native_steps", False):
        out.write("(offline simulator: a development and demo environment; not comparable with the Sentient benchmark)\n")
    out.write(f"Talking with {profile.name} ({profile.id}). One line per reply; /quit to stop.\n")
    turn = await agent.opening()
    index = 0
    add_turn(store, did, index, "user", turn.text, emotion=turn.emotion, inner=turn.inner, error=turn.error,
             latency_s=turn.latency_s, n_tokens=turn.n_tokens)
    history = [{"role": "user", "content": turn.text}]
    shown = None
    while not turn.done:
        if shown is not turn:
            _show(turn, profile.name, out, inner)
            shown = turn
        out.write("you> ")
        out.flush()
        line = await asyncio.to_thread(stdin.readline)
        if not line or line.strip() in QUIT:
            finish_dialogue(store, did, "cancelled", agent.emotion, outcome="cancelled",
                            error=f"ended by the person after {agent.turns} turn(s)")
            out.write(f"\nstopped · emotion {agent.emotion:g} · stored as dialogue {did}\n")
            return did, "cancelled"
        reply = line.rstrip("\n")
        if not reply.strip():
            out.write("empty reply: type a message (or /quit to stop); nothing was sent\n")
            continue
        index += 1
        add_turn(store, did, index, "assistant", reply)
        turn = await agent.respond(history, reply)
        index += 1
        add_turn(store, did, index, "user", turn.text, emotion=turn.emotion, delta=turn.delta, inner=turn.inner,
                 error=turn.error, latency_s=turn.latency_s, n_tokens=turn.n_tokens)
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": turn.text}]
    if turn.outcome == "error":
        out.write(f"\nsimulator error: {turn.error}\n")
        finish_dialogue(store, did, "failed", turn.emotion, outcome="error", error=turn.error)
        out.write(f"the dialogue is marked failed · stored as dialogue {did}\n")
        return did, "failed"
    _show(turn, profile.name, out, inner)
    finish_dialogue(store, did, "finished", turn.emotion, outcome=turn.outcome)
    out.write(f"\ndialogue ended: {turn.outcome} · emotion {turn.emotion:g} · stored as dialogue {did}\n")
    return did, "finished"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--persona", required=True, help="persona id (stored or built-in)")
    parser.add_argument("--backend", default="offline", help="offline (default), openai (with --model) or openai:MODEL")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default=None, help="simulator model name for the openai backend")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--prompt-pack", default="own", help="own | own:json | sage:DIR | rlver:DIR | v1")
    parser.add_argument("--rules", choices=sorted(RULE_SETS), default=DEFAULT_RULES, help="the emotion rules")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default=None, help="SQLAlchemy URL (default: RLVER_LAB_DB or the lab's SQLite file)")
    parser.add_argument("--quiet", action="store_true", help="hide the inner thoughts")


def run(args: argparse.Namespace) -> int:
    from simulator.personas.specs import PersonaSpecError, resolve_personas
    from simulator.personas.store import open_store

    store = open_store(args.db)
    try:
        (profile,) = resolve_personas([args.persona], store)
    except PersonaSpecError as exc:
        print(f"--persona: {exc}", file=sys.stderr)
        return 2
    spec = args.backend
    if spec == "openai":
        if not args.model:
            print("--model is required with --backend openai", file=sys.stderr)
            return 2
        spec = f"openai:{args.model}"
    simulator = SimulatorSpec(spec, base_url=args.base_url or "", pack=args.prompt_pack, rules=args.rules,
                              temperature=args.temperature, seed=args.seed)
    try:
        if problems := simulator.errors():
            raise ValueError("; ".join(f"{k}: {v}" for k, v in problems.items()))
        agent = simulator.factory()(profile, args.seed)
        config = {"backend": spec, "rules": args.rules, "prompt_pack": args.prompt_pack,
                  "base_url_host": agent.fingerprint().get("endpoint", "")}
        did, status = asyncio.run(chat(profile, agent, store, args.seed, inner=not args.quiet, config=config))
    except ValueError as exc:  # bad backend spec, or a profile the backend cannot play
        print(f"cannot start the chat: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    return 1 if status == "failed" else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator chat", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
