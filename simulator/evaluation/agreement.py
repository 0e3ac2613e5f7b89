"""How well a simulated user's emotion changes agree with people's: plain statistics over rated turns.

A rated turn (a "unit") is one user turn answering a policy reply, under one simulator fingerprint; its
simulator change is the change stored with the dialogue (or a shadow judgement's, for a turn a person played)
and its human changes are one per rater. Against the simulator each unit counts once, with the mean of its raters.

  spearman        rank correlation of the simulator's changes and the people's (scipy.stats.spearmanr: average
                  ranks for ties). Blind to a constant bias: a simulator always 10 above people has Spearman 1
  mean_abs_diff   mean |simulator - human|, in emotion points
  sign_agreement  share of units where both say up, both down or both no change (|change| <= the tolerance)
  mean_diff       mean (simulator - human): above 0 the simulator is more generous than people
  alpha           Krippendorff's alpha (interval) between raters, over turns with two or more ratings: the
                  ceiling the simulator can be held to (people agree this well with each other)

Each comes as {value, ci_low, ci_high, n, n_boot, n_undefined, why}: a percentile bootstrap interval (units
resampled with replacement), how many resamples left the statistic undefined (they are not in the interval),
and, wherever a value or an interval is null, why.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import krippendorff
import numpy as np
from scipy import stats

N_BOOT = 1000
MIN_UNITS = 3  # fewer units than this: a paired statistic is not computed (None)
MIN_ALPHA_UNITS = 2  # alpha over one turn compares its ratings with themselves: undefined, not 0
NO_CHANGE_TOL = 1e-9  # |change| at or below this counts as "no change" (float rounding is not a direction)
PACKAGE_CELLS = 5_000_000  # units x values^2 up to which alpha is the krippendorff package's (its memory bound)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties given their average rank (scipy.stats.rankdata)."""
    return stats.rankdata(np.asarray(values, dtype=float))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (scipy.stats.spearmanr), or None when either side has no spread (or fewer than MIN_UNITS)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values against {len(y)}")
    if len(x) < MIN_UNITS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(stats.spearmanr(x, y).statistic)


def mean_abs_diff(sim: Sequence[float], human: Sequence[float]) -> float | None:
    return float(np.mean(np.abs(np.subtract(sim, human)))) if len(sim) else None


def mean_diff(sim: Sequence[float], human: Sequence[float]) -> float | None:
    """Mean (simulator - human): positive when the simulator is more generous than people."""
    return float(np.mean(np.subtract(sim, human))) if len(sim) else None


def direction(values: Sequence[float] | np.ndarray, tol: float = NO_CHANGE_TOL) -> np.ndarray:
    """-1, 0 or 1 per change: 0 when |change| <= tol."""
    v = np.asarray(values, dtype=float)
    return np.where(np.abs(v) <= tol, 0, np.sign(v))


def sign_agreement(sim: Sequence[float], human: Sequence[float], tol: float = NO_CHANGE_TOL) -> float | None:
    """Share of pairs with the same direction (up, down, or no change within `tol`)."""
    return float(np.mean(direction(sim, tol) == direction(human, tol))) if len(sim) else None


def _alpha_closed_form(counts: np.ndarray, sums: np.ndarray, squares: np.ndarray) -> float | None:
    """Interval alpha from per-unit (count, sum, sum of squares): the sum of squared differences over a unit's
    ordered pairs is 2 m S2 - 2 S1^2, so no pair matrix is built. The same value as the package's."""
    n = counts.sum()
    if n < 2:
        return None
    within = (2 * counts * squares - 2 * sums ** 2) / (counts - 1)
    total = 2 * n * squares.sum() - 2 * sums.sum() ** 2
    if total <= 1e-12 * max(1.0, float(n * squares.sum())):
        return None
    return float(1.0 - within.sum() / n / (total / (n * (n - 1))))


def krippendorff_alpha_interval(units: Sequence[Sequence[float]] | np.ndarray) -> float | None:
    """Krippendorff's alpha for interval data. `units`: the ratings of each unit (any number of raters; units
    with fewer than two ratings are left out). None with fewer than MIN_ALPHA_UNITS pairable units or no
    disagreement possible (every value equal). The `krippendorff` package computes it where its value-by-value
    coincidence matrices fit in memory (ratings on a scale); continuous ratings (means, noise) use the same
    formula in closed form."""
    pairable = [np.asarray(u, dtype=float) for u in units]
    pairable = [u[~np.isnan(u)] for u in pairable]
    pairable = [u for u in pairable if len(u) >= 2]
    if len(pairable) < MIN_ALPHA_UNITS:
        return None
    values = np.concatenate(pairable)
    if np.ptp(values) == 0:
        return None
    n_values = len(np.unique(values))
    if len(pairable) * n_values ** 2 <= PACKAGE_CELLS:
        width = max(len(u) for u in pairable)
        data = np.full((width, len(pairable)), np.nan)
        for j, u in enumerate(pairable):
            data[: len(u), j] = u
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    return _alpha_closed_form(np.array([len(u) for u in pairable], dtype=float),
                              np.array([u.sum() for u in pairable]), np.array([(u * u).sum() for u in pairable]))


def centred(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each value (or row) minus its group's mean (e.g. a dialogue's: what varies within a conversation only)."""
    out = np.array(values, dtype=float)
    for g in np.unique(groups):
        out[groups == g] -= out[groups == g].mean(axis=0)
    return out


def bootstrap(n_units: int, statistic: Callable[[np.ndarray], float | None], n_boot: int = N_BOOT, seed: int = 0,
              level: float = 0.95, clusters: Sequence[np.ndarray] | None = None,
              min_units: int = MIN_UNITS, draws: int | None = None,
              strata: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """Percentile interval of `statistic(indices)` over resamples of the units (or, given `clusters`, of whole
    clusters: lists of unit indices, e.g. a dialogue's turns, which are not independent of each other). Each
    resample draws `draws` units or clusters (default as many as there are: a smaller number shows how wide the
    interval would be with fewer); given `strata` (lists of cluster positions, e.g. each policy's dialogues),
    each stratum is resampled on its own, keeping its size. Returns {ci_low, ci_high, n_boot, n_undefined,
    ci_why}: resamples where the statistic is undefined are counted, not hidden; ci_why says why an interval is
    null."""
    out = {"ci_low": None, "ci_high": None, "n_boot": 0, "n_undefined": 0, "ci_why": ""}
    groups = list(clusters) if clusters is not None else None
    n_draw = len(groups) if groups is not None else n_units
    if n_units < min_units:
        out["ci_why"] = f"no interval: {n_units} unit(s), fewer than {min_units}"
        return out
    if groups is not None and n_draw < 2:
        out["ci_why"] = f"no interval: {n_draw} cluster(s) to resample, fewer than 2"
        return out
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_boot):
        pick = (np.concatenate([np.asarray(st)[rng.integers(0, len(st), len(st))] for st in strata])
                if strata is not None else rng.integers(0, n_draw, draws or n_draw))
        idx = pick if groups is None else np.concatenate([groups[i] for i in pick])
        values.append(statistic(idx))
    defined = [v for v in values if v is not None and np.isfinite(v)]
    out["n_boot"], out["n_undefined"] = n_boot, n_boot - len(defined)
    if not defined:
        out["ci_why"] = f"no interval: the statistic is undefined in all {n_boot} resamples"
        return out
    tail = (1 - level) / 2 * 100
    out["ci_low"], out["ci_high"] = float(np.percentile(defined, tail)), float(np.percentile(defined, 100 - tail))
    return out


def bootstrap_interval(n_units: int, statistic: Callable[[np.ndarray], float | None], n_boot: int = N_BOOT,
                       seed: int = 0, level: float = 0.95) -> tuple[float | None, float | None]:
    """(ci_low, ci_high) of `bootstrap` over units."""
    b = bootstrap(n_units, statistic, n_boot, seed, level)
    return b["ci_low"], b["ci_high"]


def estimate(value: float | None, boot: dict[str, Any], n: int, why: str = "") -> dict[str, Any]:
    """One statistic's report entry; `why` explains a null value, the bootstrap's ci_why a null interval."""
    reasons = [r for r in (why if value is None else "", boot.get("ci_why", "")) if r]
    return {"value": value, "ci_low": boot["ci_low"], "ci_high": boot["ci_high"], "n": n,
            "n_boot": boot["n_boot"], "n_undefined": boot["n_undefined"], "why": "; ".join(reasons)}


def pair_reason(name: str, sim: np.ndarray, human: np.ndarray, min_units: int = MIN_UNITS) -> str:
    """Why a paired statistic is null on these values ("" when it is defined)."""
    if not len(sim):
        return "no rated turn has a simulator value"
    if name == "spearman":
        if len(sim) < min_units:
            return f"{len(sim)} rated turn(s), fewer than {min_units}"
        if np.ptp(sim) == 0:
            return "the simulator's changes are all equal: nothing to rank"
        if np.ptp(human) == 0:
            return "people's changes are all equal: nothing to rank"
    return ""


def alpha_reason(multi: Sequence[Sequence[float]]) -> str:
    if not multi:
        return "no turn has two or more ratings"
    if len(multi) < MIN_ALPHA_UNITS:
        return "one turn has two or more ratings: alpha needs at least two such turns"
    return "every rating has the same value: no disagreement is possible"


def group_units(rows: Iterable[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Ratings (dicts with dialogue_id, turn_index, rater, delta, simulator_delta, fingerprint_hash) folded into
    units: (dialogue_id, turn_index, fingerprint_hash) -> {"simulator": change, "human": {rater: change}}.
    A unit's simulator value is the one any of its rows gives. ValueError naming the rows on a rater rating a
    unit twice or two simulator values for one unit (a row's "line", when it has one, names it)."""
    units: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r["dialogue_id"], r["turn_index"], r.get("fingerprint_hash") or "")
        unit = units.setdefault(key, {"simulator": None, "human": {}, "row": r, "rows": {}})
        where = f"line {r['line']}: " if "line" in r else ""
        rater = r["rater"]
        if rater in unit["human"]:
            first = unit["rows"][rater]
            raise ValueError(f"{where}rater {rater!r} already rated turn {key[1]} of dialogue {key[0]}"
                             + (f" (line {first['line']})" if "line" in first else ""))
        unit["human"][rater] = float(r["delta"])
        unit["rows"][rater] = r
        sim = r.get("simulator_delta")
        if sim is not None:
            if unit["simulator"] is not None and float(sim) != unit["simulator"]:
                raise ValueError(f"{where}simulator_delta: {float(sim):g} conflicts with {unit['simulator']:g} given "
                                 f"for turn {key[1]} of dialogue {key[0]}" + (f" on line {unit['sim_line']}"
                                                                             if unit.get("sim_line") else ""))
            unit["simulator"], unit["sim_line"] = float(sim), r.get("line")
    return units


def agreement(rows: Sequence[dict[str, Any]], n_boot: int = N_BOOT, seed: int = 0,
              tol: float = NO_CHANGE_TOL) -> dict[str, Any]:
    """Every statistic of the module docstring over these ratings, each an `estimate`."""
    units = list(group_units(rows).values())
    judged = [u for u in units if u["simulator"] is not None]
    sim = np.array([u["simulator"] for u in judged], dtype=float)
    human = np.array([float(np.mean(list(u["human"].values()))) for u in judged])
    out: dict[str, Any] = {"n_ratings": len(rows), "n_units": len(units),
                           "n_raters": len({r["rater"] for r in rows}), "no_change_tolerance": tol}
    pairs = {"spearman": spearman, "mean_abs_diff": mean_abs_diff, "mean_diff": mean_diff,
             "sign_agreement": lambda s, h: sign_agreement(s, h, tol)}
    for name, fn in pairs.items():
        value = fn(sim, human) if len(sim) else None
        boot = bootstrap(len(sim), lambda idx, fn=fn: fn(sim[idx], human[idx]), n_boot, seed)
        out[name] = estimate(value, boot, len(sim), pair_reason(name, sim, human))
    out["alpha"] = rater_alpha(units, n_boot, seed)
    return out


def rater_alpha(units: Sequence[dict[str, Any]], n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """People's alpha with each other over the turns (not turn x fingerprint) with two or more ratings. The
    bootstrap works on per-turn sums, so a resample costs O(turns) whatever the ratings' values."""
    by_turn: dict[tuple, list[float]] = {}
    for u in units:
        key = (u["row"]["dialogue_id"], u["row"]["turn_index"])
        by_turn.setdefault(key, list(u["human"].values()))
    multi = [v for v in by_turn.values() if len(v) >= 2]
    value = krippendorff_alpha_interval(multi)
    m = np.array([len(v) for v in multi], dtype=float)
    s1 = np.array([sum(v) for v in multi], dtype=float)
    s2 = np.array([sum(x * x for x in v) for v in multi], dtype=float)

    def resampled(idx: np.ndarray) -> float | None:
        return _alpha_closed_form(m[idx], s1[idx], s2[idx]) if len(np.unique(idx)) >= MIN_ALPHA_UNITS else None

    boot = bootstrap(len(multi), resampled, n_boot, seed)
    return estimate(value, boot, len(multi), alpha_reason(multi) if value is None else "")


GROUPINGS = ("fingerprint_hash", "need_category", "personality")


def agreement_report(rows: Sequence[dict[str, Any]], n_boot: int = N_BOOT, seed: int = 0,
                     tol: float = NO_CHANGE_TOL) -> dict[str, Any]:
    """`agreement` over all ratings, per simulator fingerprint, per persona need category and per personality.
    ValueError when there is nothing to report on, or on a duplicate rating or conflicting simulator values."""
    if not rows:
        raise ValueError("ratings: the rating set is empty; rate some turns (Rate view) or import a ratings file")
    report: dict[str, Any] = {"overall": agreement(rows, n_boot, seed, tol)}
    for key in GROUPINGS:
        groups: dict[str, list] = defaultdict(list)
        for r in rows:
            groups[str(r.get(key) or "-")].append(r)
        report[f"by_{key}"] = {name: agreement(g, n_boot, seed, tol) for name, g in sorted(groups.items())}
    return report


def format_report(report: dict[str, Any]) -> str:
    """The report as a plain-text table: one line per group, then why each empty cell is empty."""
    notes: list[str] = []

    def cell(label: str, metric: str, e: dict[str, Any]) -> str:
        if e.get("why"):
            notes.append(f"{label} {metric}: {e['why']}")
        if e["value"] is None:
            return f"{'-':>22}"
        ci = "" if e["ci_low"] is None else f" [{e['ci_low']:.2f}, {e['ci_high']:.2f}]"
        flag = f"*{e['n_undefined']}" if e.get("n_undefined") else ""
        return f"{e['value']:>6.2f}{ci + flag:<16}"

    head = f"{'group':<34}{'n':>5}  {'spearman':<22}{'mean |diff|':<22}{'sign agree':<22}{'sim - human':<22}alpha (raters)"
    lines = [head]
    for section, groups in [("all", {"all ratings": report["overall"]})] + \
            [(k, report[f"by_{k}"]) for k in GROUPINGS]:
        for name, a in groups.items():
            label = name if section == "all" else f"{section}={name[:16]}"
            lines.append(f"{label:<34}{a['spearman']['n']:>5}  " + "".join(
                cell(label, m, a[m]) for m in ("spearman", "mean_abs_diff", "sign_agreement", "mean_diff", "alpha")))
    lines.append("[lo, hi]*k: 95% bootstrap interval; k resamples left the statistic undefined and are not in it")
    return "\n".join(lines + notes)
