"""Jobs on a Ray cluster (`--jobs ray`): a local Ray head started once for the module (`ray start --head`, the
dashboard serving the Jobs API, stopped at the end), the suite's PostgreSQL and a shared folder.

A benchmark, a comparison and a training job (`python -m trainer --jobs ADDRESS train`) submitted through Ray
give the same dialogues (persona, seed, final emotion, every reply) as local runs; Cancel stops the Ray job; the
job's process killed with SIGKILL shows dead once its heartbeat is late and Ray says its job ended, and its
resume (again through Ray) ends with the uninterrupted result. Without Ray: a SQLite store with `--jobs ray` is
refused in one line, and two processes (two hosts) never both claim a job.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ray_nodes
from helpers import (
    N_PERSONAS,
    SEEDED_USER,
    bench_args,
    compare_args,
    finished,
    pair_results,
    ray_backend_store,
    results,
    run_in_process,
    tiny_train_config,
    wait_for,
)
from sqlalchemy import select

from app.services.training import job_summary_md
from storage import Dialogue, Job, Turn, make_store, read_scope, session_scope, store_id
from testkit.cluster.ray_nodes import free_port
from trainer.benchmarking.benchmark import start_benchmark_job
from trainer.benchmarking.compare import CompareConfig
from trainer.benchmarking.compare_runs import start_comparison_job
from trainer.jobs import backend, ray_jobs
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.context import JobContext

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ray_head(postgres_server):
    """A one-node Ray cluster on this machine (testkit.cluster.ray_nodes); its Jobs API address
    (http://127.0.0.1:PORT)."""
    for cluster in ray_nodes(()):
        yield cluster.address


@pytest.fixture
def on_ray(ray_head, postgres_url, tmp_path, monkeypatch):
    """This test's store (PostgreSQL) with the ray backend and a shared folder; both undone after the test."""
    with ray_backend_store(ray_head, postgres_url, tmp_path, monkeypatch) as (store, _):
        yield store, postgres_url


@pytest.fixture(scope="module")
def user_spec(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("user") / "seeded_user.py"
    path.write_text(SEEDED_USER)
    return f"python:{path}:make_user"


@pytest.fixture(scope="module")
def local_benchmark(tiny_model_dir, user_spec, tmp_path_factory) -> list:
    """The benchmark's dialogues run locally (the command, SQLite)."""
    db_url = f"sqlite:///{tmp_path_factory.mktemp('local') / 'lab.db'}"
    r = run_in_process("trainer", *bench_args(tiny_model_dir, user_spec, db_url))
    assert r.returncode == 0, r.stderr[-3000:]
    return results(db_url, 1)


def benchmark_config(tiny_model_dir: Path, user_spec: str) -> dict:
    return {"policy": str(tiny_model_dir), "simulator": user_spec, "profiles": "builtin", "limit": N_PERSONAS,
            "max_new_tokens": 8, "concurrency": 1, "seed": 3}


def playing_benchmark(store, url: str, tiny_model_dir: Path, user_spec: str, every: float = 0.2) -> int:
    """Start the benchmark through Ray; its job id once its first dialogue is stored (polled every `every` s)."""
    job_id = start_benchmark_job(store, url, benchmark_config(tiny_model_dir, user_spec))
    wait_for(lambda: finished(url) >= 1, timeout=400, every=every)
    return job_id


def shown(store, job_id: int, stale_after_s: float = job_queue.STALE_AFTER_S) -> dict:
    return next(j for j in job_queue.list_jobs(store, stale_after_s=stale_after_s) if j["id"] == job_id)


def ended(store, job_id: int) -> dict:
    """The job as listed once it succeeded, failed or shows dead."""
    return wait_for(lambda: (j := shown(store, job_id))["status"] in ("succeeded", "failed", "dead") and j,
                    timeout=400, every=0.5)


@pytest.mark.slow
@pytest.mark.process
def test_a_benchmark_through_ray_plays_what_a_local_one_plays_and_outlives_an_app_restart(on_ray, local_benchmark,
                                                                                          tiny_model_dir, user_spec):
    from app.lab import startup

    store, url = on_ray
    job_id = playing_benchmark(store, url, tiny_model_dir, user_spec)
    restarted = make_store(url)  # an app started while the Ray job runs: its startup reaps nothing, shows it live
    assert startup(restarted)["interrupted"] == [] and shown(restarted, job_id)["status"] == "running"
    job = ended(restarted, job_id)
    restarted.dispose()
    detail = job_queue.job_detail(store, job_id)
    assert job["status"] == "succeeded", detail["log_tail"][-3000:]
    assert job["backend"] == "ray" and job["host"] == socket.gethostname() and job["backend_job_id"]
    wait_for(lambda: ray_jobs.state(job["backend_address"], job["backend_job_id"]) == "SUCCEEDED", timeout=60)
    assert f"job {job_id} running (pid {job['pid']})" in detail["log_tail"]  # the log comes back from Ray
    summary = job_summary_md(detail)  # the job views show the node and the Ray job
    assert "node: **" in summary and f"Ray job: **{job['backend_job_id']}**" in summary.replace("\\", "")
    assert Path(job["output_dir"]).parent.parent.parent == Path(os.environ[backend.SHARED_ENV])
    assert results(url, 1) == local_benchmark


@pytest.fixture(scope="module")
def other_model(tmp_path_factory) -> Path:
    from testkit.tiny_model import build_tiny_model

    path = tmp_path_factory.mktemp("other") / "model"
    build_tiny_model(path, seed=7)
    return path


@pytest.mark.slow
@pytest.mark.process
def test_a_comparison_through_ray_pairs_what_a_local_one_pairs(on_ray, tiny_model_dir, other_model, user_spec,
                                                               tmp_path):
    local_db = f"sqlite:///{tmp_path / 'local.db'}"
    r = run_in_process("trainer", *compare_args(tiny_model_dir, other_model, user_spec, local_db))
    assert r.returncode == 0, r.stderr[-3000:]
    store, url = on_ray
    comparison_id, job_id = start_comparison_job(store, url, CompareConfig(
        a=str(tiny_model_dir), b=str(other_model), simulator=user_spec, profiles="builtin", limit=3,
        max_new_tokens=8, seed=5))
    job = ended(store, job_id)
    assert job["status"] == "succeeded", job_queue.job_detail(store, job_id)["log_tail"][-3000:]
    assert pair_results(url, comparison_id) == pair_results(local_db, 1)


@pytest.mark.slow
@pytest.mark.process
def test_cancel_stops_the_ray_job(on_ray, tiny_model_dir, user_spec):
    store, url = on_ray
    job_id = playing_benchmark(store, url, tiny_model_dir, user_spec)
    assert job_control.cancel(store, job_id) == "cancelled"
    job = shown(store, job_id)
    assert job["status"] == "cancelled"
    assert ray_jobs.state(job["backend_address"], job["backend_job_id"]) in ray_jobs.TERMINAL
    assert finished(url) < N_PERSONAS


@pytest.mark.slow
@pytest.mark.process
def test_a_killed_ray_job_shows_dead_and_resumes_to_the_uninterrupted_result(on_ray, local_benchmark,
                                                                              tiny_model_dir, user_spec):
    store, url = on_ray
    job_id = playing_benchmark(store, url, tiny_model_dir, user_spec, every=0.05)
    job = shown(store, job_id)
    assert job["status"] == "running" and job["host"] == socket.gethostname()
    os.kill(job["pid"], signal.SIGKILL)
    # dead once the heartbeat is older than the stall limit (Ray said at once that its job ended)
    dead = wait_for(lambda: (j := shown(store, job_id))["status"] == "dead" and j,
                    timeout=job_queue.STALE_AFTER_S + 60, every=0.5)
    assert "Ray job" in dead["error"] and dead["stored_status"] == "running"
    job_control.resume(store, url, job_id)  # through Ray again: a new Ray job claims the same row
    job = ended(store, job_id)
    assert job["status"] == "succeeded", job_queue.job_detail(store, job_id)["log_tail"][-3000:]
    assert job["backend_job_id"] != dead["backend_job_id"]
    assert results(url, 1) == local_benchmark


def train_dialogues(url: str, job_id: int) -> list[tuple]:
    """Per training dialogue: step, persona, seed, final emotion and every turn."""
    store = make_store(url)
    try:
        with read_scope(store) as s:
            out = []
            for d in s.scalars(select(Dialogue).where(Dialogue.job_id == job_id)):
                turns = s.scalars(select(Turn).where(Turn.dialogue_id == d.id).order_by(Turn.index))
                out.append((d.step, d.persona_id, d.seed, d.final_emotion, tuple((t.role, t.text) for t in turns)))
            return sorted(out)
    finally:
        store.dispose()


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.model  # the offline simulated user's packaged models
def test_a_training_job_through_ray_from_the_command_line_trains_as_a_local_one(on_ray, tiny_model_dir, tmp_path):
    """`python -m trainer --jobs ADDRESS train` submits the job to Ray and follows it to its end; its dialogues
    and checkpoints equal a local run's, the checkpoints in the shared folder."""
    config = tiny_train_config(tmp_path, tiny_model_dir)
    local_db = f"sqlite:///{tmp_path / 'local.db'}"
    local = run_in_process("trainer", "train", "--config", str(config), "--db", local_db, "--json",
                           env={"RLVER_LAB_HOME": str(tmp_path / "home"), backend.JOBS_ENV: backend.LOCAL})
    assert local.returncode == 0, local.stderr[-3000:]
    store, url = on_ray
    r = subprocess.run([sys.executable, "-m", "trainer", "--jobs", os.environ[backend.JOBS_ENV], "--shared-dir",
                        os.environ[backend.SHARED_ENV], "train", "--config", str(config), "--db", url, "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["steps"] == 2
    assert "step 2/2" in r.stderr  # the job's output, from Ray, echoed by the command
    assert Path(result["checkpoint"]).is_relative_to(os.environ[backend.SHARED_ENV])
    assert shown(store, result["job_id"])["backend"] == "ray"
    local_job = json.loads(local.stdout.strip().splitlines()[-1])["job_id"]
    assert train_dialogues(url, result["job_id"]) == train_dialogues(local_db, local_job)


def test_a_sqlite_store_with_ray_is_refused_in_one_line(tmp_path):
    for module, args in (("app", ["--port", str(free_port())]), ("trainer", ["jobs"])):
        r = run_in_process(module, "--jobs", "ray://127.0.0.1:10001", *args, "--db", f"sqlite:///{tmp_path / 'lab.db'}")
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "PostgreSQL" in lines[0], r.stderr
    assert not (tmp_path / "lab.db").exists()


def test_two_hosts_never_claim_one_job(store, monkeypatch, tmp_path):
    """The store decides who owns a Ray job: a claim by another host's process stands, a second claim is refused
    naming it, and the first owner's writes stop once the row names another process."""
    job_id = job_queue.create_job(store, "benchmark", {})
    with session_scope(store) as s:
        s.get(Job, job_id).backend = "ray"
    first = JobContext(store, job_id, install_signals=False)
    first._claim()
    with session_scope(store) as s:  # the row as a process of another node leaves it (a claim, no file lock)
        job = s.get(Job, job_id)
        job.pid, job.host = 424242, "node-b"
    second = JobContext(store, job_id, install_signals=False)
    with pytest.raises(job_queue.JobError, match="claimed by process 424242 on node-b"):
        second._claim()
    with pytest.raises(job_queue.JobOwnershipLost, match="node-b"):
        first.progress(1, 2)


def ray_jobs_of(address: str, store, job_id: int) -> list:
    """Every Ray job of the cluster submitted for lab job `job_id` of `store` (its metadata says which)."""
    from ray.job_submission import JobSubmissionClient

    return [j for j in JobSubmissionClient(address).list_jobs() if (j.metadata or {}).get("rlver_lab_job") ==
            str(job_id) and j.metadata.get("rlver_lab_store") == store_id(store)]


@pytest.mark.slow
@pytest.mark.process
def test_an_experiment_on_ray_submits_each_attempt_once_says_what_it_waits_for_and_cancel_leaves_nothing(
        on_ray, tiny_model_dir, tmp_path):
    """A one-cell experiment whose training job asks for a GPU the cluster lacks: the runner polls while Ray
    keeps the job PENDING and submits it once (a second submission of the attempt is refused by Ray); the job
    says what it waits for; Cancel ends the cell, the job and the runner, and leaves nothing queued or dead."""
    from trainer.experiments import grid as experiment_grid
    from trainer.jobs import remote
    from trainer.jobs.admission import queued_behind

    store, url = on_ray
    address = os.environ[backend.JOBS_ENV]
    config = yaml.safe_load(tiny_train_config(tmp_path, tiny_model_dir).read_text())
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"name": "gpu-wait", "base": {**config, "gpus": 1}, "grid": {"seed": [0]},
                                    "benchmark": {"profiles": "builtin:heldout", "limit": 1}}))
    runner = subprocess.Popen([sys.executable, "-m", "trainer", "--jobs", address, "--shared-dir",
                               os.environ[backend.SHARED_ENV], "experiment", "--grid", str(grid), "--db", url,
                               "--json"], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eid = wait_for(lambda: experiment_grid.list_experiments(store) and
                       experiment_grid.list_experiments(store)[0]["id"], timeout=300)
        cell = lambda: experiment_grid.experiment_detail(store, eid)["cells"][0]  # noqa: E731
        job_id = wait_for(lambda: cell()["train_job_id"], timeout=300)
        wait_for(lambda: shown(store, job_id)["backend_job_id"], timeout=300)
        beat = lambda: experiment_grid.experiment_detail(store, eid)["runner_heartbeat_at"]  # noqa: E731
        first = wait_for(beat, timeout=60)
        wait_for(lambda: (beat() - first).total_seconds() >= 5, timeout=120)  # the runner looked again, often
        submitted = ray_jobs_of(address, store, job_id)
        assert [j.submission_id for j in submitted] == [f"lab-{store_id(store)}-job{job_id}-attempt0"]
        assert submitted[0].status.value == "PENDING"
        job = shown(store, job_id)
        assert job["status"] == "queued" and job["error"].startswith("waiting for 1 GPU, 1 CPU (Ray job lab-")
        assert "no node of the cluster has 1 GPU" in job["error"] and queued_behind(store, job_id) == job["error"]
        with pytest.raises(ray_jobs.AlreadySubmitted):
            remote.launch(store, url, job_id, backend.current())
        with pytest.raises(ray_jobs.AlreadySubmitted):
            ray_jobs.submit(address, job_id, {}, {}, str(REPO), submission=submitted[0].submission_id)
        assert len(ray_jobs_of(address, store, job_id)) == 1
        assert experiment_grid.cancel_experiment(store, eid) == "cancelled"
        _, err = runner.communicate(timeout=300)
        assert runner.returncode == 143, err[-3000:]
    finally:
        if runner.poll() is None:
            runner.kill()
    exp = experiment_grid.experiment_detail(store, eid)
    assert exp["status"] == "cancelled" and [c["status"] for c in exp["cells"]] == ["cancelled"]
    assert exp["runner_pid"] is None and exp["runner"] is None
    job = shown(store, job_id)
    assert job["status"] == "cancelled" and job["error"] == "cancelled before Ray started it"
    assert {j["status"] for j in job_queue.list_jobs(store)} == {"cancelled"}
    assert len(ray_jobs_of(address, store, job_id)) == 1
