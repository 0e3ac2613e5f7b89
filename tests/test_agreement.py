"""The agreement statistics (simulator.evaluation.agreement) and the scripted rater that checks them."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.evaluation.agreement import (
    agreement,
    agreement_report,
    format_report,
    krippendorff_alpha_interval,
    mean_abs_diff,
    mean_diff,
    ranks,
    sign_agreement,
    spearman,
)
from testkit.scripted_rater import ScriptedRater, expected_alpha


def _items(n: int, seed: int = 1) -> list[dict]:
    """n rated turns with simulator changes spread like the Sentient rules' (integers in [-10, 10])."""
    rng = np.random.default_rng(seed)
    needs = ("just_listen", "useful_advice")
    return [{"dialogue_id": 1 + i // 5, "turn_index": 2 * (i % 5) + 2, "simulator_delta": float(rng.integers(-10, 11)),
             "fingerprint_hash": "fp-a", "need_category": needs[i % 2], "personality": "negative"} for i in range(n)]


def test_ranks_average_ties_and_spearman_matches_scipy():
    assert list(ranks([10, 20, 20, 5])) == [2.0, 3.5, 3.5, 1.0]
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x, y = rng.integers(-3, 4, 40), rng.integers(-3, 4, 40)
    assert spearman(x, y) == pytest.approx(scipy_stats.spearmanr(x, y).statistic)


def test_pair_statistics_by_hand():
    sim, human = [5, -2, 0, 3], [3, -4, 0, -1]
    assert mean_diff(sim, human) == pytest.approx((2 + 2 + 0 + 4) / 4)  # the simulator is the more generous
    assert mean_abs_diff(sim, human) == pytest.approx(2.0)
    assert sign_agreement(sim, human) == pytest.approx(3 / 4)
    assert spearman([1, 2, 3], [3, 3, 3]) is None  # no spread on one side: no correlation


def test_krippendorff_alpha_interval_by_hand():
    # n = 4 values; observed disagreement 1; expected (sum of squared differences over ordered pairs) 40 / 12
    assert krippendorff_alpha_interval([[1, 2], [3, 4]]) == pytest.approx(1 - 1 / (40 / 12))
    assert krippendorff_alpha_interval([[1, 1], [5, 5], [2, 2]]) == pytest.approx(1.0)
    assert krippendorff_alpha_interval([[3, 3], [3, 3]]) is None
    assert krippendorff_alpha_interval([[1], [2]]) is None  # nothing pairable
    # a unit with one rating is left out; one pairable unit compares its ratings with themselves: undefined
    assert krippendorff_alpha_interval([[1, 2, 3], [7]]) is None
    assert krippendorff_alpha_interval([[1, 2, 3], [7], [4, 6]]) is not None


def test_scripted_rater_gives_back_the_agreement_it_was_built_with():
    items = _items(300)
    rater = ScriptedRater("sam", bias=-1.5, noise_sd=3.0, seed=4)
    report = agreement(rater.ratings(items), n_boot=400)
    built = rater.expected([i["simulator_delta"] for i in items])
    for name in ("mean_diff", "mean_abs_diff", "spearman", "sign_agreement"):
        est = report[name]
        assert est["n"] == 300
        assert est["ci_low"] <= built[name] <= est["ci_high"], (name, est, built[name])
    assert report["mean_diff"]["value"] > 0  # the rater is stingier: the simulator reads as more generous
    assert report["alpha"]["value"] is None and report["alpha"]["n"] == 0  # one rater: no inter-rater figure


def test_two_scripted_raters_give_the_inter_rater_figure():
    items = _items(300, seed=2)
    raters = [ScriptedRater("ana", noise_sd=2.5, seed=1), ScriptedRater("ben", noise_sd=2.5, seed=2)]
    rows = [r for rater in raters for r in rater.ratings(items)]
    report = agreement(rows, n_boot=400)
    built = expected_alpha(raters, [i["simulator_delta"] for i in items])
    assert report["alpha"]["n"] == 300 and report["n_raters"] == 2
    assert report["alpha"]["ci_low"] <= built <= report["alpha"]["ci_high"]
    # noisier raters agree less: the ceiling drops
    noisy = [ScriptedRater("ana", noise_sd=8, seed=1), ScriptedRater("ben", noise_sd=8, seed=2)]
    worse = agreement([r for rater in noisy for r in rater.ratings(items)], n_boot=50)
    assert worse["alpha"]["value"] < report["alpha"]["value"] - 0.2


def test_report_groups_by_fingerprint_need_and_personality():
    items = _items(40) + [{**i, "fingerprint_hash": "fp-b", "dialogue_id": i["dialogue_id"] + 100} for i in _items(20)]
    rows = ScriptedRater("sam", noise_sd=1.0).ratings(items)
    report = agreement_report(rows, n_boot=50)
    assert set(report["by_fingerprint_hash"]) == {"fp-a", "fp-b"}
    assert report["by_fingerprint_hash"]["fp-b"]["spearman"]["n"] == 20
    assert set(report["by_need_category"]) == {"just_listen", "useful_advice"}
    assert report["overall"]["n_units"] == 60
    text = format_report(report)
    assert "fingerprint_hash=fp-b" in text and "need_category=just_listen" in text


def test_an_empty_rating_set_is_refused_with_a_message():
    with pytest.raises(ValueError, match="rating set is empty"):
        agreement_report([])


def _rating_sets(count: int, seed: int = 7):
    """Random rating sets: turns x raters on an integer scale or with continuous values, some ratings missing."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        turns, raters = int(rng.integers(3, 60)), int(rng.integers(2, 5))
        truth = rng.normal(0, 4, turns)
        data = truth[None, :] + rng.normal(0, 1 + k % 3, (raters, turns))
        if k % 2:
            data = np.clip(np.round(data), -10, 10)  # a rating scale: the package's own path
        data[rng.random(data.shape) < 0.2] = np.nan
        yield data


def test_alpha_matches_the_krippendorff_package_on_scales_and_continuous_values():
    krippendorff = pytest.importorskip("krippendorff")
    for data in _rating_sets(60):
        units = [col[~np.isnan(col)] for col in data.T]
        if sum(len(u) >= 2 for u in units) < 2:
            continue
        ours = krippendorff_alpha_interval(units)
        assert ours == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"),
                                     abs=1e-9)


def test_spearman_and_pair_statistics_match_scipy_and_numpy_on_random_sets():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for k in range(40):
        n = int(rng.integers(3, 200))
        sim = rng.integers(-10, 11, n).astype(float)
        human = sim * rng.uniform(-1, 1) + rng.normal(0, 3, n)
        if np.ptp(sim) and np.ptp(human):
            assert spearman(sim, human) == pytest.approx(scipy_stats.spearmanr(sim, human).statistic, abs=1e-12)
        assert mean_abs_diff(sim, human) == pytest.approx(np.abs(sim - human).mean())
        assert mean_diff(sim, human) == pytest.approx((sim - human).mean())


def test_undefined_resamples_are_counted_and_every_null_says_why():
    # three turns, two equal simulator changes: about a quarter of resamples have no spread on one side
    rows = [{"dialogue_id": 1, "turn_index": t, "rater": "ana", "delta": d, "simulator_delta": s}
            for t, d, s in ((2, 1.0, 3.0), (4, 2.0, 3.0), (6, 5.0, 7.0))]
    rep = agreement(rows, n_boot=1000)
    rho = rep["spearman"]
    assert rho["value"] == pytest.approx(0.8660, abs=1e-3)
    assert rho["n_boot"] == 1000 and 100 < rho["n_undefined"] < 400  # P(all three draws alike) ~ 1/3 + ...
    assert rep["mean_diff"]["n_undefined"] == 0
    alpha = rep["alpha"]
    assert alpha["value"] is None and alpha["why"].startswith("no turn has two or more ratings")
    # one turn rated twice: alpha is undefined (not 0.0), with its reason
    two = rows + [{"dialogue_id": 1, "turn_index": 2, "rater": "ben", "delta": 4.0, "simulator_delta": 3.0}]
    alpha = agreement(two, n_boot=50)["alpha"]
    assert alpha["value"] is None and alpha["n"] == 1 and "needs at least two" in alpha["why"]
    tiny = agreement(rows[:2], n_boot=50)["spearman"]
    assert tiny["value"] is None and "2 rated turn(s), fewer than 3" in tiny["why"] and tiny["ci_low"] is None
    flat = agreement([{**r, "simulator_delta": 1.0} for r in rows], n_boot=50)["spearman"]
    assert flat["value"] is None and "simulator's changes are all equal" in flat["why"]
    assert "all ratings spearman: 2 rated turn(s), fewer than 3" in format_report(agreement_report(rows[:2], n_boot=20))


def test_sign_agreement_counts_rounding_noise_as_no_change():
    sim, human = [0.0, 2.0, -1.0], [1.85e-17, 2.0, -3.0]
    assert sign_agreement(sim, human) == 1.0
    assert sign_agreement(sim, human, tol=0.0) == pytest.approx(2 / 3)
    assert sign_agreement([0.4, 1.0], [0.0, 1.0], tol=0.5) == 1.0


def test_a_constant_bias_leaves_spearman_at_one_but_not_the_differences_or_alpha():
    """The guide's example: a simulator always 10 points above people ranks turns exactly as they do."""
    rng = np.random.default_rng(5)
    people = rng.integers(-10, 11, 50).astype(float)
    rows = [{"dialogue_id": i, "turn_index": 2, "rater": "ana", "delta": p, "simulator_delta": p + 10}
            for i, p in enumerate(people)]
    rep = agreement(rows, n_boot=100)
    assert rep["spearman"]["value"] == pytest.approx(1.0)
    assert rep["mean_diff"]["value"] == pytest.approx(10.0) and rep["mean_abs_diff"]["value"] == pytest.approx(10.0)
    # as two raters of the same turns, the +10 rater disagrees: interval alpha sees the bias
    units = np.stack([people, people + 10], axis=1)
    assert krippendorff_alpha_interval(units) < 0.6


def test_cluster_bootstrap_resamples_whole_dialogues():
    from simulator.evaluation.agreement import bootstrap

    values = np.array([0.0, 0.0, 0.0, 10.0, 10.0, 10.0])
    clusters = [np.array([0, 1, 2]), np.array([3, 4, 5])]
    seen = []
    out = bootstrap(6, lambda idx: seen.append(len(idx)) or float(values[idx].mean()), n_boot=200, clusters=clusters)
    assert set(seen) == {6} and out["n_undefined"] == 0
    assert out["ci_low"] == 0.0 and out["ci_high"] == 10.0  # a dialogue's turns move together
    single = bootstrap(6, lambda idx: 1.0, clusters=clusters[:1])
    assert single["ci_low"] is None and "1 cluster(s)" in single["ci_why"]
