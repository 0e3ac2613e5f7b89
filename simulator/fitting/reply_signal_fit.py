"""The second level of a calibration: a per-reply signal regressed on people's ratings (simulator.user.reply_signal).

A rated turn's span holds the replies since the previous rated turn; the calibrated change of the span is
sum_r [f(d_r) + w . x_r], with f the monotone map of the first level (simulator.fitting.monotone_map) and x_r
the reply's features. Two stages, both fitted on the same dialogues: the map, then ridge regression of what the
map leaves (target - sum f(d_r)) on the span's summed features. The columns are scaled by their standard
deviation on the fitting data (the three embedding blocks differ in scale) and the constant is not penalised;
the penalty alpha is chosen by dialogue-grouped cross-validation inside the fitting data only (mean squared
error), so a held-out fold never informs its own model.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from simulator.evaluation.agreement import centred
from simulator.fitting.monotone_map import MAX_KNOTS, fit_change_map, grouped_folds
from simulator.user.calibration import Calibration
from simulator.user.reply_signal import ReplySignal, feature_texts, features_from

ALPHAS = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
INNER_FOLDS = 4


def reply_feature_rows(store: Any, units: dict[str, Any]) -> dict[tuple[int, int], np.ndarray]:
    """Features of every reply the units name, keyed (dialogue id, index of the user turn answering it)."""
    from simulator.evaluation.human_agreement import replies_at
    from simulator.llm.embedding import embed_sync

    keys = sorted({k for level in ("turns", "dialogues") for u in units[level] for k in u["keys"]})
    texts = {k: feature_texts(said, reply) for k, (said, reply) in replies_at(store, keys).items()}
    unique = sorted({t for ts in texts.values() for t in ts})
    vectors = dict(zip(unique, embed_sync(unique))) if unique else {}
    return {k: features_from(np.stack([vectors[t] for t in ts])) for k, ts in texts.items()}


def span_matrix(units: Sequence[dict[str, Any]], rows: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
    """(n units, p) the summed features of each unit's replies."""
    return np.stack([np.sum([rows[k] for k in u["keys"]], axis=0) for u in units])


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Raw-scale weights of ridge regression with columns scaled by their std and the last column (the constant,
    summed: the span's number of replies) unpenalised."""
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    scale[-1] = 1.0
    z = x / scale
    penalty = np.full(x.shape[1], alpha)
    penalty[-1] = 0.0
    w = np.linalg.solve(z.T @ z + np.diag(penalty) + 1e-9 * np.eye(x.shape[1]), z.T @ y)
    return w / scale


def choose_alpha(x: np.ndarray, y: np.ndarray, dialogues: np.ndarray, seed: int,
                 alphas: Sequence[float] = ALPHAS) -> float:
    """The penalty with the least dialogue-grouped cross-validated squared error on these units."""
    positions = np.unique(dialogues)
    k = min(INNER_FOLDS, len(positions))
    if k < 2:
        return float(alphas[len(alphas) // 2])
    fold_of = dict(zip(positions, grouped_folds(len(positions), k, seed + 1)))
    folds = np.array([fold_of[d] for d in dialogues])
    errors = []
    for alpha in alphas:
        err = 0.0
        for f in range(k):
            w = ridge(x[folds != f], y[folds != f], alpha)
            err += float(np.sum((x[folds == f] @ w - y[folds == f]) ** 2))
        errors.append(err)
    return float(alphas[int(np.argmin(errors))])


def fit_two_levels(turns: Sequence[dict[str, Any]], rows: dict[tuple[int, int], np.ndarray], turn_points: float,
                   seed: int, max_knots: int = MAX_KNOTS, method: str = "predict",
                   within: bool = False) -> tuple[Calibration, ReplySignal]:
    """The map on the turns' spans, then the signal on what it leaves (module docstring). `within`: the signal is
    fitted on features and residuals centred on their dialogue (fixed effects), so it learns only what ranks one
    conversation's replies, none of what tells one person from another."""
    targets = np.array([(u["score"] - u["mid"]) * turn_points for u in turns])
    cal = Calibration("fit", *fit_change_map([u["parts"] for u in turns], list(targets), method, max_knots))
    mapped = np.array([sum(cal.apply(d) for d in u["parts"]) for u in turns])
    x, y = span_matrix(turns, rows), targets - mapped
    dialogues = np.array([u["dialogue"] for u in turns])
    if within:
        x, y = centred(x, dialogues), centred(y, dialogues)
    alpha = choose_alpha(x, y, dialogues, seed)
    return cal, ReplySignal(weights=[float(w) for w in ridge(x, y, alpha)], alpha=alpha)


def _predicted(units: Sequence[dict[str, Any]], cal: Calibration, signal: ReplySignal,
               rows: dict[tuple[int, int], np.ndarray]) -> list[dict[str, Any]]:
    return [{**u, "sim": float(sum(cal.apply(d) for d in u["parts"])
                               + sum(signal.points(rows[k]) for k in u["keys"]))} for u in units]


def cross_validate_signal(units: dict[str, Any], rows: dict[tuple[int, int], np.ndarray], turn_points: float,
                          k: int = 5, seed: int = 0, method: str = "predict", within: bool = False) -> dict[str, Any]:
    """Held-out turns and dialogue totals under both levels, each fold's model fitted without its dialogues
    (the same folds as simulator.fitting.monotone_map.cross_validate for the same k and seed)."""
    turns, whole = units["turns"], units["dialogues"]
    positions = sorted({u["dialogue"] for u in turns} | {u["dialogue"] for u in whole})
    fold_of = dict(zip(positions, grouped_folds(len(positions), k, seed)))
    held_turns, held_whole, alphas = [], [], []
    for fold in range(k):
        cal, signal = fit_two_levels([u for u in turns if fold_of[u["dialogue"]] != fold], rows, turn_points, seed,
                                     method=method, within=within)
        alphas.append(signal.alpha)
        held_turns += _predicted([u for u in turns if fold_of[u["dialogue"]] == fold], cal, signal, rows)
        held_whole += _predicted([u for u in whole if fold_of[u["dialogue"]] == fold], cal, signal, rows)
    return {"turns": held_turns, "dialogues": held_whole, "alphas": alphas}
