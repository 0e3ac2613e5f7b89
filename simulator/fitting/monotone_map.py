"""Calibration of a simulated user to people: a monotone map of its emotion changes onto the people's scale.

Two maps, both non-decreasing (MAPS). "predict" (the default) is the least-squares fit below, the best guess of a
person's score from the simulator's change; it shrinks toward the people's mean as the simulator's signal weakens,
and is flat for a simulator that carries none (a reward that then hardly depends on the reply). "scale" is linear
equating, the increasing line f(d) = a + b d that gives the simulator's changes over the rated spans the people's
mean and spread; it keeps the simulator's ranking of every reply and never flattens, but it also keeps the
simulator's noise, stretched to the people's spread (a reply signal fitted on top has that noise to fight).

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
MAPS = ("predict", "scale")
SCALE_ENDS = 1000.0  # the linear map's knots: far beyond any emotion change, so it is a line where it is used


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


def fit_scale(spans: list[list[float]], targets: list[float]) -> tuple[list, list]:
    """Knots of the increasing line f(d) = a + b d whose span sums a L + b S (L the span's number of replies, S the
    sum of its simulator changes) have the mean and variance of the targets T: with alpha = E[T] / E[L],
    beta = E[S] / E[L] and D = S - beta L, a L + b S = alpha L + b D, and b > 0 solves
    Var(D) b^2 + 2 alpha Cov(L, D) b + alpha^2 Var(L) - Var(T) = 0."""
    if not spans:
        raise ValueError("calibration: no rated turn with judged replies to fit on")
    lengths = np.array([len(s) for s in spans], dtype=float)
    sums = np.array([sum(s) for s in spans], dtype=float)
    t = np.asarray(targets, dtype=float)
    alpha, beta = t.mean() / lengths.mean(), sums.mean() / lengths.mean()
    d = sums - beta * lengths
    var_d, cov_ld = d.var(), float(np.mean((lengths - lengths.mean()) * (d - d.mean())))
    if var_d <= 1e-12:
        raise ValueError("calibration: the simulator's changes do not vary over the rated turns; there is no scale "
                         "to map (use --map predict)")
    disc = (alpha * cov_ld) ** 2 - var_d * (alpha ** 2 * lengths.var() - t.var())
    b = (-alpha * cov_ld + np.sqrt(disc)) / var_d if disc >= 0 else float("nan")
    if not b > 0:
        raise ValueError("calibration: the people's scores vary less than their turns' numbers of replies alone "
                         "explain; no increasing line matches them (use --map predict)")
    a = alpha - beta * b
    return [-SCALE_ENDS, SCALE_ENDS], [float(a - b * SCALE_ENDS), float(a + b * SCALE_ENDS)]


def check_map(method: str) -> str:
    """`method` when it is one of MAPS, else ValueError naming --map."""
    if method not in MAPS:
        raise ValueError(f"--map: must be one of {', '.join(MAPS)}, got {method!r}")
    return method


def fit_change_map(spans: list[list[float]], targets: list[float], method: str = "predict",
                   max_knots: int = MAX_KNOTS) -> tuple[list, list]:
    """Knots of the map `method` (one of MAPS; module docstring)."""
    return fit_scale(spans, targets) if check_map(method) == "scale" else fit_map(spans, targets, max_knots)


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
                   max_knots: int = MAX_KNOTS, method: str = "predict") -> dict[str, Any]:
    """Held-out units after calibration: each dialogue's turns and total mapped by the fold fitted without it.
    Also returns each fold's dialogue positions (to check none is on both sides)."""
    turns, whole = units["turns"], units["dialogues"]
    positions = sorted({u["dialogue"] for u in turns} | {u["dialogue"] for u in whole})
    fold_of = dict(zip(positions, grouped_folds(len(positions), k, seed)))
    held_turns, held_whole, folds = [], [], []
    for fold in range(k):
        train = [u for u in turns if fold_of[u["dialogue"]] != fold]
        f = Calibration("fold", *fit_change_map([u["parts"] for u in train],
                                                [(u["score"] - u["mid"]) * turn_points for u in train], method,
                                                max_knots))
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
