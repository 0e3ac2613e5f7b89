"""Agreement with published people (simulator.evaluation.human_agreement) over shadow judgements made by a
"shadow" job (trainer.benchmarking.shadow_jobs) on a human set written for the lab: a scripted simulator whose
changes follow the people's scores ranks turns as they do and one that ignores them does not, the intervals
cover the truth, the numbers are scipy's, two simulators get two tables over the same people, and a run killed
with SIGKILL resumes to the judgements an uninterrupted run stores."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import BACKENDS, wait_for
from scipy import stats
from sqlalchemy import select

from simulator.evaluation.human_agreement import human_agreement, load_set, units_of
from simulator.evaluation.human_corpora import import_corpus
from storage import make_store, read_scope
from storage.ratings import ShadowJudgement
from testkit.human_corpus import quality_dialogue
from testkit.scripted_shadow import follower_change
from trainer.benchmarking.shadow_jobs import run_shadow_foreground
from trainer.jobs import queue as job_queue

REPO = Path(__file__).resolve().parent.parent
FOLLOWER, IGNORER = "python:testkit.scripted_shadow:follower", "python:testkit.scripted_shadow:ignorer"


def corpus(n: int, seed: int = 0, **kw) -> str:
    rng = np.random.default_rng(seed)
    return "\n".join(json.dumps(quality_dialogue(k, rng, **kw)) for k in range(n))


def true_turn_spearman(draws: int = 100_000) -> float:
    """The follower's Spearman with the people's score over the process the corpus is drawn from."""
    rng, noise = np.random.default_rng(99), random.Random(99)
    q = rng.integers(1, 6, draws)
    score = np.clip(np.round(q + rng.normal(0, 0.6, draws)), 1, 5)
    sim = np.array([round(max(-10.0, min(10.0, follower_change(int(v), noise))), 3) for v in q])
    return float(stats.spearmanr(sim, score).statistic)


def shadows(store) -> dict[tuple, tuple]:
    with read_scope(store) as s:
        return {(r.dialogue_id, r.turn_index): (r.emotion_before, r.delta, r.emotion, r.fingerprint_hash)
                for r in s.scalars(select(ShadowJudgement))}


def test_a_simulator_that_follows_people_ranks_with_them_and_one_that_ignores_them_does_not(store):
    import_corpus(store, corpus(60), "jsonl", "lab-people")
    _, a = run_shadow_foreground(store, {"spec": FOLLOWER}, "human:lab-people", seed=1)
    _, b = run_shadow_foreground(store, {"spec": IGNORER}, "human:lab-people", seed=2)
    assert a["played"] == b["played"] == 300 and a["errors"] == 0
    report = human_agreement(store, "human:lab-people", n_boot=400, with_realism=False)
    assert set(report["by_fingerprint"]) == {a["fingerprint_hash"], b["fingerprint_hash"]}  # one table each
    follow, ignore = report["by_fingerprint"][a["fingerprint_hash"]], report["by_fingerprint"][b["fingerprint_hash"]]
    truth = true_turn_spearman()
    rho = follow["turns"]["spearman"]
    assert rho["n"] == 300 and rho["value"] > 0.6 and rho["ci_low"] <= truth <= rho["ci_high"], (rho, truth)
    low = ignore["turns"]["spearman"]
    assert abs(low["value"]) < 0.2 and low["ci_low"] <= 0.0 <= low["ci_high"]
    assert follow["dialogues"]["spearman"]["value"] > ignore["dialogues"]["spearman"]["value"]
    assert follow["dialogues"]["spearman"]["n"] == 60 and follow["turns"]["n_dialogues"] == 60
    assert set(follow["by_problem_type"]) == {"job crisis", "breakup with partner", "academic pressure"}
    assert sum(g["turns"]["spearman"]["n"] for g in follow["by_emotion_type"].values()) == 300
    # the numbers are scipy's on the units the report describes
    dialogues, sims = load_set(store, "human:lab-people")
    units = units_of(dialogues, sims[a["fingerprint_hash"]]["deltas"])
    assert rho["value"] == pytest.approx(stats.spearmanr([u["sim"] for u in units["turns"]],
                                                         [u["score"] for u in units["turns"]]).statistic)
    whole = units["dialogues"]
    assert follow["dialogues"]["spearman"]["value"] == pytest.approx(
        stats.spearmanr([u["sim"] for u in whole], [u["people"] for u in whole]).statistic)
    assert follow["dialogues"]["mean_diff"]["value"] == pytest.approx(
        np.mean([u["sim"] - u["people"] * 25 for u in whole]))


@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_a_rated_turn_takes_the_simulators_change_since_the_previous_rated_turn(store):
    import_corpus(store, corpus(3, rated_every=2, replies=4), "jsonl", "sparse")
    run_shadow_foreground(store, {"spec": FOLLOWER}, "human:sparse", seed=0)
    dialogues, sims = load_set(store, "human:sparse")
    (entry,) = sims.values()
    units = units_of(dialogues, entry["deltas"])
    assert len(units["turns"]) == 6  # two rated answers per dialogue, each after two replies
    first = dialogues[0]
    judged = [entry["deltas"][first["id"], i] for i, role, _ in first["turns"] if role == "user" and i > 0]
    assert [u["sim"] for u in units["turns"][:2]] == pytest.approx([judged[0] + judged[1], judged[2] + judged[3]])
    with pytest.raises(ValueError, match="no simulator has judged human:sparse under a fingerprint starting 'zz'"):
        human_agreement(store, "human:sparse", fingerprint="zz")


@pytest.mark.process
def test_a_killed_shadow_run_resumes_to_the_judgements_of_an_uninterrupted_one(db_url, tmp_path):
    store = make_store(db_url)
    import_corpus(store, corpus(4), "jsonl", "lab-people")
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "trainer", "shadow", "--set", "human:lab-people", "--simulator",
           "python:testkit.scripted_shadow:slow_follower", "--seed", "5", "--db", db_url, "--json"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for(lambda: proc.poll() is None and len(shadows(store)) >= 5, timeout=120, every=0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (job,) = job_queue.list_jobs(store, kind="shadow")
    assert job["status"] == "dead"
    before = shadows(store)
    assert 5 <= len(before) < 20
    out = subprocess.run([sys.executable, "-m", "trainer", "shadow", "--resume", str(job["id"]), "--db", db_url,
                          "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["played"] == 20 - len(before) and summary["left"] == 0
    after = shadows(store)
    assert all(after[k] == v for k, v in before.items())
    (job,) = job_queue.list_jobs(store, kind="shadow")
    assert job["status"] == "succeeded" and job["step"] == job["total_steps"] == 20
    # the same set in a second store, judged without interruption: the same judgements, turn by turn
    other = make_store(f"sqlite:///{tmp_path / 'other.db'}")
    import_corpus(other, corpus(4), "jsonl", "lab-people")
    run_shadow_foreground(other, {"spec": "python:testkit.scripted_shadow:slow_follower"}, "human:lab-people", 5)
    assert shadows(other) == after
    store.dispose()
    other.dispose()
