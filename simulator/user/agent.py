"""The Sentient Agent (SAGE's simulated user): one per dialogue.

Each user turn after the opening is two steps:
  1. emotion step: what the partner meant, fit to the hidden need, inner activity, felt reaction and a
     signed change; the change goes through the EmotionRules (scaling, clamping, range);
  2. reply step: a plan (attitude, goal, tone, content) from the new tier and the analysis, then the
     user's next message.
With a chat backend (openai) the agent renders the versioned prompt templates and parses the answers,
retrying an unreadable answer with a repair prompt up to `max_repairs` times. With a native backend
(offline) the backend computes both steps itself. Any failure ends the turn with outcome "error" and the
reason; nothing is raised to the caller, so one broken dialogue never stops the others.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Protocol

from simulator.llm.client import BackendError
from simulator.llm.hashing import fingerprint_hash
from simulator.llm.prompting import fill
from simulator.llm.structured import ask_structured
from simulator.personas.profile import PERSONALITIES, Profile
from simulator.user.parsing import ParseError, parse_emotion, parse_reply
from simulator.user.rules import EmotionRules, says_goodbye, tier
from simulator.user.templates import DEFAULT_VERSION, load_templates, prompt_hash, split_messages

MAX_REPLY_CHARS = 20_000  # a policy reply longer than this is refused (the turn ends with an error)
HISTORY_CHARS = 12_000  # the dialogue shown to the simulator LLM keeps its most recent part


@dataclass
class UserTurn:
    text: str
    emotion: float
    delta: float = 0.0
    inner: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    outcome: str = ""  # "" | success | failure | goodbye | max_turns | error
    error: str = ""
    latency_s: float = 0.0
    n_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SimulatedUser(Protocol):
    """The simulated user of one dialogue, as the dialogue rollout drives it (SentientAgent is the lab's).

    Optional extras the rollout uses when present: `rules` (an EmotionRules; `rules.judges(n)` says whether
    the n-th reply gets a reaction) and `adopt_opening(other)` (continue from a group leader's opening)."""

    async def opening(self) -> UserTurn:
        """The first user message (no emotion step)."""

    async def respond(self, dialogue: list[dict], reply: str) -> UserTurn:
        """React to the policy's `reply` (think block removed); `dialogue` is the visible history before it.
        Failures come back as a UserTurn with outcome "error"; an exception fails only this dialogue."""

    def fingerprint(self) -> dict[str, Any]:
        """What produces this user's turns (backend, model, prompts, rules): stored with the dialogue."""


# Builds a dialogue's simulated user from its profile and seed.
SimulatorFactory = Callable[[Profile, int], SimulatedUser]


class SentientAgent:
    """Simulated user for one dialogue. `seed` makes native backends deterministic."""

    def __init__(self, profile: Profile, backend: Any, rules: EmotionRules = EmotionRules(), seed: int = 0,
                 prompt_version: str = DEFAULT_VERSION, max_repairs: int = 2, pack: Any = "own",
                 calibration: Any = None):
        """`pack`: the prompt pack of chat backends (simulator.user.packs): a pack object or its spec
        ("own", "sage:DIR"); "v1" or None = the earlier templates of `prompt_version`, rendered here.
        `calibration`: a simulator.user.calibration.Calibration mapping each judged change onto people's
        scale before the emotion rules (None: the judged change as it is)."""
        from simulator.user.packs import load_pack

        self.profile, self.backend, self.rules, self.seed = profile, backend, rules, seed
        self.calibration = calibration
        self.prompt_version, self.max_repairs = prompt_version, max_repairs
        self.pack = load_pack(pack) if isinstance(pack, str) else pack
        if hasattr(backend, "check_profile"):
            backend.check_profile(profile)
        self.templates = load_templates(profile.language, prompt_version)
        self.emotion = float(rules.start)
        self.turns = 0  # policy replies answered
        self.done = False
        self.outcome = ""
        self.state: dict[str, Any] = {"seed": seed, "turn": 0}  # scratch space of a native backend

    # ------------------------------------------------------------------ public API
    def fingerprint(self) -> dict[str, Any]:
        fp = dict(self.backend.fingerprint())
        if self.pack is not None and not self.backend.native_steps:
            fp["prompt_pack"] = self.pack.fingerprint()
        else:
            fp.update({"prompt_version": self.prompt_version, "prompt_hash": prompt_hash(self.prompt_version)})
        fp["rules"] = self.rules.to_dict()
        if self.calibration is not None:
            fp["calibration"] = self.calibration.fingerprint()
        return fp

    def fingerprint_hash(self) -> str:
        return fingerprint_hash(self.fingerprint())

    async def opening(self) -> UserTurn:
        """The first user message: the profile's first line, else generated (no emotion step)."""
        start = time.perf_counter()
        if self.profile.first_line.strip():
            return UserTurn(text=self.profile.first_line.strip(), emotion=self.emotion,
                            inner={"tier": tier(self.emotion), "planning": "", "scripted": True})
        try:
            if self.backend.native_steps:
                out, n_tok = await self.backend.opening(self.profile, self.rules, self.state), 0
                raw = ""
            elif self.pack is not None:
                msgs = self.pack.reply_messages(self._reference_profile(), self.emotion, [], None)
                out, raw, n_tok = await self._ask(msgs, self.pack.parse_reply, "", "reply")
            else:
                msgs = split_messages(fill(self.templates["opening"], self._common()))
                out, raw, n_tok = await self._ask(msgs, parse_reply, "str:opening_format")
        except (BackendError, ParseError, ValueError, RuntimeError) as exc:
            return self._fail(f"opening: {exc}", start)
        inner = {"tier": tier(self.emotion), "planning": out.get("planning", ""), "plan": out.get("plan", {})}
        if raw:
            inner["raw"] = {"opening": raw}
        return UserTurn(text=out["reply"], emotion=self.emotion, inner=inner,
                        latency_s=time.perf_counter() - start, n_tokens=n_tok)

    def adopt_opening(self, other: "SentientAgent") -> None:
        """Continue from `other`'s opening as its clone would (a group sharing one opening): its backend's
        scratch state (e.g. the story already told) is copied; this agent keeps its own seed."""
        self.state = {**copy.deepcopy(other.state), "seed": self.seed, "turn": self.turns}

    async def respond(self, dialogue: list[dict], reply: str) -> UserTurn:
        """React to the policy's `reply` (think block already removed). `dialogue` is the visible history
        before it; a trailing assistant message equal to `reply` is ignored."""
        start = time.perf_counter()
        if self.done:
            return self._fail(f"the dialogue already ended ({self.outcome})", start, keep_outcome=True)
        history = [m for m in dialogue if isinstance(m, dict)]
        if history and history[-1].get("role") == "assistant" and history[-1].get("content") == reply:
            history = history[:-1]
        reply = reply if isinstance(reply, str) else ""
        self.turns += 1
        self.state["turn"] = self.turns
        if len(reply) > MAX_REPLY_CHARS:
            return self._fail(f"policy reply is {len(reply)} characters; the limit is {MAX_REPLY_CHARS}", start)
        try:
            analysis, raw_e, tok_e = await self._emotion_step(history, reply)
            before = self.emotion
            change = analysis["change"]
            if self.calibration is not None:
                said = [m.get("content") or "" for m in history if m.get("role") == "user"]
                analysis["uncalibrated_change"] = change
                change, analysis["calibration"] = await self.calibration.calibrate(change, said, reply)
            self.emotion, delta = self.rules.apply(before, change)
            out, raw_r, tok_r = await self._reply_step(history, reply, analysis, delta)
        except (BackendError, ParseError) as exc:
            return self._fail(str(exc), start)
        except Exception as exc:  # a bug must not take the other dialogues down: record it on this one
            return self._fail(f"simulator error: {type(exc).__name__}: {exc}", start)
        outcome = self.rules.end_outcome(self.emotion, self.turns)
        if not outcome and self.rules.end_on_goodbye and says_goodbye(out["reply"]):
            outcome = "goodbye"
        inner = {k: v for k, v in analysis.items() if k != "change"}
        inner.update({"raw_change": change, "tier": tier(self.emotion),
                      "planning": out.get("planning", ""), "plan": out.get("plan", {})})
        if raw_e or raw_r:
            inner["raw"] = {"emotion": raw_e, "reply": raw_r}
        self._end(outcome)
        return UserTurn(text=out["reply"], emotion=self.emotion, delta=delta, inner=inner, done=self.done,
                        outcome=outcome, latency_s=time.perf_counter() - start, n_tokens=tok_e + tok_r)

    # ------------------------------------------------------------------ steps
    async def _emotion_step(self, history: list[dict], reply: str) -> tuple[dict, str, int]:
        if self.backend.native_steps:
            out = await self.backend.emotion_step(self.profile, self.rules, self.emotion, history, reply, self.state)
            return out, "", 0
        if self.pack is not None:
            seen = history + [{"role": "assistant", "content": reply}]
            msgs = self.pack.emotion_messages(self._reference_profile(), self.emotion, seen)
            return await self._ask(msgs, self.pack.parse_emotion, "", "emotion")
        s = self.templates
        change_rule = (fill(s["str:change_clamped"], {"max_drop": _num(self._max_drop()),
                                                      "max_delta": _num(self.rules.max_delta)})
                       if self.rules.max_delta is not None else s["str:change_free"])
        text = fill(s["emotion"], {**self._common(), "dialogue": self._render_history(history),
                                   "reply": reply if reply.strip() else "", "change_rule": change_rule,
                                   "strictness": s["str:strict_need"] if self.rules.strict_need else ""})
        return await self._ask(split_messages(text), parse_emotion, "str:emotion_format")

    async def _reply_step(self, history: list[dict], reply: str, analysis: dict, delta: float
                          ) -> tuple[dict, str, int]:
        if self.backend.native_steps:
            out = await self.backend.reply_step(self.profile, self.rules, self.emotion, delta,
                                                history, analysis, self.state)
            return out, "", 0
        seen = history + [{"role": "assistant", "content": reply}]
        if self.pack is not None:
            msgs = self.pack.reply_messages(self._reference_profile(), self.emotion, seen, analysis)
            return await self._ask(msgs, self.pack.parse_reply, "", "reply")
        text = fill(self.templates["reply"], {**self._common(), "dialogue": self._render_history(seen),
                                              "delta": f"{delta:+g}", "target": analysis.get("TargetCompletion", ""),
                                              "activity": analysis.get("activity", ""),
                                              "analyse": analysis.get("analyse", "")})
        return await self._ask(split_messages(text), parse_reply, "str:reply_format")

    async def _ask(self, messages: list[dict], parse: Callable[[str], dict], fmt_key: str, step: str = ""
                   ) -> tuple[dict, str, int]:
        """Call the chat backend and parse; on a parse failure ask again with the repair prompt (or, for a
        pack, the same prompt). A structured pack asks for its JSON schema through `response_format`."""
        schema = getattr(self.pack, "response_format", lambda _s: None)(step) if step else None

        def repair(answer: str, problem: str) -> Optional[list[dict]]:
            if self.pack is not None and not self.pack.repairs:
                return None  # the reference code asks the same prompt again
            text = fill(self.templates["repair"], {"problem": problem, "format": self.templates[fmt_key]})
            return [{"role": "assistant", "content": answer[:4000]}, {"role": "user", "content": text}]

        answer = await ask_structured(self.backend, messages, parse, attempts=self.max_repairs + 1, repair=repair,
                                      response_format=schema or None, parse_errors=(ParseError,))
        if answer.problem:
            raise ParseError(f"unreadable simulator output after {answer.attempts} attempts: {answer.problem}")
        return answer.value, answer.text, answer.n_tokens

    # ------------------------------------------------------------------ helpers
    def _reference_profile(self) -> dict[str, Any]:
        """The profile as the reference code reads it (RLVER/SAGE keys: player, scene, ...)."""
        from simulator.personas.io import profile_to_rlver

        return {**profile_to_rlver(self.profile), "language": self.profile.language}

    def _common(self) -> dict[str, Any]:
        p, s = self.profile, self.templates
        persona_block = fill(s["persona"], {"persona": p.persona, "background": p.background, "goal": p.goal,
                                            "hidden_need": p.hidden_need,
                                            "personality": PERSONALITIES.get(p.personality, p.personality)
                                            if p.language == "zh" else p.personality,
                                            "traits": ", ".join(p.traits) or "-"})
        return {"persona_block": persona_block, "emotion": _num(self.emotion), "tier": tier(self.emotion),
                "lo": _num(self.rules.lo), "hi": _num(self.rules.hi),
                "question_rule": s["str:passive"] if p.personality == "passive" else ""}

    def _render_history(self, history: list[dict]) -> str:
        you, partner = self.templates["str:you"], self.templates["str:partner"]
        sep = "：" if self.profile.language == "zh" else ": "
        lines = [f"{you if m.get('role') == 'user' else partner}{sep}{m.get('content', '')}" for m in history]
        text = "\n".join(lines)
        if len(text) > HISTORY_CHARS:
            text = "…\n" + text[-HISTORY_CHARS:]
        return text or self.templates["str:empty_dialogue"]

    def _max_drop(self) -> float:
        base = self.rules.max_drop if self.rules.max_drop is not None else self.rules.max_delta
        return base

    def _end(self, outcome: str) -> None:
        if outcome:
            self.done, self.outcome = True, outcome

    def _fail(self, message: str, start: float, keep_outcome: bool = False) -> UserTurn:
        if not keep_outcome:
            self._end("error")
        return UserTurn(text="", emotion=self.emotion, inner={"tier": tier(self.emotion)}, done=True,
                        outcome="error", error=message, latency_s=time.perf_counter() - start)


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)
