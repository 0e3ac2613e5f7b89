"""Launching a job of the ray backend, without a cluster: a launch the cluster refuses (nothing answers at its
address) ends the job failed with the reason, never queued for a process that never comes; a job process on a
node whose code or environment differs from the submitter's refuses the job in one line naming the node."""
from __future__ import annotations

import socket

import pytest
from helpers import run_in_process

from storage import store_id
from testkit.cluster.ray_nodes import free_port
from trainer.jobs import backend
from trainer.jobs import queue as job_queue
from trainer.jobs.remote import CODE_ENV, PYTHON_ENV, environment_fingerprint, node_problem, submitted_env


def test_a_launch_the_cluster_refuses_ends_failed_with_the_reason(store, db_url, monkeypatch):
    pytest.importorskip("ray.job_submission", reason="Ray is not installed (pip install -e '.[cluster]')")
    monkeypatch.setenv(backend.JOBS_ENV, f"http://127.0.0.1:{free_port()}")
    job_id = job_queue.create_job(store, "benchmark", {})
    with pytest.raises(job_queue.JobError, match=f"job {job_id}: the Ray cluster at .* refused it"):
        job_queue.launch(db_url, job_id)
    job = job_queue.get_job(store, job_id)
    assert job["status"] == "failed" and "refused it" in job["error"] and job["pid"] is None
    assert job["backend"] == "ray" and job["backend_job_id"] == f"lab-{store_id(store)}-job{job_id}-attempt0"
    with pytest.raises(job_queue.JobError, match="only a queued job can be launched"):
        job_queue.launch(db_url, job_id)


@pytest.mark.parametrize("differs", ["code", "environment"])
def test_a_node_with_other_code_or_environment_refuses_the_job_in_one_line(store, db_url, differs, monkeypatch):
    job_id = job_queue.create_job(store, "benchmark", {})
    env = submitted_env()
    if differs == "code":
        env[CODE_ENV] = "0123456789ab"
    else:
        env[PYTHON_ENV] = environment_fingerprint().replace("torch ", "torch 0.0.1-was-")
    r = run_in_process("trainer", "job", str(job_id), "--db", db_url, env=env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: job {job_id}: node {socket.gethostname()} ")
    assert ("the job was submitted with 0123456789ab" if differs == "code" else "submitted with 0.0.1-was-") \
        in lines[0]
    job = job_queue.get_job(store, job_id)
    assert job["status"] == "failed" and job["error"] == "failed: " + lines[0].split(": ", 2)[2]
    for key, value in submitted_env().items():  # the node as the launcher: nothing to refuse
        monkeypatch.setenv(key, value)
    assert node_problem() == ""
