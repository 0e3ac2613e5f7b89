"""A scripted human rater: answers the simulator's change plus a known bias and Gaussian noise.

Built with (bias, noise_sd, seed), it rates items the way simulator.evaluation.ratings stores them, and says what
agreement it was built to have (`expected`): exactly for the mean difference, in closed form for the mean
absolute difference, and by many fresh noise draws for the rank and sign statistics and for the alpha of two
such raters. A report over its ratings must give these back within the report's interval.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.evaluation.agreement import krippendorff_alpha_interval, sign_agreement, spearman


@dataclass(frozen=True)
class ScriptedRater:
    name: str
    bias: float = 0.0  # added to every answer: a rater more generous than the simulator has bias > 0
    noise_sd: float = 2.0
    seed: int = 0

    def answers(self, simulator_changes: Sequence[float]) -> list[float]:
        rng = np.random.default_rng(self.seed)
        return [float(s + self.bias + rng.normal(0.0, self.noise_sd)) for s in simulator_changes]

    def ratings(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rating rows (the store's and the JSONL's shape) for items with dialogue_id, turn_index and
        simulator_delta; other keys of an item (need_category, fingerprint_hash ...) are kept."""
        values = self.answers([i["simulator_delta"] for i in items])
        return [{**i, "rater": self.name, "delta": v} for i, v in zip(items, values)]

    def expected(self, simulator_changes: Sequence[float], draws: int = 400) -> dict[str, float]:
        """The agreement with the simulator this rater was built with, on these simulator changes."""
        sim = np.asarray(simulator_changes, dtype=float)
        b, sd = self.bias, self.noise_sd
        # E|b + N(0, sd)| (folded normal): the mean absolute difference
        mad = sd * math.sqrt(2 / math.pi) * math.exp(-b * b / (2 * sd * sd)) + b * (1 - 2 * _phi(-b / sd))
        rng = np.random.default_rng(10_000 + self.seed)
        rho, sign = [], []
        for _ in range(draws):
            human = sim + b + rng.normal(0.0, sd, len(sim))
            rho.append(spearman(sim, human))
            sign.append(sign_agreement(sim, human))
        return {"mean_diff": -b, "mean_abs_diff": mad, "spearman": float(np.mean(rho)),
                "sign_agreement": float(np.mean(sign))}


def expected_alpha(raters: Sequence[ScriptedRater], simulator_changes: Sequence[float], draws: int = 200) -> float:
    """The interval alpha that raters built this way have between them on these items (mean over draws)."""
    sim = np.asarray(simulator_changes, dtype=float)
    rng = np.random.default_rng(20_000)
    values = []
    for _ in range(draws):
        answers = [sim + r.bias + rng.normal(0.0, r.noise_sd, len(sim)) for r in raters]
        values.append(krippendorff_alpha_interval(np.stack(answers, axis=1)))
    return float(np.mean(values))


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))
