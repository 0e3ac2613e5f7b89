"""Play the user: a person talks to a policy as a persona (or as themselves), setting their own emotion.

The dialogue is stored like any other (source "human", the player's name in its config). The person writes
the opening; after each policy reply they write their answer and set their emotion (0-100, the Sentient
rules' bands) with what they thought. Only then is the shadow judgement computed and stored: what the chosen
simulated user would have felt given the same history and reply, starting from the person's emotion before
it (a fresh simulated user per turn, so a native backend's story memory starts empty). It is never shown
before the person answered. The dialogue ends as the rules say (>= 100 success, below 10 failure, an end
word, or the reply cap), or when the person ends it.
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from simulator.llm.hashing import fingerprint_hash
from simulator.personas.profile import NEED_CATEGORIES, Profile
from simulator.user.rules import DEFAULT_RULES, RULE_SETS, says_goodbye, tier
from simulator.user.spec import SimulatorSpec
from storage import code_version, dialogues
from storage.ratings import add_shadow
from trainer.policies.base import SamplingConfig
from trainer.policies.spec import PolicySpec
from trainer.rollout.build import SpecError, policy_engine, simulator_factory
from trainer.rollout.templates import system_prompt, visible_reply

YOURSELF = "yourself"
BANDS = "100 = fully satisfied (ends, success) · 70+ A · 40+ B (start 40) · 10+ C · below 10 ends (failure)"
PLAYER_ENDED = "player_ended"  # the outcome when the person presses End
ENDINGS = {PLAYER_ENDED: "you ended it", "success": "your emotion reached 100 (success)",
           "failure": "your emotion fell below the floor (failure)", "goodbye": "you said goodbye",
           "max_turns": "the policy used its last reply", "error": "the policy failed"}
_ENGINES: dict[tuple[str, str], Any] = {}  # policies loaded for play, by (spec, base URL): one kept at a time
_ENGINES_LOCK = threading.Lock()
_GENERATE_LOCK = threading.Lock()
_OPEN: dict[str, tuple[Any, "PlayState"]] = {}  # page session -> (store, its dialogue in progress)


@dataclass
class PlayState:
    """One person's dialogue in progress (kept in the page's session)."""

    dialogue_id: int
    profile: Profile
    policy: str
    policy_url: str
    simulator: dict[str, Any]  # SimulatorSpec fields of the shadow judge
    player: str
    max_turns: int
    max_new_tokens: int
    seed: int = 0
    messages: list[dict] = field(default_factory=list)  # the visible dialogue
    emotion: float = 40.0  # the person's current emotion
    replies: int = 0
    ended: str = ""  # the outcome once ended


def yourself_profile(player: str, about: str, need: str, need_category: str) -> Profile:
    """A profile for a person playing themselves: what they say about themselves and what they hope for."""
    name = player or "player"
    return Profile(id=f"self-{''.join(c if c.isalnum() else '-' for c in name.lower())[:40]}", name=name,
                   persona=about.strip() or f"{name}, playing themselves.",
                   background=about.strip() or "Not told.", hidden_need=need.strip() or "Not told.",
                   need_category=need_category if need_category in NEED_CATEGORIES else "deep_empathy",
                   personality="passive", traits=[], language="en", source="user").validate()


def check_emotion(value: Any, last: float | None = None) -> float:
    """The person's emotion: a number in [0, 100] (ValueError naming the field otherwise). An empty box is
    refused, never read as 0: the person says how they feel after each reply (`last` is named as a reminder)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        was = f"; after your last turn it was {last:g}" if last is not None else ""
        raise ValueError(f"emotion: set 'Your emotion now' (0-100) before sending{was}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"emotion: must be a number from 0 to 100, got {value!r}") from None
    if not 0 <= number <= 100:
        raise ValueError(f"emotion: must lie between 0 and 100, got {value!r}")
    return number


def _engine(policy: str, policy_url: str) -> Any:
    key = (policy.strip(), policy_url.strip())
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            for old in list(_ENGINES):
                _ENGINES.pop(old).close()
            _ENGINES[key] = policy_engine(PolicySpec(key[0], base_url=key[1]))
        return _ENGINES[key]


def reply_key(state: PlayState) -> str:
    """The key a reply in progress is shown under (the engine's token listener hears it with this key)."""
    return f"play-{state.dialogue_id}"


def decoder(policy: str, policy_url: str = "") -> Callable[[list[int]], str]:
    """The policy's decode (tokens so far -> text), for showing a reply as it is written."""
    engine = _engine(policy, policy_url)
    return engine.decode if getattr(engine, "tokenizer", None) is not None else (lambda ids: "")


def _policy_reply(store: Any, state: PlayState, listener: Optional[Callable] = None) -> None:
    """Ask the policy for its next reply and store it; `listener` (an engine token listener) hears its tokens
    as they are sampled (engines that sample elsewhere, an API, call it never)."""
    engine = _engine(state.policy, state.policy_url)
    system = {"role": "system", "content": system_prompt("direct", state.profile.language)}
    params = SamplingConfig(temperature=1.0, max_new_tokens=int(state.max_new_tokens)).validate()
    with _GENERATE_LOCK:  # one reply at a time on a shared engine: its listener and keys are this reply's
        engine.token_listener, engine.batch_keys = listener, [reply_key(state)] if listener else None
        try:
            g = engine.generate([[system, *state.messages]], params, seeds=[state.seed * 7919 + state.replies])[0]
        finally:
            engine.token_listener, engine.batch_keys = None, None
    if g.finish_reason == "error":
        raise RuntimeError(f"the policy failed: {g.error}")
    _, reply, _ = visible_reply(g.text, "direct")
    state.replies += 1
    # a reply ended by its cap is a note, worded as the rollout words it (app.render.CUT_PREFIX), not an error
    problem = "" if g.finish_reason == "stop" else f"reply cut at {len(g.token_ids)} tokens (no end of turn)" \
        if g.finish_reason == "length" else g.finish_reason
    dialogues.add_turn(store, state.dialogue_id, len(state.messages), "assistant", reply,
                       n_tokens=len(g.token_ids), error=problem)
    state.messages.append({"role": "assistant", "content": reply})


def start_play(store: Any, profile: Profile, opening: str, player: str, policy: str, policy_url: str = "",
               simulator: str = "offline", simulator_url: str = "", pack: str = "own", rules: str = DEFAULT_RULES,
               max_turns: int = 10, max_new_tokens: int = 96, seed: int = 0, listener: Optional[Callable] = None,
               session: str = "") -> PlayState:
    """Store the dialogue and the person's opening, then get the policy's first reply. ValueError (or
    SpecError) naming the field on bad input; nothing is stored then."""
    if not (opening or "").strip():
        raise ValueError("message: write your opening message first")
    if rules not in RULE_SETS:
        raise ValueError(f"rules: unknown emotion rules {rules!r}; one of {', '.join(RULE_SETS)}")
    if not (policy or "").strip():
        raise ValueError("policy: required (default, a model or checkpoint folder, openai:MODEL)")
    from simulator.access import current_access

    for name, value in (("max_turns", max_turns), ("max_new_tokens", max_new_tokens)):
        if problem := current_access().bound_error(name, value):
            raise ValueError(f"{name}: {problem}")
    sim = {"spec": (simulator or "offline").strip(), "base_url": (simulator_url or "").strip(),
           "pack": (pack or "own").strip(), "rules": rules, "seed": int(seed)}
    factory = simulator_factory(SimulatorSpec(**sim))
    shadow_fp = factory(profile, int(seed)).fingerprint()
    _engine(policy, policy_url)  # load (or refuse) the policy before anything is stored
    start = float(RULE_SETS[rules].start)
    fp = {"backend": "human", "player": player or "anonymous player"}
    dialogue_id = dialogues.start_dialogue(
        store, persona_id=profile.id, persona_snapshot=profile.to_dict(), source="human", policy_ref=policy.strip(),
        mode="direct", simulator_fingerprint=fp, fingerprint_hash=fingerprint_hash(fp), seed=int(seed),
        config={"player": player or "", "policy": {"spec": policy.strip(), "base_url": policy_url.strip()},
                "shadow": {**sim, "fingerprint": shadow_fp}, "max_turns": int(max_turns)})
    dialogues.add_turn(store, dialogue_id, 0, "user", opening.strip(), emotion=start, delta=0.0,
                       inner={"tier": tier(start), "human": True})
    state = PlayState(dialogue_id, profile, policy.strip(), policy_url.strip(), sim, player or "", int(max_turns),
                      int(max_new_tokens), int(seed), [{"role": "user", "content": opening.strip()}], start)
    if session:
        abandon(session)  # a dialogue this page left unfinished for a new one ends as abandoned
        _OPEN[session] = (store, state)
    _policy_reply(store, state, listener)
    return state


def shadow_judgement(store: Any, state: PlayState, turn_index: int, before: float) -> dict[str, Any]:
    """What the simulator would have felt at the person's turn `turn_index` (the last reply, the history
    before it, from the person's emotion `before`); stored and returned."""
    agent = simulator_factory(SimulatorSpec(**state.simulator))(state.profile, state.seed)
    agent.emotion, agent.turns = before, state.replies - 1
    history, reply = state.messages[:turn_index - 1], state.messages[turn_index - 1]["content"]
    fp = agent.fingerprint()
    try:
        ut = asyncio.run(agent.respond(history, reply))
        row = {"delta": None if ut.error else ut.delta, "emotion": None if ut.error else ut.emotion,
               "inner": ut.inner or {}, "reply_text": ut.text or "", "error": ut.error or ""}
    except Exception as exc:  # recorded beside the turn; the person's dialogue goes on
        row = {"delta": None, "emotion": None, "inner": {}, "reply_text": "", "error": f"{type(exc).__name__}: {exc}"}
    add_shadow(store, dialogue_id=state.dialogue_id, turn_index=turn_index, fingerprint=fp,
               fingerprint_hash=fingerprint_hash(fp), emotion_before=before, code_version=code_version(),
               **row)
    return row


def end_without_answer(store: Any, state: PlayState) -> None:
    """End the dialogue here, at the person's last emotion, storing no turn."""
    state.ended = PLAYER_ENDED
    dialogues.finish_dialogue(store, state.dialogue_id, "finished", state.emotion, outcome=PLAYER_ENDED)


def answer(store: Any, state: PlayState, message: str, emotion: Any, thoughts: str = "", end: bool = False,
           listener: Optional[Callable] = None) -> dict[str, Any]:
    """The person's answer to the last reply: stored with their emotion and thoughts, then the shadow
    judgement, then (unless the dialogue ended) the policy's next reply. Returns the shadow judgement ({} when
    End came with no answer: nothing is stored but the ending, at the last emotion). An empty or bad emotion
    or an empty message raises ValueError before anything is stored."""
    if state.ended:
        raise ValueError(f"dialogue: this dialogue already ended ({ENDINGS.get(state.ended, state.ended)}); "
                         "start a new one")
    said = (message or "").strip()
    if end and not said:
        if emotion not in (None, "") and check_emotion(emotion) != state.emotion:
            raise ValueError(f"message: an emotion is stored with an answer; write one, or empty 'Your emotion "
                             f"now' to end at your last emotion ({state.emotion:g})")
        end_without_answer(store, state)
        return {}
    value = check_emotion(emotion, state.emotion)
    if not said:
        raise ValueError("message: write your answer (or press End to stop here)")
    index, before = len(state.messages), state.emotion
    dialogues.add_turn(store, state.dialogue_id, index, "user", said, emotion=value,
                       delta=value - before, inner={"tier": tier(value), "thoughts": (thoughts or "").strip(),
                                                    "human": True})
    state.messages.append({"role": "user", "content": said})
    state.emotion = value
    shadow = shadow_judgement(store, state, index, before)
    rules = RULE_SETS[state.simulator["rules"]]
    outcome = PLAYER_ENDED if end else rules.end_outcome(value, state.replies) \
        if state.replies < state.max_turns else "max_turns"
    if not outcome and says_goodbye(said):
        outcome = "goodbye"
    if not outcome:
        try:
            _policy_reply(store, state, listener)
        except (RuntimeError, SpecError, ValueError) as exc:
            outcome, shadow = "error", {**shadow, "policy_error": str(exc)}
    if outcome:
        state.ended = outcome
        dialogues.finish_dialogue(store, state.dialogue_id, "failed" if outcome == "error" else "finished", value,
                                  outcome=outcome, error=shadow.get("policy_error", ""))
    return shadow


def abandon(session: str) -> None:
    """A closed (or reloaded) page ends its dialogue: kept, as abandoned at the person's last emotion (a reply
    being written still lands, then nothing more)."""
    store, state = _OPEN.pop(session, (None, None))
    if state is None or state.ended:
        return
    state.ended = "abandoned"
    dialogues.finish_dialogue(store, state.dialogue_id, "cancelled", state.emotion, outcome="abandoned")


def ending_text(state: PlayState) -> str:
    """'Dialogue ended: you ended it, at emotion 55.' for an ended dialogue ('' while it goes on)."""
    if not state.ended:
        return ""
    why = ENDINGS.get(state.ended, state.ended)
    return f"Dialogue ended: {why}, at emotion {state.emotion:g}."


def release_policies() -> None:
    """Close the policies kept for play (tests, shutdown)."""
    with _ENGINES_LOCK:
        for key in list(_ENGINES):
            _ENGINES.pop(key).close()


def shadow_emotions(store: Any, dialogue: dict[str, Any]) -> list[float | None]:
    """The shadow judge's curve of a human-played dialogue (a dict with its turns), aligned with the person's:
    the opening's emotion, then the simulator's emotion at each of the person's turns (None where it failed).
    [] for other dialogues."""
    if dialogue.get("source") != "human":
        return []
    from storage.ratings import shadows_of

    by_turn = {sh["turn_index"]: sh["emotion"] for sh in shadows_of(store, dialogue["id"])}
    users = [t for t in dialogue.get("turns", []) if t.get("role") == "user"]
    return [users[0].get("emotion") if users else None] + [by_turn.get(t["index"]) for t in users[1:]]
