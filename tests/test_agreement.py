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
    # a unit with three raters and a unit with one (left out)
    assert krippendorff_alpha_interval([[1, 2, 3], [7]]) is not None


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
