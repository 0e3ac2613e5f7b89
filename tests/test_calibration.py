"""Calibration of a simulated user to people (simulator.fitting.monotone_map, `python -m simulator calibrate`):
a known distortion is recovered, cross-validation never puts one dialogue on both sides, the command fits on a
store's shadow judgements and saves a calibration that a simulator spec applies, and the calibrated simulator's
fingerprint differs from the uncalibrated one."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sim_profile

from simulator.fitting.monotone_map import cross_validate, fit_change_map, fit_map, fit_scale, grouped_folds
from simulator.user.calibration import Calibration, load_calibration, save_calibration
from simulator.evaluation.human_agreement import human_agreement, load_set, units_of
from simulator.evaluation.human_corpora import import_corpus
from simulator.user.spec import SimulatorSpec
from storage import session_scope
from storage.ratings import ShadowJudgement
from testkit.human_corpus import quality_dialogue

REPO = Path(__file__).resolve().parent.parent


def distorted(true_change: float) -> float:
    """A harsh, compressed simulator: people's +10 reads as -1, their -10 as -11 (half the scale, 6 points down)."""
    return 0.5 * true_change - 6.0


def spans(n: int, seed: int) -> tuple[list[list[float]], list[float], list[int]]:
    """Rated spans of 1-3 replies, each reply's true change on the people's scale, the person's mapped score the
    span's sum; the simulator reports the distorted changes. Returns (simulator spans, targets, dialogue)."""
    rng = np.random.default_rng(seed)
    sims, targets, dialogue = [], [], []
    for k in range(n):
        true = rng.choice([-10.0, -5.0, 0.0, 5.0, 10.0], size=int(rng.integers(1, 4)))
        sims.append([distorted(t) for t in true])
        targets.append(float(true.sum()))
        dialogue.append(k // 4)
    return sims, targets, dialogue


def test_the_fit_recovers_a_known_distortion():
    sims, targets, _ = spans(400, seed=0)
    x, y = fit_map(sims, targets)
    cal = Calibration("recovered", x, y)
    for true in (-10.0, -5.0, 0.0, 5.0, 10.0):
        assert cal.apply(distorted(true)) == pytest.approx(true, abs=1e-6)
    assert all(b >= a for a, b in zip(y, y[1:]))  # monotone
    assert cal.apply(distorted(-10.0) - 50) == pytest.approx(-10.0, abs=1e-6)  # flat beyond the ends


def test_a_decreasing_truth_is_fitted_monotone_not_reversed():
    """A simulator whose changes run against people gets the best non-decreasing map: a flat one."""
    rng = np.random.default_rng(1)
    true = rng.choice([-10.0, 0.0, 10.0], size=300)
    x, y = fit_map([[-t] for t in true], list(true))
    assert y[0] == pytest.approx(y[-1], abs=1e-6) and y[0] == pytest.approx(float(true.mean()), abs=1e-6)


def test_the_scale_map_recovers_a_known_linear_distortion():
    sims, targets, _ = spans(400, seed=4)
    cal = Calibration("scaled", *fit_scale(sims, targets))
    for true in (-10.0, -5.0, 0.0, 5.0, 10.0):
        assert cal.apply(distorted(true)) == pytest.approx(true, abs=1e-6)


def test_the_scale_map_keeps_the_ranking_where_the_predicting_map_flattens():
    """A simulator whose changes carry no signal about the people: least squares flattens its map (every reply
    then scores alike), the scale map keeps its ranking and gives its span sums the people's mean and spread."""
    rng = np.random.default_rng(5)
    sims = [list(rng.normal(-8.0, 3.0, size=int(rng.integers(1, 4)))) for _ in range(500)]
    targets = list(rng.choice([-10.0, -5.0, 0.0, 5.0, 10.0], size=500))
    _, y = fit_map(sims, targets)
    assert y[-1] - y[0] < 2.0  # nearly flat over the simulator's whole range
    scaled = Calibration("scaled", *fit_scale(sims, targets))
    assert scaled.apply(-4.0) - scaled.apply(-12.0) > 4.0  # still increasing everywhere
    sums = np.array([sum(scaled.apply(d) for d in s) for s in sims])
    assert sums.mean() == pytest.approx(np.mean(targets), abs=1e-9)
    assert sums.std() == pytest.approx(np.std(targets), rel=1e-9)
    with pytest.raises(ValueError, match="do not vary"):
        fit_scale([[-3.0], [-3.0, -3.0], [-3.0]], [0.0, 5.0, -5.0])
    with pytest.raises(ValueError, match="--map: must be one of predict, scale"):
        fit_change_map(sims, targets, "isotonic")


def test_cross_validation_never_puts_one_dialogue_on_both_sides():
    sims, targets, dialogue = spans(300, seed=2)
    units = {"turns": [{"dialogue": d, "score": t / 5.0 + 3.0, "mid": 3.0, "sim": sum(s), "parts": s}
                       for s, t, d in zip(sims, targets, dialogue)], "dialogues": []}
    held = cross_validate(units, turn_points=5.0, k=5, seed=3)
    seen = []
    for fold in held["folds"]:
        assert not set(fold["fitted_on"]) & set(fold["held_out"])
        assert set(fold["fitted_on"]) | set(fold["held_out"]) == set(dialogue)
        seen += fold["held_out"]
    assert sorted(seen) == sorted(set(dialogue))  # each dialogue held out exactly once
    assert len(held["turns"]) == len(units["turns"])
    # out of fold, the recovered map brings every held-out span onto the people's scale
    assert max(abs(u["sim"] - (u["score"] - 3.0) * 5.0) for u in held["turns"]) < 1e-6
    with pytest.raises(ValueError, match="folds"):
        grouped_folds(3, 5, 0)


def corpus(n: int) -> str:
    rng = np.random.default_rng(0)
    return "\n".join(json.dumps(quality_dialogue(k, rng)) for k in range(n))


def judge_with_distortion(store, set_spec: str, fp_hash: str) -> None:
    """Shadow judgements of a scripted simulator: each reply's change the distortion of the person's next score."""
    dialogues, _ = load_set(store, set_spec)
    with session_scope(store) as s:
        for d in dialogues:
            turns, previous = d["turns"], None
            for pos, (index, role, _) in enumerate(turns):
                if role == "user" and previous == "assistant":
                    later = next((sc for _, r, sc in turns[pos:] if r == "user" and sc is not None), 3.0)
                    s.add(ShadowJudgement(dialogue_id=d["id"], turn_index=index, fingerprint={"backend": "scripted"},
                                          fingerprint_hash=fp_hash, delta=distorted((later - 3.0) * 5.0)))
                previous = role


@pytest.mark.process
def test_the_calibrate_command_fits_saves_and_improves_the_held_out_difference(store, db_url, tmp_path):
    import_corpus(store, corpus(40), "jsonl", "cal-people")
    judge_with_distortion(store, "human:cal-people", "feedc0de" * 8)
    env = {"PATH": "/usr/bin:/bin", "RLVER_LAB_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "simulator", "calibrate", "--set", "human:cal-people",
                          "--fingerprint", "feedc0de", "--name", "scripted-cal", "--db", db_url, "--json",
                          "--n-boot", "200"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    before, after = result["before"]["turns"], result["after"]["turns"]
    assert before["mean_diff"]["value"] < -4.0  # the distortion's harshness, seen by the agreement report
    assert abs(after["mean_diff"]["value"]) < 0.5 < abs(before["mean_diff"]["value"])
    assert after["spearman"]["n"] == before["spearman"]["n"] == result["n_turns"] > 100
    saved = load_calibration("scripted-cal", tmp_path)
    assert saved.simulator_fingerprint_hash == "feedc0de" * 8 and saved.hash() == result["hash"]
    assert saved.data["set"] == "human:cal-people" and saved.report["folds"] == 5
    for true in (-10.0, 0.0, 10.0):
        assert saved.apply(distorted(true)) == pytest.approx(true, abs=0.5)
    # the report of the existing agreement command is unchanged by a calibration (the judgements are as stored)
    report = human_agreement(store, "human:cal-people", n_boot=50, with_realism=False)
    assert report["by_fingerprint"]["feedc0de" * 8]["turns"]["mean_diff"]["value"] == pytest.approx(
        before["mean_diff"]["value"])
    def again(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "simulator", "calibrate", "--set", "human:cal-people", *extra,
                               "--db", db_url, "--n-boot", "50"], capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=300)

    bad = again("--simulator", "offline", "--name", "other-cal")
    assert bad.returncode == 1 and "has not judged human:cal-people" in bad.stderr, bad.stderr
    bad = again("--simulator", "offline", "--name", "Bad Name")
    assert bad.returncode == 1 and "--name: 'Bad Name' is not a name" in bad.stderr, bad.stderr
    taken = again("--fingerprint", "feedc0de", "--name", "scripted-cal")  # a saved calibration is not replaced
    assert taken.returncode == 1 and "--name: a calibration named 'scripted-cal' already exists" in taken.stderr
    assert load_calibration("scripted-cal", tmp_path).hash() == result["hash"]
    assert again("--fingerprint", "feedc0de", "--name", "scripted-cal", "--replace").returncode == 0


def test_a_bad_calibration_is_named_in_the_spec_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path))
    assert "no calibration named" in SimulatorSpec("offline", calibration="missing").errors()["calibration"]
    assert "is not a name" in SimulatorSpec("offline", calibration="../x").errors()["calibration"]
    assert "outside code" in SimulatorSpec("python:testkit.scripted_shadow:follower",
                                           calibration="missing").errors()["calibration"]
    with pytest.raises(ValueError, match="knots"):
        Calibration.from_dict({"name": "x", "knots_x": [1.0, 0.0], "knots_y": [0.0, 1.0]})


@pytest.mark.model
def test_a_calibrated_simulator_maps_each_change_and_has_its_own_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path))
    save_calibration(Calibration("halved", [-20.0, 20.0], [-8.0, 12.0]), tmp_path)  # f(d) = 0.5 d + 2
    replies = ["That sounds exhausting; what happened after the meeting?", "ok", "You did what you could."]

    def play(spec: SimulatorSpec):
        agent = spec.factory()(make_sim_profile(), 7)

        async def go():
            await agent.opening()
            return [await agent.respond([], r) for r in replies]
        return agent, asyncio.run(go())

    plain_agent, plain = play(SimulatorSpec("offline", rules="standard"))
    cal_agent, calibrated = play(SimulatorSpec("offline", rules="standard", calibration="halved"))
    assert plain_agent.fingerprint_hash() != cal_agent.fingerprint_hash()
    assert cal_agent.fingerprint()["calibration"]["name"] == "halved"
    assert calibrated[0].inner["uncalibrated_change"] == plain[0].inner["raw_change"]  # the same first judgement
    for c in calibrated:
        raw = c.inner["uncalibrated_change"]
        assert c.inner["raw_change"] == pytest.approx(0.5 * raw + 2.0)


@pytest.mark.model
def test_training_and_the_benchmark_take_a_calibration_and_name_a_bad_one(store, tiny_model_dir, tmp_path,
                                                                          monkeypatch):
    """A calibration is a setting of every run that names a simulator: a bad one is refused naming the field, a
    benchmark under one records a fingerprint that says so (its scores never mix with the uncalibrated ones)."""
    from trainer.benchmarking import benchmark
    from trainer.benchmarking.eval_runs import get_eval_run
    from trainer.config import TrainConfig

    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path))
    assert "no calibration named 'missing'" in TrainConfig(calibration="missing").errors()["calibration"]
    assert "no calibration named 'missing'" in benchmark.BenchmarkConfig(calibration="missing").errors()["calibration"]
    save_calibration(Calibration("lenient", [-1000.0, 1000.0], [-995.0, 1005.0]), tmp_path)  # f(d) = d + 5
    assert "calibration" not in TrainConfig(calibration="lenient").errors()
    runs = {}
    for cal in ("", "lenient"):
        config = benchmark.BenchmarkConfig(policy=str(tiny_model_dir), profiles="builtin:heldout", limit=2,
                                           max_new_tokens=8, temperature=0.0, calibration=cal)
        runs[cal] = get_eval_run(store, benchmark.run_benchmark(store, config, log=lambda _m: None).eval_run_id)
    assert runs[""]["fingerprint_hash"] != runs["lenient"]["fingerprint_hash"]
    assert runs["lenient"]["simulator_fingerprint"]["calibration"]["name"] == "lenient"
    assert "calibration" not in runs[""]["simulator_fingerprint"]
    assert runs["lenient"]["score"] > runs[""]["score"]  # the same replies, each judged 5 points kinder


def test_an_llm_behind_an_endpoint_is_shadowed_calibrated_and_applied(store, db_url, tmp_path, monkeypatch):
    """Level one for a simulator that is an LLM behind an OpenAI-protocol endpoint (a real HTTP server on
    127.0.0.1 with scripted answers): the shadow run judges every reply through it, calibrate fits on those
    judgements by naming the same endpoint, and the calibrated endpoint simulator carries the calibration in its
    fingerprint."""
    from testkit.scripted_server import start_server
    from trainer.benchmarking.shadow_jobs import run_shadow_foreground

    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path))
    import_corpus(store, corpus(12), "jsonl", "endpoint-people")
    with start_server() as server:
        settings = {"spec": "openai:scripted", "base_url": server.base_url, "rules": "standard"}
        _, summary = run_shadow_foreground(store, settings, "human:endpoint-people", 0)
        assert summary["errors"] == 0 and summary["played"] == summary["turns"] == 60 and not summary["left"]
        env = {"PATH": "/usr/bin:/bin", "RLVER_LAB_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-m", "simulator", "calibrate", "--set", "human:endpoint-people",
                              "--simulator", "openai:scripted", "--base-url", server.base_url, "--rules", "standard",
                              "--name", "endpoint-cal", "--db", db_url, "--json", "--n-boot", "100"],
                             capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["n_turns"] == 60 and abs(result["after"]["turns"]["mean_diff"]["value"]) < 3.0
        plain = SimulatorSpec("openai:scripted", base_url=server.base_url, rules="standard").factory()(
            make_sim_profile(), 0)
        calibrated = SimulatorSpec("openai:scripted", base_url=server.base_url, rules="standard",
                                   calibration="endpoint-cal").factory()(make_sim_profile(), 0)
    saved = load_calibration("endpoint-cal", tmp_path)
    assert saved.simulator_fingerprint_hash == summary["fingerprint_hash"]  # fitted on the endpoint's judgements
    assert saved.data["set"] == "human:endpoint-people"
    assert plain.fingerprint()["model"] == "scripted" and "calibration" not in plain.fingerprint()
    assert calibrated.fingerprint()["calibration"]["name"] == "endpoint-cal"
    assert calibrated.fingerprint_hash() != plain.fingerprint_hash()
