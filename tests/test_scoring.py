"""Sentient score, success/failure counts, half-up rounding and the bootstrap interval."""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from simulator.evaluation.scoring import bootstrap_interval, format_summary, round_half_up, sentient_summary


@pytest.mark.parametrize("x,nd,want", [(68.15, 1, 68.2), (19.05, 1, 19.1), (0.05, 1, 0.1), (68.14999, 1, 68.1),
                                       (-2.25, 1, -2.3), (2.675, 2, 2.68), (40, 1, 40.0), (Decimal("1.25"), 1, 1.3)])
def test_round_half_up(x, nd, want):
    assert round_half_up(x, nd) == want


def test_float_repr_trap():
    assert round(2.675, 2) == 2.67  # what Python's round gives on the binary float
    assert round_half_up(sum([68.15]) / 1) == 68.2
    # a mean computed in floats may land a hair below .x5; the summary computes it in decimal
    values = [20.3, 79.9, 54.7, 28.8, 9.2, 79.8]
    assert sum(values) / len(values) == 45.449999999999996
    assert sentient_summary(values).score == 45.5
    assert sentient_summary([68, 68.3]).score == 68.2  # 68.15 exactly


def test_counts_and_thresholds():
    s = sentient_summary([100, 99.9, 10, 9.99, 0, 100, 50])
    assert (s.success, s.failure, s.n, s.n_errors) == (2, 2, 7, 0)
    assert s.mean == pytest.approx(sum([100, 99.9, 10, 9.99, 0, 100, 50]) / 7)
    assert s.ci_low <= s.score <= s.ci_high


def test_errors_count_in_n_as_failures():
    s = sentient_summary([100, None, 60, None])
    assert (s.n, s.n_errors, s.failure, s.success) == (4, 2, 2, 1)
    assert s.score == 40.0
    assert "errors 2" in format_summary(s)
    assert sentient_summary([100, None], error_emotion=50).score == 75.0


def test_bootstrap_is_deterministic_and_sensible():
    rng = np.random.default_rng(1)
    values = list(rng.uniform(0, 100, size=200))
    a = bootstrap_interval(values, seed=3)
    assert a == bootstrap_interval(values, seed=3)
    assert a != bootstrap_interval(values, seed=4)
    mean = float(np.mean(values))
    se = float(np.std(values, ddof=1) / np.sqrt(len(values)))
    assert a[0] < mean < a[1]
    assert a[1] - a[0] == pytest.approx(2 * 1.96 * se, rel=0.15)  # close to the normal interval
    assert bootstrap_interval([42.0]) == (42.0, 42.0)
    assert sentient_summary([30, 30, 30]).ci_low == sentient_summary([30, 30, 30]).ci_high == 30.0


def test_bad_input():
    with pytest.raises(ValueError, match="no dialogues"):
        sentient_summary([])
    with pytest.raises(ValueError, match="numbers or None"):
        sentient_summary([50, "60"])
    with pytest.raises(ValueError, match="numbers or None"):
        sentient_summary([float("nan")])


def test_format_summary():
    line = format_summary(sentient_summary([100, 0, 50, 70]), "m")
    assert line.startswith("m: score 55.0  success 1 (25%)  failure 1 (25%)  n 4  95% CI [")


@pytest.mark.parametrize("name,want", [("gpt-4.1", (68.2, 35, 13)), ("qwen2.5-72b", (19.1, 4, 70))])
def test_published_leaderboard(shared_data: Path, name: str, want):
    path = shared_data / "sage" / f"{name}_result.jsonl"
    finals = [json.loads(line)["emo_point"] for line in path.read_text(encoding="utf-8").splitlines()]
    s = sentient_summary(finals)
    assert (s.score, s.success, s.failure, s.n) == (*want, 100)
    assert s.ci_low < s.score < s.ci_high
