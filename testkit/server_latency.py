"""The scripted server's latency model: a fixed delay, or lognormal with a given median and p99.

A lognormal delay is exp(N(ln median, sigma)) with sigma = ln(p99 / median) / 2.326 (2.326: the standard
normal's 99th percentile), so half the calls take less than the median and one in a hundred more than p99,
the long right tail real API latencies show.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Optional

Z_99 = 2.326  # the standard normal's 99th percentile


@dataclass(frozen=True)
class LatencyModel:
    fixed_s: float = 0.0  # every call (when median_s is None)
    median_s: Optional[float] = None  # lognormal: the median delay ...
    p99_s: Optional[float] = None  # ... and its 99th percentile (>= median_s)

    def __post_init__(self) -> None:
        problem = self.error()
        if problem:
            raise ValueError(problem)

    def error(self) -> str:
        """What is wrong with the settings, naming the field ('' when fine)."""
        if not isinstance(self.fixed_s, (int, float)) or self.fixed_s < 0:
            return f"latency_s must be a number >= 0, got {self.fixed_s!r}"
        if (self.median_s is None) != (self.p99_s is None):
            return "latency_median_s and latency_p99_s go together: give both or neither"
        if self.median_s is None:
            return ""
        if not isinstance(self.median_s, (int, float)) or self.median_s <= 0:
            return f"latency_median_s must be a number > 0, got {self.median_s!r}"
        if not isinstance(self.p99_s, (int, float)) or self.p99_s < self.median_s:
            return f"latency_p99_s must be a number >= latency_median_s ({self.median_s}), got {self.p99_s!r}"
        return ""

    @property
    def sigma(self) -> float:
        """The lognormal's sigma (0 for a fixed delay)."""
        return math.log(self.p99_s / self.median_s) / Z_99 if self.median_s else 0.0

    def draw(self, rng: random.Random) -> float:
        """One delay in seconds (a fixed model draws nothing from `rng`)."""
        if self.median_s is None:
            return float(self.fixed_s)
        return rng.lognormvariate(math.log(self.median_s), self.sigma)

    def describe(self) -> str:
        if self.median_s is None:
            return f"fixed {self.fixed_s:g}s"
        return f"lognormal, median {self.median_s:g}s, p99 {self.p99_s:g}s (sigma {self.sigma:.3f})"
