"""The Sentient benchmark score: mean final emotion, success (>= 100) and failure (< 10) counts.

Shown rounded half up to one decimal as on the leaderboard (68.15 -> 68.2), with a bootstrap 95%
percentile interval of the mean.

Dialogues that ended with an error (simulator or policy failure) are never dropped: pass them as None.
They count in n, enter the mean with emotion `error_emotion` (default 0, so a policy can never gain by
failing) and therefore as failures, and `n_errors` says how many there were.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Optional, Sequence, Union

import numpy as np

from simulator.user.rules import tier

Number = Union[int, float, Decimal]


def round_half_up(x: Number, ndigits: int = 1) -> float:
    """Round half away from zero on the decimal value as written (68.15 -> 68.2, not float's 68.1)."""
    d = x if isinstance(x, Decimal) else Decimal(repr(float(x)))
    return float(d.quantize(Decimal(1).scaleb(-ndigits), rounding=ROUND_HALF_UP))


@dataclass(frozen=True)
class BenchmarkSummary:
    score: float  # mean final emotion, rounded half up to one decimal
    success: int  # final emotion >= 100
    failure: int  # final emotion < 10 (errored dialogues included)
    n: int  # every dialogue, errored ones included
    ci_low: float  # bootstrap 95% percentile interval of the mean, one decimal
    ci_high: float
    n_errors: int = 0  # dialogues that ended with an error, scored as `error_emotion`
    mean: float = 0.0  # the unrounded mean
    n_boot: int = 0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def exact_mean(values: Sequence[Number]) -> Decimal:
    """Mean computed in decimal, so 6815 / 100 is exactly 68.15 before rounding."""
    total = sum((v if isinstance(v, Decimal) else Decimal(repr(float(v))) for v in values), Decimal(0))
    return total / len(values)


def bootstrap_interval(values: Sequence[float], n_boot: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (deterministic for a seed)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2 or n_boot < 1:
        return float(x.mean()), float(x.mean())
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def sentient_summary(final_emotions: Sequence[Optional[Number]], n_boot: int = 2000, seed: int = 0,
                     error_emotion: float = 0.0) -> BenchmarkSummary:
    """Score a set of finished dialogues; None marks a dialogue that ended with an error."""
    if len(final_emotions) == 0:
        raise ValueError("no dialogues to score")
    n_errors = sum(e is None for e in final_emotions)
    values = [error_emotion if e is None else e for e in final_emotions]
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)) or v != v]
    if bad:
        raise ValueError(f"final emotions must be numbers or None, got {bad[0]!r}")
    tiers = [tier(float(v)) for v in values]
    mean = exact_mean(values)
    lo, hi = bootstrap_interval([float(v) for v in values], n_boot, seed)
    return BenchmarkSummary(score=round_half_up(mean), success=tiers.count("S"), failure=tiers.count("F"),
                            n=len(values), ci_low=round_half_up(lo), ci_high=round_half_up(hi), n_errors=n_errors,
                            mean=float(mean), n_boot=n_boot, seed=seed)


def format_summary(s: BenchmarkSummary, name: str = "") -> str:
    """One line for the command line and the app."""
    pct = lambda k: f"{100 * k / s.n:.0f}%" if s.n else "-"  # noqa: E731
    line = (f"score {s.score:.1f}  success {s.success} ({pct(s.success)})  failure {s.failure} ({pct(s.failure)})"
            f"  n {s.n}  95% CI [{s.ci_low:.1f}, {s.ci_high:.1f}]")
    if s.n_errors:
        line += f"  errors {s.n_errors} (scored as failures)"
    return f"{name}: {line}" if name else line
