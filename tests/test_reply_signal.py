"""The second level of a calibration: a per-reply signal fitted to people ranks replies the simulator cannot."""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from conftest import make_sim_profile

from simulator.fitting.monotone_map import cross_validate
from simulator.evaluation.human_agreement import load_set, tables, units_of
from simulator.evaluation.human_corpora import import_corpus
from simulator.fitting.reply_signal_fit import cross_validate_signal, fit_two_levels, reply_feature_rows, ridge
from simulator.user.calibration import Calibration, load_calibration, save_calibration
from simulator.user.reply_signal import DIM, ReplySignal, reply_features
from simulator.user.spec import SimulatorSpec
from storage import session_scope
from storage.ratings import ShadowJudgement

# replies a person rates high and low; the scripted simulator below cannot tell them apart
WARM = ["That sounds really painful, and it makes sense that you feel this way.",
        "I'm so sorry you are carrying this; it sounds exhausting.",
        "It must hurt to be treated like that by someone you trusted.",
        "You have been dealing with a lot, and your feelings are understandable.",
        "I can hear how lonely this has been for you."]
COLD = ["Just get over it, everyone has problems.", "Have you tried not thinking about it?",
        "That is not a big deal, move on.", "You should simply find a new job.",
        "Well, that's life. What else is new?"]


def dialogue(k: int, rng: np.random.Generator) -> dict:
    turns = [{"role": "user", "text": f"I had an awful week at work, number {k}."}]
    for i in range(4):
        warm = bool(rng.integers(0, 2))
        pool = WARM if warm else COLD
        turns.append({"role": "policy", "text": pool[int(rng.integers(0, len(pool)))]})
        score = int(np.clip((5 if warm else 1) + rng.integers(-1, 2), 1, 5))
        turns.append({"role": "user", "text": f"Then my manager said something else ({k}.{i}).", "score": score})
    return {"id": f"w{k}", "score_scale": [1, 5], "turns": turns}


def judge_blind(store, set_spec: str, fp_hash: str, seed: int = 0) -> None:
    """Shadow judgements of a simulator blind to the replies: seeded noise around a harsh mean."""
    rng = np.random.default_rng(seed)
    dialogues, _ = load_set(store, set_spec)
    with session_scope(store) as s:
        for d in dialogues:
            previous = None
            for index, role, _ in d["turns"]:
                if role == "user" and previous == "assistant":
                    s.add(ShadowJudgement(dialogue_id=d["id"], turn_index=index, fingerprint={"backend": "blind"},
                                          fingerprint_hash=fp_hash, delta=float(rng.normal(-8.0, 2.0))))
                previous = role


@pytest.mark.model
def test_the_reply_signal_ranks_replies_on_held_out_dialogues_where_the_map_cannot(store):
    rng = np.random.default_rng(3)
    import_corpus(store, "\n".join(json.dumps(dialogue(k, rng)) for k in range(30)), "jsonl", "warmth")
    judge_blind(store, "human:warmth", "b1" * 32)
    dialogues, sims = load_set(store, "human:warmth")
    units = units_of(dialogues, sims["b1" * 32]["deltas"])
    assert len(units["turns"]) == 120 and all(len(u["keys"]) == 1 for u in units["turns"])
    rows = reply_feature_rows(store, units)
    assert len(rows) == 120 and all(r.shape == (3 * DIM + 1,) for r in rows.values())
    mapped = tables(cross_validate(units, 5.0, k=5, seed=0), 100, 0, 5.0, 25.0)["turns"]
    signal = tables(cross_validate_signal(units, rows, 5.0, k=5, seed=0), 100, 0, 5.0, 25.0)["turns"]
    assert abs(mapped["spearman"]["value"] or 0.0) < 0.3  # a monotone map of blind judgements ranks nothing
    assert signal["spearman"]["value"] > 0.7 and signal["spearman"]["ci_low"] > 0.5
    assert abs(signal["mean_diff"]["value"]) < 1.5  # the harsh mean is gone too
    cal, fitted = fit_two_levels(units["turns"], rows, 5.0, seed=0)
    warm, cold = reply_features(["I had an awful week."], WARM[0]), reply_features(["I had an awful week."], COLD[0])
    assert fitted.points(warm) > fitted.points(cold) + 5.0


def test_ridge_recovers_a_linear_truth_and_leaves_the_constant_unpenalised():
    rng = np.random.default_rng(0)
    x = np.c_[rng.normal(size=(400, 3)), np.ones(400)]
    y = x @ np.array([2.0, -1.0, 0.0, 7.0]) + rng.normal(0, 0.1, 400)
    assert ridge(x, y, 0.01) == pytest.approx([2.0, -1.0, 0.0, 7.0], abs=0.05)
    heavy = ridge(x, y, 1e6)
    assert np.abs(heavy[:3]).max() < 0.05 and heavy[3] == pytest.approx(y.mean(), abs=0.3)


def test_a_reply_signal_is_saved_read_and_changes_the_fingerprint(tmp_path):
    weights = [0.0] * (3 * DIM) + [1.5]
    plain = Calibration("l1", [-10.0, 10.0], [-5.0, 5.0])
    with_signal = Calibration("l1", [-10.0, 10.0], [-5.0, 5.0], reply_signal=ReplySignal(weights, alpha=30.0))
    assert plain.hash() != with_signal.hash()
    save_calibration(with_signal, tmp_path)
    again = load_calibration("l1", tmp_path)
    assert again.reply_signal == with_signal.reply_signal and again.hash() == with_signal.hash()
    with pytest.raises(ValueError, match="reply_signal.weights"):
        ReplySignal([0.0, 1.0])
    with pytest.raises(ValueError, match="reply_signal.features"):
        ReplySignal(weights, features="tfidf-v0")


@pytest.mark.model
def test_a_calibrated_user_adds_the_reply_signal_to_the_mapped_change(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path))
    weights = np.zeros(3 * DIM + 1)
    weights[DIM:2 * DIM] = reply_features([], WARM[0])[DIM:2 * DIM] * 10.0  # points for replies like WARM[0]
    save_calibration(Calibration("warmth", [-20.0, 20.0], [-10.0, 10.0],
                                 reply_signal=ReplySignal([float(w) for w in weights])), tmp_path)
    agent = SimulatorSpec("offline", rules="standard", calibration="warmth").factory()(make_sim_profile(), 7)

    async def go():
        await agent.opening()
        return [await agent.respond([], r) for r in (WARM[0], COLD[0])]

    warm, cold = asyncio.run(go())
    for turn in (warm, cold):
        parts = turn.inner["calibration"]
        assert parts["mapped"] == pytest.approx(0.5 * turn.inner["uncalibrated_change"], abs=1e-3)
        assert turn.inner["raw_change"] == pytest.approx(parts["mapped"] + parts["reply_signal"], abs=2e-3)
    assert warm.inner["calibration"]["reply_signal"] == pytest.approx(10.0, abs=0.01)  # unit vector . itself x 10
    assert cold.inner["calibration"]["reply_signal"] < 5.0


def test_fitted_within_dialogues_the_signal_learns_the_reply_not_the_person():
    """People who differ in level (a feature of who they are, constant over their conversation) and rate each
    reply by its quality (a feature of the reply): fitted pooled, the signal pays for the person's level; fitted
    within dialogues, only for the reply's quality."""
    rng = np.random.default_rng(11)
    turns, rows = [], {}
    for pos in range(80):
        level = float(rng.normal(0.0, 2.0))
        for i in range(4):
            quality = float(rng.normal(0.0, 1.0))
            row = np.zeros(3 * DIM + 1)
            row[0], row[DIM], row[-1] = level, quality, 1.0  # "said so far" block, "reply" block, constant
            rows[(pos, i)] = row
            turns.append({"dialogue": pos, "keys": [(pos, i)], "parts": [float(rng.normal(-8.0, 2.0))],
                          "score": 3.0 + 0.4 * (level + quality), "mid": 3.0})
    _, pooled = fit_two_levels(turns, rows, 5.0, seed=0)
    _, within = fit_two_levels(turns, rows, 5.0, seed=0, within=True)
    assert pooled.weights[0] > 1.0 and pooled.weights[DIM] > 1.0
    assert within.weights[0] == pytest.approx(0.0, abs=1e-9) and within.weights[DIM] > 1.0
