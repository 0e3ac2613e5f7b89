"""A training job across two Ray nodes (`nodes: 2`, `gpus: 0`: one CPU rank per node over gloo) on the two-raylet
cluster of this machine (the `ray_cluster` fixture), the suite's PostgreSQL and a shared folder.

Its ranks run on two different Ray nodes (`trainer jobs --json` names them), and every step's policy loss, value
loss and gradient norms equal those of the same config run locally as two ranks under torchrun (to 1e-6
relative: the same ranks, the same data, gloo's all-reduce of two summands, so in practice bit for bit). kill -9
of the second node's raylet mid-run ends the job (shown dead; failed, with the collective's error, when rank 0
saw its peer go before Ray ended it) and its resume through Ray, once the node is back, continues from the last
checkpoint to the uninterrupted run's figures.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ray_backend_store, tiny_train_config, wait_for
from sqlalchemy import select

from storage import Checkpoint, Metric, make_store, read_scope
from testkit.cluster.ray_nodes import HEAD, free_port
from trainer.jobs import backend
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

pytestmark = [pytest.mark.slow, pytest.mark.process, pytest.mark.postgres,
              pytest.mark.model]  # the offline simulated user's packaged models

REPO = Path(__file__).resolve().parent.parent
COMPARED = ("policy_loss", "value_loss", "grad_norm", "critic_grad_norm", "reward_mean")
RELATIVE = 1e-6
STEPS = 3
RUN_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def config_path(tmp_path_factory, tiny_model_dir) -> Path:
    """configs/tiny-test.yaml on two nodes, ZeRO-2 (the lab's DeepSpeed path), a checkpoint every step."""
    return tiny_train_config(tmp_path_factory.mktemp("cfg"), tiny_model_dir, nodes=2, steps=STEPS,
                             deepspeed="zero2", save_every=1, report_to=["none"])


def step_metrics(url: str, job_id: int) -> dict[int, dict[str, float]]:
    store = make_store(url)
    try:
        with read_scope(store) as s:
            out: dict[int, dict[str, float]] = {}
            for m in s.scalars(select(Metric).where(Metric.job_id == job_id, Metric.name.in_(COMPARED))):
                out.setdefault(m.step, {})[m.name] = m.value
            return out
    finally:
        store.dispose()


def assert_same_figures(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    for step in want:
        assert set(got[step]) == set(want[step]) == set(COMPARED), step
        for name, value in want[step].items():
            assert math.isclose(got[step][name], value, rel_tol=RELATIVE, abs_tol=1e-9), (step, name, got, want)


@pytest.fixture(scope="module")
def local_two_ranks(config_path, tmp_path_factory) -> dict[int, dict[str, float]]:
    """The same config, two ranks on this machine under torchrun (SQLite): every step's figures."""
    folder = tmp_path_factory.mktemp("local")
    url = f"sqlite:///{folder / 'lab.db'}"
    env = dict(os.environ, PYTHONPATH=str(REPO), RLVER_LAB_HOME=str(folder / "home"), OMP_NUM_THREADS="1")
    env[backend.JOBS_ENV] = backend.LOCAL
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                        f"--master-port={free_port()}", "-m", "trainer", "train", "--config", str(config_path),
                        "--db", url, "--json"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    result = json.loads(next(line for line in reversed(r.stdout.splitlines()) if line.startswith("{")))
    assert result["status"] == "succeeded" and result["steps"] == STEPS
    return step_metrics(url, result["job_id"])


@pytest.fixture
def on_cluster(ray_cluster, postgres_url, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with ray_backend_store(ray_cluster.address, postgres_url, tmp_path, monkeypatch) as (store, shared):
        yield ray_cluster, store, postgres_url, shared


def train_on_ray(config_path: Path, url: str, shared: Path, address: str) -> subprocess.Popen:
    """`python -m trainer --jobs ADDRESS train`: submits the job and follows it to its end."""
    return subprocess.Popen([sys.executable, "-m", "trainer", "--jobs", address, "--shared-dir", str(shared), "train",
                             "--config", str(config_path), "--db", url, "--json"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))


def jobs_json(url: str, job_id: int) -> dict:
    r = subprocess.run([sys.executable, "-m", "trainer", "jobs", str(job_id), "--db", url, "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_two_nodes_train_as_two_local_ranks(on_cluster, config_path, local_two_ranks):
    cluster, store, url, shared = on_cluster
    proc = train_on_ray(config_path, url, shared, cluster.address)
    out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["steps"] == STEPS
    assert f"step {STEPS}/{STEPS}" in err  # rank 0's output, through Ray's log of the job, echoed by the command
    assert Path(result["checkpoint"]).is_relative_to(shared)  # rank 0 wrote it into the shared folder
    row = jobs_json(url, result["job_id"])
    assert [r["rank"] for r in row["ranks"]] == [0, 1]
    assert {r["node_id"] for r in row["ranks"]} == {cluster.node_id(HEAD), cluster.node_id("lab_node_b")}
    assert_same_figures(step_metrics(url, result["job_id"]), local_two_ranks)


def test_a_killed_raylet_ends_the_job_and_its_resume_equals_an_uninterrupted_run(on_cluster, config_path,
                                                                                  local_two_ranks):
    cluster, store, url, shared = on_cluster
    proc = train_on_ray(config_path, url, shared, cluster.address)
    try:
        job_id = wait_for(lambda: next((j["id"] for j in job_queue.list_jobs(store)), None), timeout=120)

        def first_checkpoint() -> bool:
            with read_scope(store) as s:
                return s.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id)).first() is not None

        wait_for(first_checkpoint, timeout=RUN_TIMEOUT_S, every=0.2)
        assert job_queue.get_job(store, job_id)["step"] < STEPS
        cluster.kill_raylet("lab_node_b")  # the node of one rank goes, as a crashed machine does
        proc.communicate(timeout=RUN_TIMEOUT_S)
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    cluster.wait_node_dead("lab_node_b")
    ended = wait_for(lambda: (j := job_queue.get_job(store, job_id))["status"] in ("dead", "failed") and j,
                     timeout=job_queue.STALE_AFTER_S + 120, every=0.5)
    # dead (rank 0 died with its node, or was ended by the driver once Ray lost the node), or failed when rank 0
    # saw its peer's connection close first and wrote the error: either resumes
    assert ended["step"] < STEPS and ended["status"] in ("dead", "failed"), ended
    cluster.add_node("lab_node_b")
    job_control.resume(store, url, job_id)  # through Ray: the driver places both ranks again
    done = wait_for(lambda: (j := job_queue.get_job(store, job_id))["status"] in ("succeeded", "failed", "dead")
                    and j, timeout=RUN_TIMEOUT_S, every=0.5)
    assert done["status"] == "succeeded", job_queue.job_detail(store, job_id)["log_tail"][-3000:]
    assert_same_figures(step_metrics(url, job_id), local_two_ranks)
