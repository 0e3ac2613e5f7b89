"""Interrupted equals uninterrupted: a benchmark or comparison killed with SIGKILL at a chosen point and
resumed ends with the same dialogues (persona, seed, final emotion, every reply) and the same score as a run
that was never interrupted; a run is a job (its owner lock makes a second process refuse, naming the pid).

Real processes (`python -m trainer benchmark|compare`), the tiny random model from testkit and a slow
simulated user (a python: user file, 0.25 s a reply, whose emotion depends on the reply and on the
dialogue's seed), so a kill lands where the test waits for it: after N finished dialogues in the store.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    N_PERSONAS,
    SEEDED_USER,
    bench_args,
    compare_args,
    finished,
    pair_results,
    results,
    run_in_process,
    statuses,
    wait_for,
)
from sqlalchemy import select

from storage import Dialogue, EvalRun, make_store, read_scope
from trainer.benchmarking import compare, compare_runs, eval_runs
from trainer.benchmarking.benchmark import BenchmarkInputError
from trainer.jobs import queue as job_queue
from trainer.rollout.types import dialogue_seed

REPO = Path(__file__).resolve().parent.parent
@pytest.fixture(scope="module")
def user_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("user") / "seeded_user.py"
    path.write_text(SEEDED_USER)
    return f"python:{path}:make_user"


def trainer_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainer", *args]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m trainer ARGS` to its end, in this process; the runs to be killed are real processes."""
    return run_in_process("trainer", *args)


def start_cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(trainer_cmd(*args), cwd=REPO, text=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))


def kill(p: subprocess.Popen) -> None:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


@pytest.fixture(scope="module")
def reference(tiny_model_dir: Path, user_spec: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One uninterrupted benchmark run of the settings every kill test uses."""
    db_url = f"sqlite:///{tmp_path_factory.mktemp('ref') / 'lab.db'}"
    r = run_cli(*bench_args(tiny_model_dir, user_spec, db_url))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    return {"score": out["score"], "results": results(db_url, out["eval_run_id"])}


KILL_POINTS = {
    "between dialogues": lambda db: finished(db) >= 1,
    "mid-dialogue": lambda db: finished(db) >= 2 and any(st == "running" and n >= 1 for _, st, n in statuses(db)),
    "during the last dialogue": lambda db: finished(db) == N_PERSONAS - 1,
}


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_benchmark_resumes_to_the_uninterrupted_result(point, reference, tiny_model_dir, user_spec,
                                                                 db_url):
    p = start_cli(*bench_args(tiny_model_dir, user_spec, db_url))
    try:
        wait_for(lambda: KILL_POINTS[point](db_url), timeout=300, every=0.02)
    finally:
        kill(p)
    store = make_store(db_url)
    try:
        [job] = job_queue.list_jobs(store, kind="benchmark")
        assert job["status"] == "dead" and job["stored_status"] == "running"  # shown as dead, not "running"
        assert eval_runs.running_eval_run_ids(store) == []  # the Benchmark view's "Running" leaves it out
    finally:
        store.dispose()
    r = run_cli("benchmark", "--resume", "1", "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["eval_run_id"] == 1 and out["n"] == N_PERSONAS
    assert results(db_url, 1) == reference["results"]  # persona, seed, final emotion, every reply
    assert out["score"] == reference["score"]
    scored = [pid for pid, st, _ in statuses(db_url, 1) if st == "finished"]
    assert len(scored) == len(set(scored)) == N_PERSONAS  # none twice


@pytest.mark.process
def test_a_second_process_is_refused_while_the_owner_lives(tiny_model_dir, user_spec, db_url):
    p = start_cli(*bench_args(tiny_model_dir, user_spec, db_url))
    try:
        wait_for(lambda: statuses(db_url), timeout=300, every=0.05)  # the first one plays
        r = run_cli("benchmark", "--resume", "1", "--db", db_url)
        assert r.returncode == 2 and f"live process {p.pid}" in r.stderr, r.stderr[-2000:]
    finally:
        kill(p)
    assert len(statuses(db_url, 1)) <= N_PERSONAS  # nobody else played into the run


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from testkit.tiny_model import build_tiny_model

    path = tmp_path_factory.mktemp("other") / "model"
    build_tiny_model(path, seed=7)
    return path


@pytest.mark.slow
@pytest.mark.process
def test_a_comparison_killed_during_b_resumes_playing_only_what_is_missing(tiny_model_dir, other_model, user_spec,
                                                                             tmp_path):
    ref_db = f"sqlite:///{tmp_path / 'ref.db'}"
    r = run_cli(*compare_args(tiny_model_dir, other_model, user_spec, ref_db))
    assert r.returncode == 0, r.stderr[-3000:]
    ref_summary = json.loads(r.stdout.splitlines()[-1])

    db_url = f"sqlite:///{tmp_path / 'lab.db'}"

    def b_playing() -> bool:
        """B's dialogues (played together: the comparison's "rounds" schedule) have replies, none has ended."""
        store = make_store(db_url)
        try:
            with read_scope(store) as s:
                b = s.scalars(select(EvalRun.id).where(EvalRun.name.like("% B seed 5"))).first()
            rows = statuses(db_url, b) if b is not None else []
            return any(n >= 1 for _, _, n in rows) and all(st == "running" for _, st, _ in rows)
        finally:
            store.dispose()

    p = start_cli(*compare_args(tiny_model_dir, other_model, user_spec, db_url))
    try:
        wait_for(b_playing, timeout=400, every=0.02)
    finally:
        kill(p)
    store = make_store(db_url)
    try:
        stored = compare.get_comparison(store, 1)
        assert len(stored["eval_runs"]["a"]) == 1 and stored["eval_runs"]["b"] == []  # A linked once it finished
        a_run = stored["eval_runs"]["a"][0]
        assert compare_runs.comparison_job(store, 1)["status"] == "dead"
        n_dialogues_a = len(statuses(db_url, a_run))
    finally:
        store.dispose()

    r = run_cli("compare", "--resume", "1", "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.splitlines()[-1])
    store = make_store(db_url)
    try:
        stored = compare.get_comparison(store, 1)
        with read_scope(store) as s:
            run_ids = list(s.scalars(select(EvalRun.id).order_by(EvalRun.id)))
    finally:
        store.dispose()
    assert stored["status"] == "succeeded" and stored["eval_runs"]["a"] == [a_run]
    assert sorted(run_ids) == sorted([a_run, *stored["eval_runs"]["b"]])  # no orphaned eval run
    assert len(statuses(db_url, a_run)) == n_dialogues_a  # A was not played again
    assert pair_results(db_url, 1) == pair_results(ref_db, 1)
    assert {k: summary[k] for k in ("wins", "ties", "losses", "mean_diff", "n")} == \
        {k: ref_summary[k] for k in ("wins", "ties", "losses", "mean_diff", "n")}


def test_every_input_is_checked_before_a_dialogue_is_played(store, tiny_model_dir, tmp_path):
    """A missing B and a bad persona file are both named at once, and nothing is recorded or played."""
    bad = tmp_path / "profiles.jsonl"
    bad.write_text("{oops\n")
    config = compare.CompareConfig(a=str(tiny_model_dir), b=str(tmp_path / "no_such_model"), profiles=str(bad))
    with pytest.raises(BenchmarkInputError) as err:
        compare_runs.run_comparison(store, config, log=lambda _m: None)
    assert "b: model folder" in str(err.value) and "not found" in str(err.value)
    assert "profiles:" in str(err.value) and "a:" not in str(err.value)
    assert compare.list_comparisons(store) == [] and job_queue.list_jobs(store) == []
    with read_scope(store) as s:
        assert s.scalars(select(Dialogue)).first() is None


def test_a_dialogue_seed_depends_on_who_plays_not_where():
    seeds = {(run, persona, k): dialogue_seed(run, persona, k) for run in (0, 1) for persona in ("maya", "li")
             for k in (0, 1)}
    assert len(set(seeds.values())) == len(seeds)  # every identity its own seed
    assert all(0 <= v < 2 ** 31 for v in seeds.values())
    assert dialogue_seed(0, "maya", 1) == seeds[(0, "maya", 1)]  # a function of the identity alone


@pytest.mark.process
def test_the_benchmark_views_resume_button_finishes_a_killed_run_as_if_never_stopped(reference, tiny_model_dir,
                                                                                      user_spec, db_url):
    """The Benchmark view's Resume (app.services.benchmark_form.resume_job): refused while the owner lives,
    naming it; after a kill -9 the job resumes in the background and ends with the uninterrupted dialogues."""
    from app.services import benchmark_form

    p = start_cli(*bench_args(tiny_model_dir, user_spec, db_url))
    store = make_store(db_url)
    try:
        wait_for(lambda: finished(db_url) >= 1, timeout=300, every=0.02)
        refused = benchmark_form.resume_job(store, db_url, 1)
        assert refused == f"Job #1 is running (process {p.pid}): only an interrupted, failed, cancelled or dead job " \
                          "resumes.", refused
        kill(p)
        said = benchmark_form.resume_job(store, db_url, 1)
        assert said.startswith("Resumed job #1"), said
        done = wait_for(lambda: (d := job_queue.job_detail(store, 1)) and d["status"] in
                        ("succeeded", "failed", "dead", "cancelled") and d, timeout=600, every=0.5)
        assert done["status"] == "succeeded", done["log_tail"][-2000:]
        assert results(db_url, 1) == reference["results"]
        assert "only an interrupted, failed, cancelled or dead job" in benchmark_form.resume_job(store, db_url, 1)
    finally:
        if p.poll() is None:
            kill(p)
        store.dispose()
