"""The test cluster of Ray nodes on this machine (testkit.cluster.ray_nodes, the `ray_cluster` fixture): two
raylets Ray lists as two alive nodes, each told apart by its own custom resource; kill -9 of one's raylet makes
Ray list that node dead, and a raylet started again under the same name joins as a new node. Two lab jobs that fit
run at the same time on different nodes, placed by Ray."""
from __future__ import annotations

import pytest
from helpers import wait_for

from testkit.cluster.ray_nodes import HEAD


@pytest.mark.slow
def test_two_raylets_are_two_nodes_and_one_killed_comes_back_as_a_new_one(ray_cluster):
    head, other = ray_cluster.node_id(HEAD), ray_cluster.node_id("lab_node_b")
    assert head and other and head != other
    assert (ray_cluster.name_of(head), ray_cluster.name_of(other)) == (HEAD, "lab_node_b")
    assert ray_cluster.raylet_pid(HEAD) != ray_cluster.raylet_pid("lab_node_b")
    ray_cluster.kill_raylet("lab_node_b")
    ray_cluster.wait_node_dead("lab_node_b")
    assert ray_cluster.node_id("lab_node_b") == "" and ray_cluster.node_id(HEAD) == head
    again = ray_cluster.add_node("lab_node_b")
    assert again not in ("", other) and ray_cluster.name_of(again) == "lab_node_b"


# a simulated user that waits at its opening line until the file `go` appears beside it: a job playing it runs
# (claimed, heartbeating) for as long as the test wants
GATED_USER = """
import asyncio
from pathlib import Path
from simulator.user.agent import UserTurn

GATE = Path(__file__).parent / "go"


class GatedUser:
    def __init__(self, profile, seed):
        pass

    async def opening(self):
        while not GATE.exists():
            await asyncio.sleep(0.2)
        return UserTurn(text="I had a hard day.", emotion=40.0)

    async def respond(self, dialogue, reply):
        return UserTurn(text="Thanks, bye.", emotion=50.0, delta=10.0, done=True, outcome="goodbye")

    def fingerprint(self):
        return {"model": "gated-user"}


def make_user(profile, seed):
    return GatedUser(profile, seed)
"""


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.postgres
def test_two_jobs_that_fit_run_at_the_same_time_on_different_nodes(ray_cluster, postgres_url, tiny_model_dir,
                                                                   tmp_path, monkeypatch):
    """Ray, not the lab's admission, decides what runs: with one CPU free on each node (the other taken by a
    plain Ray job pinned there), two benchmark jobs asking one CPU each both run at once, one on each node."""
    from ray.job_submission import JobSubmissionClient

    from storage import make_store
    from trainer.benchmarking.benchmark import start_benchmark_job
    from trainer.jobs import backend
    from trainer.jobs import queue as job_queue

    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(backend.JOBS_ENV, backend.LOCAL)
    monkeypatch.setenv(backend.SHARED_ENV, str(shared))
    backend.configure(ray_cluster.address, str(shared), postgres_url)
    store = make_store(postgres_url)
    client = JobSubmissionClient(ray_cluster.address)
    fillers = [client.submit_job(entrypoint="sleep 900", entrypoint_num_cpus=1, entrypoint_resources={node: 1})
               for node in (HEAD, "lab_node_b")]
    user = tmp_path / "gated_user.py"
    user.write_text(GATED_USER)
    config = {"policy": str(tiny_model_dir), "simulator": f"python:{user}:make_user", "profiles": "builtin",
              "limit": 1, "max_new_tokens": 4, "concurrency": 1}
    try:
        wait_for(lambda: all(client.get_job_status(f).value == "RUNNING" for f in fillers), timeout=300)
        jobs = [start_benchmark_job(store, postgres_url, {**config, "seed": seed}) for seed in (1, 2)]
        status = lambda: [job_queue.get_job(store, j)["status"] for j in jobs]  # noqa: E731
        wait_for(lambda: status() == ["running", "running"], timeout=600, every=0.5)  # both at once
        nodes = {ray_cluster.name_of(job_queue.job_detail(store, j, log_lines=0)["ray_node"]) for j in jobs}
        assert nodes == {HEAD, "lab_node_b"}
        (user.parent / "go").touch()
        wait_for(lambda: not {"queued", "running"} & set(status()), timeout=600, every=0.5)
        assert status() == ["succeeded", "succeeded"], [job_queue.job_detail(store, j)["log_tail"] for j in jobs]
        assert not any("queued behind" in (job_queue.job_detail(store, j)["log_tail"] or "") for j in jobs)
    finally:
        (user.parent / "go").touch()
        for filler in fillers:
            client.stop_job(filler)
        store.dispose()
