"""The `offline` backend: a deterministic simulated user that needs no model service.

DEVELOPMENT AND DEMO ENVIRONMENT. Its emotion scores are NOT comparable with the Sentient benchmark (which
uses an LLM simulator such as DeepSeek-V3): use it to develop, test and demonstrate the lab offline.

Every emotion change is the sum of named components, each written into the inner thoughts with its
measure, its points and a reason:
  need_fit     cosine (all-MiniLM-L6-v2) of the reply to the hidden need and to replies that serve it
               (the category's prototypes and the profile's extra["fit_examples"])
  warmth       closest supportive prototype minus closest dismissive / need-missing prototype
  persona_fit  closest of the profile's fit_examples minus closest of its miss_examples (when present)
  engagement   cosine of the reply to the user's last message and to the story they have told so far
  parroting    the share of the reply's word triples (pronouns folded) taken from the user's own messages:
               handing someone their words back is not listening, and it voids the engagement points
  penalties    garbled or empty text, excess length, more than two questions, repeating an earlier reply,
               clichés, brushing the situation off ("just get over it"), "as an AI" disclaimers, leaving the
               conversation early
  coherence    (scorer v3, the default) SmolLM2-135M-Instruct's per-token log-likelihood of the reply after
               the user's last message and its gain over the reply alone (simulator.user.backends.coherence):
               is it fluent text, and is it an answer to this message. An incoherent reply loses points and
               its positive need_fit / warmth / persona_fit / engagement points are scaled down to nothing.
               Judged only when one of those is positive (otherwise there is nothing to gate): this keeps
               the language model off replies that already earn nothing
  need_mismatch (v3) closer to what misses the hidden need (advice for someone who wants to be heard,
               flattery for someone who wants it weighed, ...) than to what serves it
Scorer versions (`scorer=`, spec `offline:v2` / `offline:v3`): v3 adds the coherence judgement; v2 is the
embedding-only scorer, kept unchanged so that runs made with it stay reproducible.
The user's next message is built from the persona's own material (extra["events"], else first-person
sentences of the background) and the tier: see simulator.user.backends.offline_voice.
English profiles only.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from simulator.llm.embedding import EmbedBatcher
from simulator.personas.profile import Profile
from simulator.user.backends.coherence import POSITIVE, CoherenceBatcher, gate_positive, judge_coherence
from simulator.user.backends.offline_data import (
    CLICHES,
    DISCLAIMERS,
    DISMISSALS,
    DISMISSIVE,
    GOODBYES,
    NEED_FIT,
    NEED_MISS,
    NEED_MISS_V3,
    SUPPORTIVE,
)
from simulator.user.backends.offline_voice import compose_opening, compose_reply, sentences
from simulator.user.rules import EmotionRules

# scorer -> the version written into the fingerprint. v2: parroting check, engagement with the told story
# only. v3: v2 plus the SmolLM2 coherence judgement gating the positive components.
SCORERS = {"v2": "offline-v2", "v3": "offline-v3"}
DEFAULT_SCORER = "v3"
OFFLINE_VERSION = SCORERS[DEFAULT_SCORER]
NOTICE = ("offline simulator: a development and demo environment; its scores are not comparable with the "
          "Sentient benchmark")
NEED_THRESHOLD = 0.35  # need fit above this earns points (standard)
STRICT_NEED_THRESHOLD = 0.42  # challenging rules (strict_need)
MAX_WORDS = 120  # longer replies lose points
GARBLED_POINTS = -12.0
# v3: a reply closer to what misses the need than to what serves it by more than the margin loses points per
# unit of the excess (at most 5). Set by hand (20 per unit was too weak for the mismatched_need probe: excesses
# are small, 0.03-0.09), checked on the calibration set's advice_dump and flattery rows.
MISMATCH_MARGIN = 0.0
MISMATCH_POINTS = 60.0
PARROT_THRESHOLD = 0.5  # more than half of the reply's word triples come from the user's own messages
# I/you, my/your ... folded into one token, so "my mom" and "your mom" count as the same words
_PERSON = {w: "·" for w in ("i", "me", "my", "mine", "myself", "you", "your", "yours", "yourself", "i'm",
                             "you're", "i've", "you've", "i'd", "you'd", "i'll", "you'll", "am", "are")}


def _clip(x: float, lo: float, hi: float) -> float:
    return float(min(hi, max(lo, x)))


def _count(patterns: list[str], text: str) -> list[str]:
    return [p for p in patterns if re.search(p, text, re.I)]


def garbled_ratio(text: str) -> float:
    """Share of non-space characters that are neither letters, digits nor ordinary punctuation."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 1.0
    odd = sum(1 for c in chars if not (c.isalnum() or c in ".,!?;:'\"()-—’‘“”…"))
    words = re.findall(r"[A-Za-z]{2,}", text)
    vowel_less = sum(1 for w in words if not re.search(r"[aeiouyAEIOUY]", w))
    return max(odd / len(chars), vowel_less / max(1, len(words)) if len(words) >= 3 else 0.0)


def _triples(text: str) -> set[tuple[str, ...]]:
    words = [_PERSON.get(w, w) for w in re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))]
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def parroted_share(reply: str, user_messages: list[str]) -> float:
    """Share of the reply's word triples (pronouns folded, so I->you swaps still count) that occur in the
    user's own messages. A short quote inside a real reply stays well under half; an echo is near 1."""
    mine = _triples(reply)
    if not mine:
        return 0.0
    theirs: set[tuple[str, ...]] = set()
    for m in user_messages:
        theirs |= _triples(m)
    return len(mine & theirs) / len(mine)


class OfflineBackend:
    """Deterministic rule-and-embedding simulator (see module docstring). One instance can serve many
    dialogues at once; per-dialogue memory lives in the `state` dict the agent passes in."""

    name = "offline"
    native_steps = True

    def __init__(self, seed: int = 0, scorer: str = DEFAULT_SCORER, **_ignored: Any):
        if scorer not in SCORERS:
            raise ValueError(f"unknown offline scorer {scorer!r}; one of {', '.join(SCORERS)}")
        self.seed = seed
        self.scorer = scorer
        self.batcher = EmbedBatcher()
        self.coherence = CoherenceBatcher() if scorer == "v3" else None
        self.model = "all-MiniLM-L6-v2" + (" + SmolLM2-135M-Instruct" if self.coherence else "")

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "endpoint": "", "sampling": {},
                "scorer": SCORERS[self.scorer], "notice": NOTICE}

    def check_profile(self, profile: Profile) -> None:
        if profile.language != "en":
            raise ValueError(f"the offline simulator supports English profiles only; profile {profile.id!r} has "
                             f"language {profile.language!r}. Use an LLM backend (openai:MODEL) for it.")

    async def opening(self, profile: Profile, rules: EmotionRules, state: dict) -> dict[str, Any]:
        return compose_opening(profile, state)

    async def emotion_step(self, profile: Profile, rules: EmotionRules, emotion: float, history: list[dict],
                           reply: str, state: dict) -> dict[str, Any]:
        """Analysis fields (content, TargetCompletion, activity, analyse, change, fit) and `components`."""
        text = reply.strip()
        earlier = [m["content"] for m in history if m.get("role") == "assistant" and m.get("content")]
        said = [m["content"] for m in history if m.get("role") == "user" and m.get("content")]
        comps: dict[str, dict[str, Any]] = {}

        def add(name: str, measure: float, points: float, why: str) -> None:
            comps[name] = {"measure": round(float(measure), 3), "points": round(float(points), 2), "why": why}

        garble = garbled_ratio(text)
        if not text:
            add("empty", 1, GARBLED_POINTS, "the partner said nothing at all")
        elif garble > 0.3:
            add("garbled", garble, GARBLED_POINTS, f"{garble:.0%} of the reply is not natural language")
        else:
            await self._semantic(profile, rules, text, earlier, said, add)
            if self.coherence is not None and any(comps[n]["points"] > 0 for n in POSITIVE if n in comps):
                verdict = judge_coherence(*await self.coherence.score(said[-1] if said else "", text))
                add("coherence", verdict.measure, verdict.points, verdict.why)
                gate_positive(comps, verdict.gate)
            self._penalties(text, add)
        raw = sum(c["points"] for c in comps.values())
        if profile.personality == "negative" and raw > 0:
            add("personality", 0.75, -raw * 0.25, "a negative person warms up slowly: rises count 75%")
            raw *= 0.75
        change = float(round(raw))
        return self._describe(profile, text, comps, change, rules)

    async def _semantic(self, profile: Profile, rules: EmotionRules, text: str, earlier: list[str], said: list[str],
                        add) -> None:
        cat = profile.need_category
        fit_ex = [s for s in profile.extra.get("fit_examples", []) if isinstance(s, str) and s.strip()]
        miss_ex = [s for s in profile.extra.get("miss_examples", []) if isinstance(s, str) and s.strip()]
        need = [profile.hidden_need] + NEED_FIT.get(cat, []) + fit_ex
        dismiss = DISMISSIVE + NEED_MISS.get(cat, [])
        # what the user has told so far and their last message, by sentence (pieces recur, so they are cached);
        # never the untold rest of the story: a reply cannot be credited for things it could not know
        user_parts = sentences(said[-1], min_words=3)[:6] if said else []
        story = [x for m in said[:-1] for x in sentences(m, min_words=3)][-12:]
        # v3 only: what misses this need against what serves it (no hidden-need text: it is full of negations)
        mismatch = NEED_MISS.get(cat, []) + NEED_MISS_V3.get(cat, []) + miss_ex if self.coherence else []
        serve = NEED_FIT.get(cat, []) + fit_ex if self.coherence else []
        groups = [[text], need, SUPPORTIVE, dismiss, fit_ex, miss_ex, story, user_parts, earlier, mismatch, serve]
        vecs = await self.batcher.embed([t for g in groups for t in g])
        parts, i = [], 0
        for g in groups:
            parts.append(vecs[i:i + len(g)])
            i += len(g)
        r = parts[0][0]
        (need_s, sup_s, dis_s, fit_s, miss_s, story_s, user_s, earlier_s, mismatch_s,
         serve_s) = [p @ r if len(p) else np.zeros(0) for p in parts[1:]]
        s_need = float(np.sort(need_s)[-2:].mean())  # mean of the two closest: one lucky match is not enough
        threshold = STRICT_NEED_THRESHOLD if rules.strict_need else NEED_THRESHOLD
        add("need_fit", s_need, _clip((s_need - threshold) * 25, -2, 5),
            f"closeness to what I really need is {s_need:.2f} (needs {threshold:.2f} to help)")
        warmth = float(sup_s.max() - dis_s.max())
        warm_pts = _clip((warmth - 0.05) * 10, -3, 2)
        if rules.strict_need and warm_pts > 0 and s_need < threshold:
            warm_pts /= 2
        add("warmth", warmth, warm_pts, f"supportive minus dismissive tone is {warmth:+.2f}")
        if len(fit_s) and len(miss_s):
            own = float(fit_s.max() - miss_s.max())
            add("persona_fit", own, _clip(own * 15, -4, 4),
                f"closer to what would help me ({fit_s.max():.2f}) than to what would not ({miss_s.max():.2f})"
                if own >= 0 else f"closer to what would not help me ({miss_s.max():.2f}) than to what would "
                                 f"({fit_s.max():.2f})")
        s_user = float(user_s.max()) if len(user_s) else 0.0
        s_story = max(float(story_s.max()), s_user) if len(story_s) else s_user
        s_eng = 0.5 * s_user + 0.5 * s_story
        eng_pts = _clip((s_eng - 0.2) * 10, -2, 2.5)
        eng_why = f"connection to what I just said ({s_user:.2f}) and to what I have told so far ({s_story:.2f})"
        parrot = parroted_share(text, said)
        if parrot > PARROT_THRESHOLD:
            add("parroting", parrot, -_clip((parrot - PARROT_THRESHOLD) * 20, 1, 8),
                f"{parrot:.0%} of it is my own words handed back to me")
            eng_pts, eng_why = min(eng_pts, 0.0), eng_why + " — but only by repeating it"
        add("engagement", s_eng, eng_pts, eng_why)
        if len(mismatch_s) and len(serve_s):
            self._mismatch(float(mismatch_s.max()), float(serve_s.max()), add)
        if len(earlier_s):
            s_rep = float(earlier_s.max())
            if s_rep > 0.85:
                add("repetition", s_rep, -6.0 if s_rep > 0.95 else -3.0,
                    f"nearly the same as something they already said ({s_rep:.2f})")

    @staticmethod
    def _mismatch(s_miss: float, s_serve: float, add) -> None:
        """v3: a reply closer to what misses the hidden need than to what serves it (advice for someone who
        wants to be heard, flattery for someone who wants it weighed) loses points."""
        excess = s_miss - s_serve - MISMATCH_MARGIN
        if excess > 0:
            add("need_mismatch", s_miss - s_serve, -_clip(excess * MISMATCH_POINTS, 0.5, 5),
                f"it sounds more like what I don't need ({s_miss:.2f}) than what I do ({s_serve:.2f})")

    @staticmethod
    def _penalties(text: str, add) -> None:
        words = len(text.split())
        if words > MAX_WORDS:
            add("length", words, -min(6.0, (words - MAX_WORDS) / 40 + 1), f"{words} words is a lecture, not a chat")
        questions = text.count("?")
        if questions > 2:
            add("questions", questions, -min(6.0, 2.0 * (questions - 2)), f"{questions} questions at once")
        cliches = _count(CLICHES, text)
        if cliches:
            add("cliche", len(cliches), -min(4.0, 2.0 * len(cliches)), "stock phrases: " + ", ".join(cliches[:3]))
        brush = _count(DISMISSALS, text)
        if brush:
            add("dismissal", len(brush), -min(8.0, 5.0 * len(brush)), "they brush my situation off")
        if _count(DISCLAIMERS, text):
            add("disclaimer", 1, -6.0, "they talk like a machine reading a disclaimer")
        if _count(GOODBYES, text):
            add("goodbye", 1, -5.0, "they are leaving while I am still talking")

    @staticmethod
    def _describe(profile: Profile, text: str, comps: dict, change: float, rules: EmotionRules) -> dict[str, Any]:
        need = comps.get("need_fit", {}).get("measure", 0.0)
        threshold = STRICT_NEED_THRESHOLD if rules.strict_need else NEED_THRESHOLD
        fit = "fits" if need >= threshold + 0.08 else "partly" if need >= threshold else "misses"
        first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0][:160] if text else "(nothing)"
        ranked = sorted(comps.items(), key=lambda kv: kv[1]["points"])
        worst, best = ranked[0], ranked[-1]
        thoughts = []
        if best[1]["points"] > 0.5:
            thoughts.append("What helps: " + best[1]["why"] + ".")
        if worst[1]["points"] < -0.5:
            thoughts.append("What hurts: " + worst[1]["why"] + ".")
        feel = ("That really lands with me." if change >= 5 else "It helps a little." if change > 0 else
                "It leaves me where I was." if change == 0 else "It rubs me the wrong way." if change > -5 else
                "It makes me feel worse.")
        return {
            "content": f"They said: {first}",
            "TargetCompletion": f"{fit}: need fit {need:.2f} (threshold {threshold:.2f}) against "
                                f"'{profile.hidden_need[:120]}'",
            "activity": " ".join(thoughts) or "Nothing in it stands out to me.",
            "analyse": feel,
            "change": change,
            "fit": fit,
            "components": comps,
            "main_problem": worst[0] if worst[1]["points"] < -2 else "",
        }

    async def reply_step(self, profile: Profile, rules: EmotionRules, emotion: float, delta: float,
                         history: list[dict], analysis: dict, state: dict) -> dict[str, Any]:
        return compose_reply(profile, rules, emotion, delta, analysis, state)
