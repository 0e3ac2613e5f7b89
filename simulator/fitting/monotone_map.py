"""Calibration of a simulated user to people: a monotone map of its emotion changes onto the people's scale.

Any simulator (the offline one, an LLM behind an endpoint, outside code's scores) judges every reply of a human
set (`python -m trainer shadow`); the people rated the replies as they went (ESConv's feedback, 1-5). The map f
is piecewise linear and non-decreasing over knots at the quantiles of the simulator's per-reply changes; it is
fitted so that, for every rated turn, the sum of f over the replies since the previous rated turn matches the
person's score on the declared scale ((score - midpoint) x turn points per step, as the agreement report maps
it). Non-decreasing knots are a bounded linear least-squares problem (v_k = c + u_1 + ... + u_k, u >= 0;
scipy.optimize.lsq_linear). A monotone map removes a simulator's bias and scale; it cannot reorder two single
replies (only spans of several replies), so a Spearman it raises is raised through those spans.

Cross-validation holds whole dialogues out (a dialogue's turns are never on both sides): each fold's map is
fitted on the other folds and applied to the held-out dialogues, and the agreement report's tables are computed
on the pooled held-out predictions, before and after. A calibration is a JSON file under its name: the knots,
the simulator fingerprint and the data it was fitted on, and the cross-validated figures.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import lsq_linear

from simulator.user.calibration import Calibration

MAX_KNOTS = 12


def _weights(values: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """(n, K) linear-interpolation weights of each value over the knots (flat beyond the ends)."""
    k = len(knots)
    out = np.zeros((len(values), k))
    if k == 1:
        out[:, 0] = 1.0
        return out
    v = np.clip(values, knots[0], knots[-1])
    j = np.clip(np.searchsorted(knots, v, side="right") - 1, 0, k - 2)
    t = (v - knots[j]) / (knots[j + 1] - knots[j])
    out[np.arange(len(v)), j] = 1.0 - t
    out[np.arange(len(v)), j + 1] = t
    return out


def fit_map(spans: list[list[float]], targets: list[float], max_knots: int = MAX_KNOTS) -> tuple[list, list]:
    """Knots (x, y) of the non-decreasing piecewise-linear f minimising sum_s (sum_{d in span s} f(d) - target_s)^2."""
    if not spans:
        raise ValueError("calibration: no rated turn with judged replies to fit on")
    flat = np.array([d for s in spans for d in s], dtype=float)
    knots = np.unique(np.quantile(flat, np.linspace(0, 1, max_knots))) if len(np.unique(flat)) > max_knots \
        else np.unique(flat)
    w = np.stack([_weights(np.array(s, dtype=float), knots).sum(axis=0) for s in spans])  # (n_spans, K)
    lower_ones = np.tril(np.ones((len(knots), len(knots))))  # v = T p, p = (c, u_1, ..., u_{K-1})
    lo = np.r_[-np.inf, np.zeros(len(knots) - 1)]
    fit = lsq_linear(w @ lower_ones, np.asarray(targets, dtype=float), bounds=(lo, np.full(len(knots), np.inf)))
    y = lower_ones @ fit.x
    return [float(v) for v in knots], [float(v) for v in np.maximum.accumulate(y)]


def grouped_folds(n_dialogues: int, k: int, seed: int) -> np.ndarray:
    """The fold of each dialogue position: a seeded shuffle dealt round-robin (every dialogue in exactly one)."""
    if k < 2:
        raise ValueError(f"folds: must be 2 or more, got {k}")
    if n_dialogues < k:
        raise ValueError(f"folds: {k} folds need at least {k} dialogues with rated turns, got {n_dialogues}")
    order = np.random.default_rng(seed).permutation(n_dialogues)
    folds = np.empty(n_dialogues, dtype=int)
    folds[order] = np.arange(n_dialogues) % k
    return folds


def _mapped(units: list[dict[str, Any]], f: Calibration) -> list[dict[str, Any]]:
    return [{**u, "sim": float(sum(f.apply(d) for d in u["parts"]))} for u in units]


def cross_validate(units: dict[str, Any], turn_points: float, k: int = 5, seed: int = 0,
                   max_knots: int = MAX_KNOTS) -> dict[str, Any]:
    """Held-out units after calibration: each dialogue's turns and total mapped by the fold fitted without it.
    Also returns each fold's dialogue positions (to check none is on both sides)."""
    turns, whole = units["turns"], units["dialogues"]
    positions = sorted({u["dialogue"] for u in turns} | {u["dialogue"] for u in whole})
    fold_of = dict(zip(positions, grouped_folds(len(positions), k, seed)))
    held_turns, held_whole, folds = [], [], []
    for fold in range(k):
        train = [u for u in turns if fold_of[u["dialogue"]] != fold]
        f = Calibration("fold", *fit_map([u["parts"] for u in train],
                                         [(u["score"] - u["mid"]) * turn_points for u in train], max_knots))
        held_turns += _mapped([u for u in turns if fold_of[u["dialogue"]] == fold], f)
        held_whole += _mapped([u for u in whole if fold_of[u["dialogue"]] == fold], f)
        folds.append({"fitted_on": sorted({u["dialogue"] for u in train}),
                      "held_out": sorted(p for p in positions if fold_of[p] == fold)})
    return {"turns": held_turns, "dialogues": held_whole, "folds": folds}


def change_by_score(units: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean simulator change at each of the people's scores (the calibration curve researchers plot)."""
    by: dict[float, list[float]] = {}
    for u in units:
        by.setdefault(u["score"], []).append(u["sim"])
    return {f"{s:g}": {"n": len(v), "mean": float(np.mean(v))} for s, v in sorted(by.items())}
