"""One model of background work, with real processes: the app (`python -m app` on a free port, a temp SQLite
store) starts a persona generation as a job against the scripted OpenAI-compatible server; the app and the
generation's job process are killed with -9 mid-run (what an app killed with a generation inside it amounts
to); the app started again shows the generation interrupted and resumable, never running; resume finishes
it with no slot made twice."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port
from gradio_client import Client
from helpers import wait_for, wait_for_http

from app.services import persona_generation_jobs
from simulator.personas import generation_store
from storage import Job, make_store, read_scope
from testkit.scripted_server import start_server
from trainer.jobs import queue as job_queue

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent
COUNT = 16


def start_app(tmp_path: Path, db_url: str, env: dict[str, str], name: str,
              endpoint: str = "") -> tuple[subprocess.Popen, str]:
    port, log = free_port(), tmp_path / f"{name}.log"
    flags = ["--endpoint", f"scripted={endpoint}"] if endpoint else []
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db", db_url, *flags], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    wait_for_http(base, proc, log)
    return proc, base


def kill_9(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stored_job(store, job_id: int) -> tuple[str, int]:
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        return job.status, job.pid


@pytest.mark.slow
def test_app_killed_mid_generation_comes_back_with_it_interrupted_and_resume_makes_each_slot_once(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'lab.db'}"
    # RLVER_LAB_HOME is this test's own folder (conftest): the apps, the job processes and this test share it
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    store = make_store(db_url)
    procs: list[subprocess.Popen] = []
    job_pid = None
    try:
        with start_server(latency_s=2.0) as server:
            app, base = start_app(tmp_path, db_url, env, "app-1", endpoint=server.base_url)
            procs.append(app)
            # the Generate button of the Personas view: count, needs, personalities, languages, topics, seed,
            # endpoint (the owner's, named with --endpoint), model, dedupe threshold
            Client(base + "/", verbose=False).predict(COUNT, [], [], ["en"], "", 0, "scripted", "scripted", 0.9,
                                                      api_name="/on_start")
            [row] = generation_store.list_generations(store)
            gid = row["id"]
            job = persona_generation_jobs.job_of(store, gid)
            assert job is not None and job["kind"] == "personas"
            wait_for(lambda: (generation_store.get_generation(store, gid)["n_done"] >= 1), timeout=300)
            job_pid = stored_job(store, job["id"])[1]
            kill_9(app.pid)  # the app, and the generation's own process with it
            kill_9(job_pid)
            app.wait()
            wait_for(lambda: persona_generation_jobs.generation(store, gid)["status"] == "interrupted",
                     timeout=60)  # derived: dead
            made = {c["slot"]: c["id"] for c in generation_store.list_candidates(store, gid)}
            assert 1 <= len(made) < COUNT, "the generation must be killed mid-run"
            assert generation_store.get_generation(store, gid)["status"] == "running"  # its owner never wrote an end

            app, base = start_app(tmp_path, db_url, env, "app-2", endpoint=server.base_url)
            procs.append(app)
            assert stored_job(store, job["id"])[0] == "interrupted"  # the restarted app's reaper, under the lock
            g = persona_generation_jobs.generation(store, gid)
            assert g["status"] == "interrupted" and g["resumable"] and "is gone" in g["error"]
            # the app's own panel, picking the generation after the restart
            shown = Client(base + "/", verbose=False).predict(gid, api_name="/on_pick_1")
            assert "(interrupted)" in str(shown) and "(running)" not in str(shown)
            assert any(label.startswith(f"generation {gid} · interrupted")
                       for label, _ in persona_generation_jobs.choices(store))

            calls_before = server.calls
            resumed = persona_generation_jobs.resume(store, db_url, gid)
            assert resumed.startswith(f"Generation {gid} resumes: {COUNT - len(made)} slot")
            live = persona_generation_jobs.LIVE
            wait_for(lambda: persona_generation_jobs.generation(store, gid)["status"] not in live, timeout=300)
            calls_after = server.calls
        g = persona_generation_jobs.generation(store, gid)
        assert g["status"] == "finished" and g["n_done"] == COUNT, g
        assert job_queue.get_job(store, g["job_id"])["status"] == "succeeded"
        cands = generation_store.list_candidates(store, gid)
        assert sorted(c["slot"] for c in cands) == list(range(COUNT))  # every slot once
        assert {c["slot"]: c["id"] for c in cands if c["slot"] in made} == made  # kept, not made again
        assert calls_after - calls_before == COUNT - len(made)  # one call per slot left (valid answers)
    finally:
        for proc in procs:
            kill_9(proc.pid)
            proc.wait()
        if job_pid is not None:
            kill_9(job_pid)
        store.dispose()
