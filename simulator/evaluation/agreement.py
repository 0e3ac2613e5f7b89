"""How well a simulated user's emotion changes agree with people's: plain statistics over rated turns.

A rated turn (a "unit") is one user turn answering a policy reply; its simulator change is the change stored
with the dialogue (or a shadow judgement's, for a turn a person played) and its human changes are one per
rater. Against the simulator each unit counts once, with the mean of its raters.

  spearman        rank correlation of the simulator's changes and the people's (average ranks for ties)
  mean_abs_diff   mean |simulator - human|, in emotion points
  sign_agreement  share of units where both say up, both down or both no change
  mean_diff       mean (simulator - human): above 0 the simulator is more generous than people
  alpha           Krippendorff's alpha (interval) between raters, over units with two or more ratings: the
                  ceiling the simulator can be held to (people agree this well with each other)

Each comes with a percentile bootstrap interval (units resampled with replacement) and its n.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

N_BOOT = 1000
MIN_UNITS = 3  # fewer units than this: a statistic is not computed (None)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties given their average rank."""
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        same = x == v
        if same.sum() > 1:
            r[same] = r[same].mean()
    return r


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho, or None when either side has no spread (or fewer than MIN_UNITS pairs)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values against {len(y)}")
    if len(x) < MIN_UNITS:
        return None
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def mean_abs_diff(sim: Sequence[float], human: Sequence[float]) -> float | None:
    return float(np.mean(np.abs(np.subtract(sim, human)))) if len(sim) else None


def mean_diff(sim: Sequence[float], human: Sequence[float]) -> float | None:
    """Mean (simulator - human): positive when the simulator is more generous than people."""
    return float(np.mean(np.subtract(sim, human))) if len(sim) else None


def sign_agreement(sim: Sequence[float], human: Sequence[float]) -> float | None:
    """Share of pairs with the same sign (up, down, or no change)."""
    return float(np.mean(np.sign(sim) == np.sign(human))) if len(sim) else None


def krippendorff_alpha_interval(units: Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha for interval data. `units`: the ratings of each unit (any number of raters; units
    with fewer than two ratings are left out). None when there are no pairable ratings or no disagreement
    is possible (every value equal)."""
    pairable = [np.asarray(u, dtype=float) for u in units if len(u) >= 2]
    n = sum(len(u) for u in pairable)
    if n < 2 or len(pairable) < 1:
        return None
    observed = sum(((u[:, None] - u[None, :]) ** 2).sum() / (len(u) - 1) for u in pairable) / n
    values = np.concatenate(pairable)
    expected = ((values[:, None] - values[None, :]) ** 2).sum() / (n * (n - 1))
    if expected == 0:
        return None
    return float(1.0 - observed / expected)


def bootstrap_interval(n_units: int, statistic: Callable[[np.ndarray], float | None], n_boot: int = N_BOOT,
                       seed: int = 0, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of `statistic(indices)` over resamples of the unit indices."""
    if n_units < MIN_UNITS:
        return None, None
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n_units, n_units)) for _ in range(n_boot)]
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    tail = (1 - level) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def _estimate(value: float | None, interval: tuple[float | None, float | None], n: int) -> dict[str, Any]:
    return {"value": value, "ci_low": interval[0], "ci_high": interval[1], "n": n}


def group_units(rows: Iterable[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Ratings (dicts with dialogue_id, turn_index, rater, delta, simulator_delta) folded into units:
    (dialogue_id, turn_index) -> {"simulator": change, "human": {rater: change}}."""
    units: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r["dialogue_id"], r["turn_index"])
        unit = units.setdefault(key, {"simulator": r.get("simulator_delta"), "human": {}, "row": r})
        unit["human"][r["rater"]] = float(r["delta"])
    return units


def agreement(rows: Sequence[dict[str, Any]], n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Every statistic of the module docstring over these ratings, each {value, ci_low, ci_high, n}."""
    units = list(group_units(rows).values())
    judged = [u for u in units if u["simulator"] is not None]
    sim = np.array([float(u["simulator"]) for u in judged])
    human = np.array([float(np.mean(list(u["human"].values()))) for u in judged])
    out: dict[str, Any] = {"n_ratings": len(rows), "n_units": len(units),
                           "n_raters": len({r["rater"] for r in rows})}
    pairs = {"spearman": spearman, "mean_abs_diff": mean_abs_diff, "sign_agreement": sign_agreement,
             "mean_diff": mean_diff}
    for name, fn in pairs.items():
        value = fn(sim, human) if len(sim) else None
        interval = bootstrap_interval(len(sim), lambda idx, fn=fn: fn(sim[idx], human[idx]), n_boot, seed)
        out[name] = _estimate(value, interval, len(sim))
    multi = [list(u["human"].values()) for u in units if len(u["human"]) >= 2]
    alpha = krippendorff_alpha_interval(multi)
    interval = bootstrap_interval(len(multi), lambda idx: krippendorff_alpha_interval([multi[i] for i in idx]),
                                  n_boot, seed)
    out["alpha"] = _estimate(alpha, interval, len(multi))
    return out


GROUPINGS = ("fingerprint_hash", "need_category", "personality")


def agreement_report(rows: Sequence[dict[str, Any]], n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """`agreement` over all ratings, per simulator fingerprint, per persona need category and per personality.
    ValueError when there is nothing to report on."""
    if not rows:
        raise ValueError("ratings: the rating set is empty; rate some turns (Rate view) or import a ratings file")
    report: dict[str, Any] = {"overall": agreement(rows, n_boot, seed)}
    for key in GROUPINGS:
        groups: dict[str, list] = defaultdict(list)
        for r in rows:
            groups[str(r.get(key) or "-")].append(r)
        report[f"by_{key}"] = {name: agreement(g, n_boot, seed) for name, g in sorted(groups.items())}
    return report


def format_report(report: dict[str, Any]) -> str:
    """The report as a plain-text table: one line per group."""
    def cell(e: dict[str, Any]) -> str:
        if e["value"] is None:
            return f"{'-':>22}"
        ci = "" if e["ci_low"] is None else f" [{e['ci_low']:.2f}, {e['ci_high']:.2f}]"
        return f"{e['value']:>6.2f}{ci:<16}"

    head = f"{'group':<34}{'n':>5}  {'spearman':<22}{'mean |diff|':<22}{'sign agree':<22}{'sim - human':<22}alpha (raters)"
    lines = [head]
    for section, groups in [("all", {"all ratings": report["overall"]})] + \
            [(k, report[f"by_{k}"]) for k in GROUPINGS]:
        for name, a in groups.items():
            label = name if section == "all" else f"{section}={name[:16]}"
            lines.append(f"{label:<34}{a['spearman']['n']:>5}  " + "".join(
                cell(a[m]) for m in ("spearman", "mean_abs_diff", "sign_agreement", "mean_diff", "alpha")))
    return "\n".join(lines)
