"""Emotion rules of the Sentient Agent: range, start, clamping, tiers and ends, as settings.

Defaults are the Sentient benchmark's (SAGE): emotion 0..100 starting at 40, each change clamped to
[-10, +10], success at >= 100, failure below 10, at most 10 policy turns, a goodbye ends the dialogue.
`PRESETS` holds the named settings objects; each field a preset changes is documented there.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

# Tier thresholds of the benchmark (fixed: they are how SAGE names emotion ranges).
TIERS: tuple[tuple[float, str], ...] = ((100.0, "S"), (70.0, "A"), (40.0, "B"), (10.0, "C"))
OUTCOMES = ("", "success", "failure", "goodbye", "max_turns", "error")


def tier(emotion: float) -> str:
    """'S' (>= 100), 'A' (>= 70), 'B' (>= 40), 'C' (>= 10) or 'F' (< 10)."""
    for threshold, name in TIERS:
        if emotion >= threshold:
            return name
    return "F"


@dataclass(frozen=True)
class EmotionRules:
    start: float = 40.0  # emotion before the first policy reply
    lo: float = 0.0  # emotion range
    hi: float = 100.0
    max_delta: Optional[float] = 10.0  # clamp of a positive change (None = unclamped)
    max_drop: Optional[float] = None  # clamp of a negative change; None = same as max_delta
    negative_scale: float = 1.0  # negative changes are multiplied by this before clamping
    strict_need: bool = False  # only replies that clearly serve the hidden need may raise the emotion
    success_at: float = 100.0  # emotion >= success_at ends with success
    failure_below: float = 10.0  # emotion < failure_below ends with failure
    failure_inclusive: bool = False  # True: emotion <= failure_below also fails (training: <= 0)
    max_turns: int = 10  # policy turns before the dialogue ends with max_turns
    end_on_goodbye: bool = True  # the user's goodbye ends the dialogue
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
        new = min(self.hi, max(self.lo, emotion + change))
        return new, new - emotion

    def end_outcome(self, emotion: float, turns: int) -> str:
        """'success' / 'failure' from the emotion, 'max_turns' at the cap, else ''."""
        if emotion >= self.success_at:
            return "success"
        if emotion < self.failure_below or (self.failure_inclusive and emotion <= self.failure_below):
            return "failure"
        if turns >= self.max_turns:
            return "max_turns"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EmotionRules":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


STANDARD = EmotionRules(name="standard")
PRESETS: dict[str, EmotionRules] = {
    # The Sentient benchmark: start 40, changes clamped to +-10, success >= 100, failure < 10, 10 turns.
    "standard": STANDARD,
    # A harsher user. Changes from standard: starts at 30 instead of 40; a negative change counts 1.5x and
    # may reach -15 (positive changes stay capped at +10); strict_need=True: a reply earns a rise only when
    # it clearly serves the hidden need (the LLM prompt says so; the offline backend requires a higher need
    # fit and halves rises that come only from general warmth).
    "challenging": replace(STANDARD, name="challenging", start=30.0, negative_scale=1.5, max_drop=15.0,
                           strict_need=True),
    # The paper's training simulator. Changes from standard: starts at 30, changes are not clamped,
    # failure only when the emotion reaches 0, at most 8 policy turns.
    "training": replace(STANDARD, name="training", start=30.0, max_delta=None, max_drop=None,
                        failure_below=0.0, failure_inclusive=True, max_turns=8),
}


def get_preset(name: str) -> EmotionRules:
    """The named preset, or a ValueError listing the known names."""
    if name not in PRESETS:
        raise ValueError(f"unknown rules preset {name!r}; one of {', '.join(PRESETS)}")
    return PRESETS[name]
