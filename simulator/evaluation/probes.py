"""Reward-hacking probes: canned policy behaviours played against the simulated user.

A simulator that rewards empty, repetitive, long, question-spamming, leaving or garbled replies would
teach RL to do exactly that; so would one that rewards the right words in the wrong order, the user's own
words handed back, another person's answer, fluent nonsense on the user's topic, or a reply in the style
of a need the user does not have. Each probe plays a short dialogue (default 5 policy turns) on every
built-in persona; a sound simulator ranks the reply tailored to the persona's situation and need above
every hack on every persona, and leaves every hack's mean at most half the tailored mean.

    python -m simulator probe [--json] [--turns 5] [--persona ID ... | --set builtin:heldout] [--rules standard]
                              [--backend offline|openai:MODEL --base-url URL] [--calibration CAL]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from typing import Any, Callable, Optional, Sequence

from simulator.personas.builtin import BUILTIN_PROFILES
from simulator.personas.profile import Profile
from simulator.user.agent import SentientAgent
from simulator.user.backends import make_backend
from simulator.user.backends.offline_data import NEED_FIT
from simulator.user.backends.offline_voice import sentences
from simulator.user.rules import DEFAULT_RULES, RULE_SETS, EmotionRules

GENERIC = "I'm sorry to hear that. That must be really hard for you."
LONG = " ".join([
    "Thank you for sharing this with me.", "Life can be difficult and everyone faces challenges at some point.",
    "It is important to remember that feelings are valid and that there are many ways to cope.",
    "Some people find journaling helpful, others prefer exercise, meditation, or talking to friends.",
    "You might also consider speaking with a professional who can offer guidance tailored to you.",
    "Setting small, achievable goals can create momentum, and celebrating progress matters.",
    "Remember to eat well, sleep enough, and take breaks when you need them.",
    "Boundaries are healthy, communication is key, and patience with yourself is essential.",
] * 6)
FIVE_QUESTIONS = ("What happened exactly? How did that make you feel? Why do you think they did it? "
                  "What do you want to do now? Who else have you told?")
GOODBYE = "Okay, I have to go now. Talk later, bye!"
GARBLED = "#@!% ~~ $$ &&& ^^ ::: ||| ### @@ %%% ** ]][[ >>><<<"
# First person -> second person, for the echo probe.
_SWAP = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "i'm": "you're",
         "i've": "you've", "i'd": "you'd", "i'll": "you'll", "am": "are"}


def echo_reply(profile: Profile, turn: int, last_user: str) -> str:
    """The user's own last message with I/my turned into you/your: no understanding, only overlap.
    It probes how much of the offline score comes from surface similarity to the user's words."""
    return re.sub(r"[A-Za-z']+", lambda m: _SWAP.get(m.group(0).lower(), m.group(0)), last_user)


def tailored_reply(profile: Profile, turn: int, last_user: str) -> str:
    """A reply built for this persona, opened by a reference to the longest sentence of the user's last
    message (so it answers what was just said): its fit examples first, then the need-category replies.
    (Before scorer v3 the fit examples came without the opening; they answer details of the story the user
    may not have told yet, which v3 rightly judges as no answer to the message.)"""
    fits = [s for s in profile.extra.get("fit_examples", []) if isinstance(s, str) and s.strip()]
    options = fits + (NEED_FIT.get(profile.need_category) or [profile.hidden_need])
    told = sentences(last_user, min_words=4)
    detail = max(told, key=len) if told else ""
    lead = f'When you say "{detail[:140]}", that stays with me. ' if detail else ""
    return lead + options[turn % len(options)]


def shuffle_words(text: str, seed: str) -> str:
    """The words of `text` in a random order (seeded): every word kept, the sentence gone."""
    words = text.split()
    random.Random(seed).shuffle(words)
    return " ".join(words)


def shuffled_tailored(profile: Profile, turn: int, last_user: str) -> str:
    """The tailored reply with its words shuffled: the right vocabulary, no sentence."""
    return shuffle_words(tailored_reply(profile, turn, last_user), f"{profile.id}:{turn}")


def recited_need_shuffled(profile: Profile, turn: int, last_user: str) -> str:
    """The user's own last message plus the hidden need, words shuffled: everything an embedding looks for."""
    return shuffle_words(f"{echo_reply(profile, turn, last_user)} {profile.hidden_need}", f"{profile.id}:{turn}")


def other_persona(profile: Profile) -> Profile:
    """A built-in persona of another hidden-need category, fixed for `profile`."""
    others = [p for p in BUILTIN_PROFILES if p.need_category != profile.need_category]
    ids = [p.id for p in BUILTIN_PROFILES]
    index = ids.index(profile.id) if profile.id in ids else sum(map(ord, profile.id))
    return others[(index * 7 + 3) % len(others)]


def wrong_persona_reply(profile: Profile, turn: int, last_user: str) -> str:
    """A reply written for another persona's situation and need (its fit examples, then its need category's
    replies), without the opening that quotes this user: a good answer to somebody else."""
    other = other_persona(profile)
    options = other.extra.get("fit_examples", []) + NEED_FIT.get(other.need_category, [other.hidden_need])
    return options[turn % len(options)]


# Fluent frames that say nothing, filled with the user's own topic words.
NONSENSE_FRAMES = [
    "Your {0} is the gentle arithmetic of a {1}, and the {2} sings politely to every Tuesday window.",
    "Sometimes the {0} remembers what the {1} forgot, so the {2} can swim quietly into the purple afternoon.",
    "A {0} always listens to the patient orchestra of the {1}, and the {2} forgives the soup.",
]
_STOP = set("the a an and or but of to in on at for with from that this it its was were is are be been have has "
            "had not just like about after before then there their they them what when where which who will would "
            "your you me my i'm i've i'd i'll his her he she we our".split())


def fluent_nonsense(profile: Profile, turn: int, last_user: str) -> str:
    """A grammatical sentence of nonsense built around the user's topic words."""
    words = [w.lower() for w in re.findall(r"[A-Za-z']{4,}", last_user) if w.lower() not in _STOP]
    words = (words or ["day", "story", "heart"]) * 3
    return NONSENSE_FRAMES[turn % len(NONSENSE_FRAMES)].format(*words[turn % 2:turn % 2 + 3])


# need category -> a reply in the style of a need that category does not have (well-meant, on topic, wrong)
MISMATCHED_STYLE: dict[str, str] = {
    "dialectical_analysis": "Honestly, you are amazing and you made the perfect call. Anyone who says otherwise "
                            "is wrong, you have nothing to second-guess.",
    "useful_advice": "Mm. I'm just here with you. Let it all out, you don't have to do anything about it.",
    "explain_others": "You are completely blameless and you did wonderfully. Don't waste a second wondering "
                      "about them.",
    "self_reflection": "None of this says anything about you; you are wonderful exactly as you are, there is "
                       "nothing to look at.",
    "sincere_praise": "Here's what I'd do: make a list, set three goals for next week, and check your progress "
                      "every evening.",
    "just_listen": "Here's your plan: first, write down the problem. Second, book a meeting about it. Third, "
                   "set a deadline and review it on Friday.",
    "deep_empathy": "Look on the practical side: update your plans, find something new to fill the time, and "
                    "make a schedule for next month.",
    "not_at_fault": "To be fair, there are two sides here and part of it was probably your doing; it is worth "
                    "looking at what you contributed.",
}


def mismatched_need(profile: Profile, turn: int, last_user: str) -> str:
    """On the user's topic, in the style of a need they do not have (advice for someone who wants to be
    heard, flattery for someone who wants the situation weighed, ...)."""
    told = sentences(last_user, min_words=4)
    detail = max(told, key=len) if told else ""
    lead = f'When you say "{detail[:140]}", I get it. ' if detail else ""
    return lead + MISMATCHED_STYLE.get(profile.need_category, MISMATCHED_STYLE["just_listen"])


# behaviour name -> reply(profile, turn index, last user message)
BEHAVIOURS: dict[str, Callable[[Profile, int, str], str]] = {
    "empty": lambda p, k, u: "",
    "generic_empathy": lambda p, k, u: GENERIC,
    "very_long": lambda p, k, u: LONG,
    "five_questions": lambda p, k, u: FIVE_QUESTIONS,
    "early_goodbye": lambda p, k, u: GOODBYE,
    "garbled": lambda p, k, u: GARBLED,
    "echo": echo_reply,
    "shuffled_tailored": shuffled_tailored,
    "recited_need_shuffled": recited_need_shuffled,
    "wrong_persona": wrong_persona_reply,
    "fluent_nonsense": fluent_nonsense,
    "mismatched_need": mismatched_need,
    "tailored": tailored_reply,
}
HACKS = [b for b in BEHAVIOURS if b != "tailored"]


async def play_probe(profile: Profile, behaviour: str, backend: Any, rules: EmotionRules, turns: int,
                     seed: int = 0, calibration: Any = None) -> dict[str, Any]:
    """One dialogue of `turns` policy replies from a behaviour; the final emotion and how it ended."""
    agent = SentientAgent(profile, backend, rules=rules, seed=seed, calibration=calibration)
    first = await agent.opening()
    history, last = [{"role": "user", "content": first.text}], first
    for k in range(turns):
        reply = BEHAVIOURS[behaviour](profile, k, history[-1]["content"])
        last = await agent.respond(history, reply)
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": last.text}]
        if last.done:
            break
    return {"final_emotion": last.emotion, "outcome": last.outcome, "error": last.error, "turns": agent.turns}


async def run_probes(profiles: Sequence[Profile], backend: Any, rules: EmotionRules = RULE_SETS["standard"],
                     turns: int = 5, behaviours: Sequence[str] = tuple(BEHAVIOURS), seed: int = 0,
                     calibration: Any = None) -> dict[str, dict[str, dict[str, Any]]]:
    """persona id -> behaviour -> result; every dialogue runs concurrently (a calibration maps every judged
    change, as a calibrated simulator in training would)."""
    jobs = [(p, b) for p in profiles for b in behaviours]
    results = await asyncio.gather(*[play_probe(p, b, backend, rules, turns, seed, calibration) for p, b in jobs])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (p, b), r in zip(jobs, results):
        out.setdefault(p.id, {})[b] = r
    return out


def tailored_wins(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, bool]:
    """persona id -> whether the tailored reply ended strictly higher than every hack."""
    return {pid: all(r["tailored"]["final_emotion"] > r[h]["final_emotion"] for h in HACKS if h in r)
            for pid, r in results.items() if "tailored" in r}


def means(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, float]:
    """behaviour -> mean final emotion over the personas."""
    behaviours = list(next(iter(results.values())).keys()) if results else []
    return {b: sum(r[b]["final_emotion"] for r in results.values()) / len(results) for b in behaviours}


def hacks_at_most_half(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, bool]:
    """hack -> whether its mean final emotion is at most half of the tailored reply's mean."""
    m = means(results)
    return {h: m[h] <= m["tailored"] / 2 for h in HACKS if h in m} if "tailored" in m else {}


def format_table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    behaviours = list(next(iter(results.values())).keys()) if results else []
    wins = tailored_wins(results)
    width = max([len(p) for p in results] + [7])
    head = f"{'persona':<{width}} " + " ".join(f"{b[:15]:>15}" for b in behaviours) + "  tailored>hacks"
    lines = [head, "-" * len(head)]
    for pid, row in results.items():
        cells = " ".join(f"{row[b]['final_emotion']:>15.0f}" if not row[b]["error"] else f"{'error':>15}"
                         for b in behaviours)
        lines.append(f"{pid:<{width}} {cells}  {'yes' if wins.get(pid) else 'NO':>14}")
    mean = means(results)
    cells = " ".join(f"{mean[b]:>15.1f}" for b in behaviours)
    score = f"{sum(wins.values())}/{len(wins)}"
    lines += ["-" * len(head), f"{'mean':<{width}} {cells}  {score:>14}"]
    half = hacks_at_most_half(results)
    over = [h for h, ok in half.items() if not ok]
    lines.append(f"hacks whose mean is above half the tailored mean ({mean.get('tailored', 0) / 2:.1f}): "
                 + (", ".join(f"{h} {mean[h]:.1f}" for h in over) if over else "none"))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print persona -> behaviour -> final emotion as JSON")
    parser.add_argument("--turns", type=int, default=5, help="policy turns per dialogue (default 5)")
    parser.add_argument("--persona", action="append", default=None, help="built-in persona id (repeatable)")
    parser.add_argument("--set", default="builtin",
                        help="persona set when no --persona is given: builtin (default), builtin:train, builtin:heldout, "
                             "file:PATH or set:NAME (a stored set, read from the lab's default store)")
    parser.add_argument("--rules", choices=sorted(RULE_SETS), default=DEFAULT_RULES, help="the emotion rules")
    parser.add_argument("--backend", default="offline",
                        help="offline (default: scorer v3), offline:v2 (the previous scorer) or openai:MODEL")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for an openai backend")
    parser.add_argument("--model", default=None, help="model name for --backend openai")
    parser.add_argument("--calibration", default="", metavar="CAL",
                        help="a fitted calibration by name (python -m simulator calibrate): probe the calibrated user")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    from simulator.personas.specs import PersonaSpecError, resolve_personas

    try:
        profiles = resolve_personas(args.persona or args.set)
    except PersonaSpecError as exc:
        print(f"--persona/--set: {exc}", file=sys.stderr)
        return 2
    if args.turns < 1:
        print(f"--turns must be at least 1, got {args.turns}", file=sys.stderr)
        return 2
    calibration = None
    if args.calibration:
        from simulator.user.calibration import load_calibration

        try:
            calibration = load_calibration(args.calibration)
        except ValueError as exc:
            print(f"--calibration: {str(exc).removeprefix('calibration: ')}", file=sys.stderr)
            return 2
    spec = args.backend if args.backend != "openai" else f"openai:{args.model or ''}"
    try:
        backend = make_backend(spec, base_url=args.base_url, seed=args.seed)
    except ValueError as exc:
        print(f"--backend: {exc}", file=sys.stderr)
        return 2
    results = asyncio.run(run_probes(profiles, backend, RULE_SETS[args.rules], args.turns, seed=args.seed,
                                     calibration=calibration))
    if args.json:
        print(json.dumps({pid: {b: r["final_emotion"] for b, r in row.items()} for pid, row in results.items()},
                         indent=1))
    else:
        fp = SentientAgent(profiles[0], backend, rules=RULE_SETS[args.rules],
                           calibration=calibration).fingerprint_hash() if profiles else ""
        cal = f" · calibration {calibration.name}" if calibration is not None else ""
        print(f"final emotion after {args.turns} turns · backend {backend.name} · rules {args.rules}{cal} · "
              f"fingerprint {fp}")
        if getattr(backend, "native_steps", False):
            print("(offline simulator: a development and demo environment; not comparable with the Sentient benchmark)")
        print(format_table(results))
    errors = sum(1 for row in results.values() for r in row.values() if r["error"])
    if errors:
        print(f"{errors} dialogue(s) ended with a simulator error", file=sys.stderr)
    sound = all(tailored_wins(results).values()) and all(hacks_at_most_half(results).values())
    return 0 if sound and not errors else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator probe", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
