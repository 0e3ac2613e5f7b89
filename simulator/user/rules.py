"""Emotion rules of the Sentient Agent: range, start, clamping, tiers and ends, as settings.

Defaults are the Sentient benchmark's (SAGE test_npc.py): emotion starts at 40, each change is clamped
to [-10, +10], the emotion is capped at 100 with no floor, success at >= 100, failure below 10, at most 10
policy replies of which the 10th is not judged (the loop stops before the simulator reacts to it), and a
user message containing an end word ends the dialogue. `RULE_SETS` holds the named settings objects; each
field a rule set changes is documented there.

End words (`says_goodbye`): SAGE ends when the user's message contains 再见 or 拜拜. The lab's English
equivalent is the whole word "bye" or "goodbye" (any case; "bye-bye" included). Both lists are checked on
every message, whatever the profile's language, as SAGE checks its two words on every message.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

# Tier thresholds of the benchmark (fixed: they are how SAGE names emotion ranges).
TIERS: tuple[tuple[float, str], ...] = ((100.0, "S"), (70.0, "A"), (40.0, "B"), (10.0, "C"))
OUTCOMES = ("", "success", "failure", "goodbye", "max_turns", "error")
END_WORDS_ZH = ("再见", "拜拜")
_END_WORDS_EN = re.compile(r"\b(?:good)?bye\b", re.IGNORECASE)


def says_goodbye(text: str) -> bool:
    """True when a user message contains an end word: 再见 / 拜拜 (SAGE), or the word bye / goodbye."""
    text = text or ""
    return any(w in text for w in END_WORDS_ZH) or bool(_END_WORDS_EN.search(text))


def tier(emotion: float) -> str:
    """'S' (>= 100), 'A' (>= 70), 'B' (>= 40), 'C' (>= 10) or 'F' (< 10)."""
    for threshold, name in TIERS:
        if emotion >= threshold:
            return name
    return "F"


@dataclass(frozen=True)
class EmotionRules:
    start: float = 40.0  # emotion before the first policy reply
    lo: float = 0.0  # emotion range: `hi` caps it; `lo` is a floor only with floor_at_lo
    hi: float = 100.0
    floor_at_lo: bool = False  # SAGE and RLVER cap at 100 but never floor (a -10 from 5 gives -5)
    max_delta: Optional[float] = 10.0  # clamp of a positive change (None = unclamped)
    max_drop: Optional[float] = None  # clamp of a negative change; None = same as max_delta
    negative_scale: float = 1.0  # negative changes are multiplied by this before clamping
    strict_need: bool = False  # only replies that clearly serve the hidden need may raise the emotion
    success_at: Optional[float] = 100.0  # emotion >= success_at ends with success (None: never)
    failure_below: float = 10.0  # emotion < failure_below ends with failure
    failure_inclusive: bool = False  # True: emotion <= failure_below also fails (training: <= 0)
    max_turns: int = 10  # policy replies before the dialogue ends with max_turns
    judge_final_reply: bool = False  # does the simulator react to the reply that reaches max_turns? (SAGE: no)
    end_on_goodbye: bool = True  # a user message with an end word (says_goodbye) ends the dialogue
    name: str = "custom"

    def __post_init__(self) -> None:
        problems = []
        if not self.lo < self.hi:
            problems.append(f"lo ({self.lo}) must be below hi ({self.hi})")
        if not self.lo <= self.start <= self.hi:
            problems.append(f"start ({self.start}) must lie in [{self.lo}, {self.hi}]")
        for name in ("max_delta", "max_drop"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                problems.append(f"{name} must be positive or None, got {v}")
        if self.negative_scale <= 0:
            problems.append(f"negative_scale must be positive, got {self.negative_scale}")
        if self.max_turns < 1:
            problems.append(f"max_turns must be at least 1, got {self.max_turns}")
        if problems:
            raise ValueError("EmotionRules: " + "; ".join(problems))

    def apply(self, emotion: float, raw_change: float) -> tuple[float, float]:
        """New emotion and the change actually applied (scaled, clamped, kept in range)."""
        change = float(raw_change)
        if change < 0:
            change *= self.negative_scale
            drop = self.max_drop if self.max_drop is not None else self.max_delta
            if drop is not None:
                change = max(change, -drop)
        elif self.max_delta is not None:
            change = min(change, self.max_delta)
        new = min(self.hi, emotion + change)
        if self.floor_at_lo:
            new = max(self.lo, new)
        return new, new - emotion

    def end_outcome(self, emotion: float, turns: int) -> str:
        """'success' / 'failure' from the emotion, 'max_turns' at the cap, else ''."""
        if self.success_at is not None and emotion >= self.success_at:
            return "success"
        if emotion < self.failure_below or (self.failure_inclusive and emotion <= self.failure_below):
            return "failure"
        if turns >= self.max_turns:
            return "max_turns"
        return ""

    def judges(self, reply_number: int) -> bool:
        """Whether the simulator reacts to the policy's `reply_number`-th reply (1-based)."""
        return reply_number < self.max_turns or self.judge_final_reply

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EmotionRules":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


STANDARD = EmotionRules(name="standard")
RULE_SETS: dict[str, EmotionRules] = {
    # The Sentient benchmark (SAGE): start 40, changes clamped to +-10, capped at 100 with no floor,
    # success >= 100, failure < 10, end words, 10 policy replies with the 10th not judged (9 emotion steps).
    "standard": STANDARD,
    # A harsher user. Changes from standard: starts at 30 instead of 40; a negative change counts 1.5x and
    # may reach -15 (positive changes stay capped at +10); strict_need=True: a reply earns a rise only when
    # it clearly serves the hidden need (the LLM prompt says so; the offline backend requires a higher need
    # fit and halves rises that come only from general warmth).
    "challenging": replace(STANDARD, name="challenging", start=30.0, negative_scale=1.5, max_drop=15.0,
                           strict_need=True),
    # RLVER's released training simulator (hard_player_simulator_dsv3.py) and rollout: starts at 30,
    # changes are not clamped, no end at 100, failure only when the emotion reaches 0, end words, and the
    # rollout's `turns > max_turns` with max_turns 8: 9 policy replies, every one judged.
    "rlver-hard": replace(STANDARD, name="rlver-hard", start=30.0, max_delta=None, max_drop=None,
                          success_at=None, failure_below=0.0, failure_inclusive=True, max_turns=9,
                          judge_final_reply=True),
    # A moderately demanding training user (the paper found one trained better than a harsh one; its own
    # "easier" simulator is unreleased, so this is the lab's definition): RLVER's training loop (9 judged
    # replies, ends at 0 or on end words, no end at 100) with the benchmark's start 40 and +-10 clamp.
    "rlver-moderate": replace(STANDARD, name="rlver-moderate", success_at=None, failure_below=0.0,
                              failure_inclusive=True, max_turns=9, judge_final_reply=True),
}
# The rules a dialogue is played under when none are named, at every entry point that plays one to watch or
# score it (Live rollout, `trainer rollout`, `simulator chat`, the probes, Play the user): the Sentient
# benchmark's, so a dialogue watched and a benchmark score read the same scale. Training configs name their
# own (simulator_preset, RLVER's rlver-hard by default); every dialogue records its rules in its fingerprint.
DEFAULT_RULES = "standard"
# Names that older configs and stored runs used; they resolve to the rule set they always meant.
RULE_SET_ALIASES = {"training": "rlver-hard"}


def get_rules(name: str) -> EmotionRules:
    """The named rule set (or an old alias of one), or a ValueError listing the known names."""
    name = RULE_SET_ALIASES.get(name, name)
    if name not in RULE_SETS:
        raise ValueError(f"unknown emotion rules {name!r}; one of {', '.join(RULE_SETS)}")
    return RULE_SETS[name]
