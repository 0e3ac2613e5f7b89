"""The job system with real processes and a real SQLite store.

The worker below is a real job process: it runs JobContext exactly as `python -m trainer job` does,
around a loop of short units (metrics, progress, a checkpoint per unit), so queueing, heartbeats,
kill -9, cancel and resume are exercised without loading a model. `launch` itself (the `python -m trainer
job` command) is exercised with a real benchmark job in tests/test_benchmark_cli.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import BACKENDS, wait_for

from storage import Job, lab_home, read_scope, session_scope, store_id
from storage.models import utcnow
from trainer.checkpoint_layout import STATE_FILE
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.context import JobContext
from trainer.jobs.queue import JobError

REPO = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from storage import make_store
    from trainer.jobs.context import JobContext
    from trainer.checkpoint_layout import STATE_FILE
    url, job_id, steps, stop_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    store = make_store(url)
    with JobContext(store, job_id, heartbeat_s=0.2, stale_after_s=5) as ctx:
        if "torch" in sys.modules:  # the accelerator's kinds fix their threads (trainer.jobs.admission)
            print("threads", sys.modules["torch"].get_num_threads(), flush=True)
        start = ctx.last_checkpoint["step"] if ctx.last_checkpoint else 0
        print("start", start, flush=True)
        for step in range(start + 1, steps + 1):
            if ctx.cancelled:
                break
            time.sleep(0.15)
            ctx.log_metrics(step, {"reward": step / 10, "loss": 1.0 / step, "writer": os.getpid()})
            ctx.progress(step, steps)
            folder = Path(ctx.output_dir) / "checkpoints" / f"step-{step:06d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / STATE_FILE).write_text(str(os.getpid()))
            ctx.add_checkpoint(step, str(folder), {"reward": step / 10})
            print("wrote step", step, flush=True)
            if step == stop_at:  # stall here, between two writes (as kill -STOP after a step would)
                os.kill(os.getpid(), signal.SIGSTOP)
""")


@pytest.fixture
def worker(tmp_path, db_url):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs: list[subprocess.Popen] = []

    def start(job_id: int, steps: int, stop_at: int = 0) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        p = subprocess.Popen([sys.executable, str(script), db_url, str(job_id), str(steps), str(stop_at)],
                             cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()



def status(store, job_id):
    with read_scope(store) as s:
        return s.get(Job, job_id).status


def metric_steps(store, job_id, name="reward"):
    return job_queue.job_detail(store, job_id)["metrics"].get(name, {}).get("step", [])


# ------------------------------------------------------------------------------------- service functions
def test_create_job_records_queued_job_with_code_version(store):
    job_id = job_queue.create_job(store, "benchmark", {"limit": 2}, name="b", seed=7)
    [row] = job_queue.list_jobs(store)
    assert row["id"] == job_id and row["status"] == "queued" and row["seed"] == 7
    assert row["config"] == {"limit": 2} and row["code_version"]
    assert Path(row["output_dir"]) == lab_home() / "jobs" / store_id(store) / str(job_id)


def test_create_job_rejects_bad_input(store):
    with pytest.raises(JobError, match="kind"):
        job_queue.create_job(store, "nonsense", {})
    with pytest.raises(JobError, match="config"):
        job_queue.create_job(store, "train", ["not", "a", "dict"])


def test_clone_copies_config_and_points_at_parent(store):
    job_id = job_queue.create_job(store, "train", {"lr": 1e-6}, name="ppo", seed=3)
    new_id = job_queue.clone(store, job_id)
    d = job_queue.job_detail(store, new_id)
    assert new_id != job_id and d["parent_id"] == job_id and d["status"] == "queued"
    assert d["config"] == {"lr": 1e-6} and d["seed"] == 3 and d["kind"] == "train"


def test_context_records_metrics_once_per_step_and_succeeds(store, tmp_path):
    job_id = job_queue.create_job(store, "train", {})
    ckpt = tmp_path / "ckpt" / "2"
    ckpt.mkdir(parents=True)
    (ckpt / STATE_FILE).write_text("")
    with JobContext(store, job_id, install_signals=False) as ctx:
        assert status(store, job_id) == "running"
        for step in (1, 2):
            ctx.log_metrics(step, {"reward": 0.1 * step})
            ctx.progress(step, 4)
        ctx.log_metrics(2, {"reward": 0.5, "kl": 0.01})  # step 2 written again: replaced, not duplicated
        ctx.add_checkpoint(2, str(ckpt), {"reward": 0.5})
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "succeeded" and d["error"] == "" and d["finished_at"] is not None
    assert d["metrics"]["reward"] == {"step": [1, 2], "value": [pytest.approx(0.1), 0.5]}
    assert d["metrics"]["kl"] == {"step": [2], "value": [0.01]}
    assert d["step"] == 2 and d["total_steps"] == 4 and d["progress"] == 0.5
    assert [c["path"] for c in d["checkpoints"]] == [str(ckpt)]
    assert JobContext(store, job_id).resume_from == str(ckpt)


def test_context_marks_failed_with_error_text(store):
    job_id = job_queue.create_job(store, "train", {})
    with pytest.raises(RuntimeError):
        with JobContext(store, job_id, install_signals=False):
            raise RuntimeError("simulator unreachable at step 3")
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "failed" and d["error"] == "RuntimeError: simulator unreachable at step 3"


def test_context_marks_cancelled(store):
    job_id = job_queue.create_job(store, "train", {})
    with JobContext(store, job_id, install_signals=False) as ctx:
        ctx.request_cancel()
        ctx.check_cancelled()
        raise AssertionError("check_cancelled must raise")  # pragma: no cover
    assert status(store, job_id) == "cancelled"


@pytest.mark.process
def test_finished_job_cannot_run_again_and_only_ended_jobs_resume(store, db_url):
    job_id = job_queue.create_job(store, "train", {})
    with JobContext(store, job_id, install_signals=False):
        pass
    with pytest.raises(JobError, match="succeeded"):
        with JobContext(store, job_id, install_signals=False):
            pass
    with pytest.raises(JobError, match="only an interrupted, failed or cancelled"):
        job_control.resume(store, db_url, job_id)
    with pytest.raises(JobError, match="only a queued job"):
        job_queue.launch(db_url, job_id)
    with pytest.raises(JobError, match="does not exist"):
        job_control.cancel(store, 999)


def test_log_tail_reads_last_lines(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("".join(f"line {i}\n" for i in range(500)))
    assert job_queue.log_tail(str(log), 3) == "line 497\nline 498\nline 499"
    assert job_queue.log_tail(str(tmp_path / "missing.log")) == ""


# ---------------------------------------------------------------------------------------- real processes
@pytest.mark.process
def test_job_process_heartbeats_and_writes_metrics(store, worker):
    job_id = job_queue.create_job(store, "train", {})
    p = worker(job_id, 4)
    assert p.wait(timeout=240) == 0, p.stdout.read()
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "succeeded" and d["pid"] == p.pid and d["heartbeat_at"] is not None
    assert d["metrics"]["reward"]["step"] == [1, 2, 3, 4] and d["progress"] == 1.0
    assert d["started_at"] <= d["finished_at"]


@pytest.mark.process
def test_kill_9_marks_interrupted_and_resume_continues_without_duplicates(store, worker):
    job_id = job_queue.create_job(store, "train", {})
    p = worker(job_id, 10_000)
    wait_for(lambda: len(metric_steps(store, job_id)) >= 3)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert status(store, job_id) == "running"  # only its owner wrote its status, and it is gone
    assert job_queue.job_detail(store, job_id)["status"] == "dead"  # derived when read: nothing written
    assert status(store, job_id) == "running"
    assert job_queue.reap_dead_jobs(store) == [job_id]  # the reaper, under the job's lock
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "interrupted" and "is gone" in d["error"]
    done = len(d["metrics"]["reward"]["step"])
    last = d["checkpoints"][-1]["step"]
    assert last in (done, done - 1)

    # the resume point: the newest complete checkpoint, recorded or only on disk (a kill between the two)
    start = job_queue.last_checkpoint(store, job_id, Path(d["output_dir"]) / "checkpoints")["step"]
    assert start in (last, last + 1)
    job_control.reopen(store, job_id)
    p2 = worker(job_id, last + 3)
    assert p2.wait(timeout=240) == 0
    out = p2.stdout.read()
    assert f"start {start}" in out
    assert metric_steps(store, job_id) == list(range(1, last + 4))
    assert status(store, job_id) == "succeeded"


@pytest.mark.process
def test_late_heartbeat_of_a_live_owner_shows_stalled_and_nothing_is_written(store, worker):
    """Changed semantics: a late heartbeat used to be written as "interrupted" by any reader while the
    process lived; now "stalled" is derived when read and neither a reader nor the reaper writes."""
    job_id = job_queue.create_job(store, "train", {})
    p = worker(job_id, 10_000)
    wait_for(lambda: status(store, job_id) == "running")
    os.killpg(p.pid, signal.SIGSTOP)  # alive but frozen: its heartbeat stops
    try:
        time.sleep(1.0)
        assert job_queue.job_detail(store, job_id, stale_after_s=60)["status"] == "running"
        d = job_queue.job_detail(store, job_id, stale_after_s=0.5)
        assert d["status"] == "stalled" and "no heartbeat" in d["error"] and f"process {p.pid} is alive" in d["error"]
        assert [j["status"] for j in job_queue.list_jobs(store, stale_after_s=0.5)] == ["stalled"]
        assert job_queue.reap_dead_jobs(store) == [] and status(store, job_id) == "running"
    finally:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert job_queue.job_detail(store, job_id)["status"] == "dead"


@pytest.mark.process
def test_cancel_signals_the_process_group_and_job_ends_cancelled(store, worker):
    job_id = job_queue.create_job(store, "train", {})
    p = worker(job_id, 10_000)
    wait_for(lambda: len(metric_steps(store, job_id)) >= 2)
    assert job_control.cancel(store, job_id) == "running"  # the job itself finishes its unit, then marks itself
    assert p.wait(timeout=180) == 0, (p.stdout.read(), job_queue.job_detail(store, job_id))
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "cancelled" and d["finished_at"] is not None
    steps = d["metrics"]["reward"]["step"]
    assert steps == list(range(1, len(steps) + 1))  # the last unit was completed, none half-written


def queue_behind_a_running_job(store, worker):
    """A long job running and a short second one whose process is waiting in the queue behind it."""
    first = job_queue.create_job(store, "train", {})
    second = job_queue.create_job(store, "train", {})
    p1 = worker(first, 10_000)
    wait_for(lambda: status(store, first) == "running")
    p2 = worker(second, 2)
    wait_for(lambda: job_queue.job_detail(store, second)["pid"] == p2.pid)
    return first, second, p1, p2


@pytest.mark.process
@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_second_job_waits_in_queue_until_the_first_ends(store, worker):
    first, second, p1, p2 = queue_behind_a_running_job(store, worker)
    time.sleep(2.0)  # several queue polls
    assert status(store, second) == "queued" and metric_steps(store, second) == []
    job_control.cancel(store, first)
    assert p1.wait(timeout=180) == 0
    assert p2.wait(timeout=240) == 0
    d1, d2 = job_queue.job_detail(store, first), job_queue.job_detail(store, second)
    assert d1["status"] == "cancelled" and d2["status"] == "succeeded"
    assert d2["started_at"] >= d1["finished_at"]
    assert "queued behind #1 (train, " in p2.stdout.read()


@pytest.mark.process
def test_jobs_that_fit_run_side_by_side_and_the_rest_wait_their_turn(store, worker, monkeypatch):
    """Admission by memory and cores (trainer.jobs.admission): two benchmarks of an API policy (the process's
    memory, half the cores each) run at once; a third waits behind them, saying so; it runs when one ends."""
    from trainer.jobs.admission import PROCESS_GIB, queued_behind, read_resources

    monkeypatch.setenv("RLVER_LAB_JOB_CORES", "2")
    monkeypatch.setenv("RLVER_LAB_JOB_MEMORY_GIB", "8")
    first, second, third = (job_queue.create_job(store, "benchmark", {"policy": "openai:some-model"})
                            for _ in range(3))
    p1 = worker(first, 10_000)
    wait_for(lambda: status(store, first) == "running", timeout=240)
    p2 = worker(second, 10_000)
    wait_for(lambda: status(store, second) == "running", timeout=240)
    assert status(store, first) == "running"  # side by side
    taken = read_resources(job_queue.job_detail(store, second)["output_dir"], None)
    assert (taken.memory_gib, taken.threads) == (PROCESS_GIB, 1)
    p3 = worker(third, 2)
    wait_for(lambda: job_queue.job_detail(store, third)["pid"] == p3.pid)
    time.sleep(2.0)  # several queue polls: no core is free
    assert status(store, third) == "queued"
    assert queued_behind(store, third).startswith(f"queued behind #{first} (benchmark, ")
    job_control.cancel(store, first)
    assert p1.wait(timeout=180) == 0
    assert p3.wait(timeout=240) == 0 and status(store, third) == "succeeded"
    assert status(store, second) == "running"  # the third ran beside it
    job_control.cancel(store, second)
    assert p2.wait(timeout=180) == 0
    assert all("threads 1" in p.stdout.read() for p in (p1, p2, p3))


@pytest.mark.process
def test_a_job_that_does_not_fit_beside_the_running_one_waits(store, worker, monkeypatch):
    """By memory: the owner's limit holds one benchmark's estimate, not two, so the second waits its turn."""
    from trainer.jobs.admission import PROCESS_GIB

    monkeypatch.setenv("RLVER_LAB_JOB_CORES", "4")
    monkeypatch.setenv("RLVER_LAB_JOB_MEMORY_GIB", str(1.5 * PROCESS_GIB))
    first, second = (job_queue.create_job(store, "benchmark", {"policy": "openai:some-model"}) for _ in range(2))
    p1 = worker(first, 10_000)
    wait_for(lambda: status(store, first) == "running", timeout=240)
    p2 = worker(second, 2)
    wait_for(lambda: job_queue.job_detail(store, second)["pid"] == p2.pid)
    time.sleep(2.0)
    assert status(store, second) == "queued"
    job_control.cancel(store, first)
    assert p1.wait(timeout=180) == 0 and p2.wait(timeout=240) == 0
    assert "threads 2" in p2.stdout.read()  # half of the owner's 4 cores


@pytest.mark.process
def test_persona_generations_run_one_at_a_time_and_never_wait_for_training(store, worker):
    """Generations have a lane of their own (queue.LANE_LIMITS, one at a time unless the owner raises it):
    the second waits for the first, neither waits for a training job."""
    train = job_queue.create_job(store, "train", {})
    first, second = job_queue.create_job(store, "personas", {}), job_queue.create_job(store, "personas", {})
    procs = [worker(train, 10_000), worker(first, 10_000)]
    wait_for(lambda: status(store, train) == status(store, first) == "running")
    p2 = worker(second, 2)
    wait_for(lambda: job_queue.job_detail(store, second)["pid"] == p2.pid)
    time.sleep(2.0)  # several queue polls
    assert status(store, second) == "queued" and metric_steps(store, second) == []
    job_control.cancel(store, first)
    assert procs[1].wait(timeout=180) == 0
    assert p2.wait(timeout=240) == 0
    d1, d2 = job_queue.job_detail(store, first), job_queue.job_detail(store, second)
    assert d2["status"] == "succeeded" and d2["started_at"] >= d1["finished_at"]
    assert f"queued behind #{first} (" in p2.stdout.read()
    job_control.cancel(store, train)


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_the_app_and_two_jobs_write_one_store_at_once(store, worker, db_url, tmp_path):
    """The app starting up (it seeds the built-in personas in one transaction) while a training job and a
    persona generation write metrics, progress, checkpoints and heartbeats: every writer waits its turn,
    nothing fails, nothing is lost or written twice."""
    from conftest import free_port
    from helpers import wait_for_http

    from simulator.personas.builtin import BUILTIN_IDS
    from storage import Persona

    train, api = job_queue.create_job(store, "train", {}), job_queue.create_job(store, "personas", {})
    procs = [worker(train, 10_000), worker(api, 10_000)]
    wait_for(lambda: status(store, train) == status(store, api) == "running" and metric_steps(store, api))
    port, log = free_port(), tmp_path / "app.log"
    with open(log, "w") as out:
        app = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db", db_url], cwd=REPO,
                               env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}", app, log)
        steps_when_app_ready = [len(metric_steps(store, j)) for j in (train, api)]
        wait_for(lambda: all(len(metric_steps(store, j)) >= n + 3 for j, n in zip((train, api),
                                                                                  steps_when_app_ready)))
        assert status(store, train) == status(store, api) == "running"  # they wrote on, through the app's start
    finally:
        os.killpg(app.pid, signal.SIGTERM)
        app.wait(timeout=60)
    for job_id in (train, api):
        job_control.cancel(store, job_id)
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    text = log.read_text()
    assert f"store ready ({len(BUILTIN_IDS)} built-in personas added)" in text, text[-2000:]
    with read_scope(store) as s:
        assert s.query(Persona).count() == len(BUILTIN_IDS)
    for job_id, p in zip((train, api), procs):
        detail = job_queue.job_detail(store, job_id)
        steps = metric_steps(store, job_id)
        assert detail["status"] == "cancelled" and steps == list(range(1, len(steps) + 1))
        assert [c["step"] for c in detail["checkpoints"]] == steps
        assert "locked" not in p.stdout.read() and "locked" not in text


@pytest.mark.process
def test_an_api_bound_job_never_waits_behind_a_training_job(store, worker):
    """Only QUEUED_KINDS (the accelerator's) wait their turn: a persona generation starts at once."""
    assert "personas" in job_queue.JOB_KINDS and "personas" not in job_queue.QUEUED_KINDS
    first = job_queue.create_job(store, "train", {})
    p1 = worker(first, 10_000)
    wait_for(lambda: status(store, first) == "running")
    api = job_queue.create_job(store, "personas", {})
    p2 = worker(api, 2)
    assert p2.wait(timeout=240) == 0
    assert status(store, api) == "succeeded" and status(store, first) == "running"
    assert "queued behind" not in p2.stdout.read()
    job_control.cancel(store, first)
    assert p1.wait(timeout=180) == 0


@pytest.mark.process
def test_dead_running_job_does_not_block_the_queue(store, worker):
    first = job_queue.create_job(store, "train", {})
    second = job_queue.create_job(store, "train", {})
    p1 = worker(first, 10_000)
    wait_for(lambda: status(store, first) == "running")
    os.killpg(p1.pid, signal.SIGKILL)
    p1.wait()
    p2 = worker(second, 2)  # finds a dead "running" job ahead, marks it interrupted and runs
    assert p2.wait(timeout=240) == 0
    assert status(store, first) == "interrupted" and status(store, second) == "succeeded"


@pytest.mark.process
def test_cancel_while_queued(store, worker):
    """Changed semantics: Cancel of a job waiting in the queue signals its process, which marks itself
    cancelled (its owner is the only writer of its status); Cancel no longer writes it from outside."""
    first, second, p1, p2 = queue_behind_a_running_job(store, worker)
    assert job_control.cancel(store, second) in ("queued", "cancelled")
    assert p2.wait(timeout=180) != 0  # ended without running
    assert status(store, second) == "cancelled" and metric_steps(store, second) == []
    job_control.cancel(store, first, force=True)
    p1.wait(timeout=180)
    assert status(store, first) == "cancelled"


@pytest.mark.process
def test_launched_job_still_starting_up_is_not_stale(store):
    """A job process that has not sent its first heartbeat yet (imports on a busy machine) stays queued
    while it lives; once its process is gone it is interrupted."""
    job_id = job_queue.create_job(store, "train", {})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with session_scope(store) as s:
            job = s.get(Job, job_id)
            job.pid, job.heartbeat_at = sleeper.pid, utcnow() - timedelta(seconds=600)
        assert job_queue.job_detail(store, job_id, stale_after_s=0.5)["status"] == "queued"
        assert job_queue.reap_dead_jobs(store) == [] and status(store, job_id) == "queued"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert job_queue.job_detail(store, job_id)["status"] == "dead"
    assert job_queue.reap_dead_jobs(store) == [job_id]
    assert "is gone" in job_queue.job_detail(store, job_id)["error"]


def test_never_launched_queued_job_is_not_stale(store):
    job_id = job_queue.create_job(store, "train", {})
    assert job_queue.reap_dead_jobs(store) == [] and status(store, job_id) == "queued"
    assert job_control.cancel(store, job_id) == "cancelled"


# ------------------------------------------------------------------------------- one writer per job
def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def metric_values(store, job_id, name):
    series = job_queue.job_detail(store, job_id)["metrics"].get(name, {"step": [], "value": []})
    return dict(zip(series["step"], series["value"]))


def stall(store, worker, steps: int, stop_at: int = 2):
    """A job whose process stopped itself (SIGSTOP) after step `stop_at`, shown stalled by heartbeat age
    while still alive (the stall of the report); its row still says running."""
    job_id = job_queue.create_job(store, "train", {})
    p = worker(job_id, steps, stop_at=stop_at)
    wait_for(lambda: stopped(p.pid), timeout=120)
    wait_for(lambda: job_queue.job_detail(store, job_id, stale_after_s=1.0)["status"] == "stalled", timeout=120)
    assert status(store, job_id) == "running" and job_queue.reap_dead_jobs(store) == []
    return job_id, p


@pytest.mark.process
def test_stalled_owner_keeps_its_job_and_resume_refuses(store, worker):
    job_id, old = stall(store, worker, steps=6)
    with pytest.raises(JobError, match=f"still owned by live process {old.pid}"):
        job_control.reopen(store, job_id)
    with session_scope(store) as s:  # what a resume used to do: the job queued for a second process
        s.get(Job, job_id).status = "queued"
    second = worker(job_id, 6)
    assert second.wait(timeout=240) != 0
    assert f"owned by live process {old.pid}" in second.stdout.read()
    with session_scope(store) as s:
        s.get(Job, job_id).status = "running"
    os.killpg(old.pid, signal.SIGCONT)
    assert old.wait(timeout=240) == 0, old.stdout.read()
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "succeeded" and d["pid"] == old.pid
    assert metric_values(store, job_id, "writer") == {step: float(old.pid) for step in range(1, 7)}


@pytest.mark.process
def test_resume_with_stop_owner_kills_the_stalled_owner_then_continues(store, worker):
    job_id, old = stall(store, worker, steps=5)
    job_control.reopen(store, job_id, stop_owner=True)
    assert old.wait(timeout=180) == -signal.SIGKILL
    new = worker(job_id, 5)
    assert new.wait(timeout=240) == 0
    assert "start 2" in new.stdout.read()
    writers = metric_values(store, job_id, "writer")
    assert writers == {1: old.pid, 2: old.pid, 3: new.pid, 4: new.pid, 5: new.pid}
    assert status(store, job_id) == "succeeded"


@pytest.mark.process
def test_woken_process_that_lost_its_job_stops_without_writing(store, worker):
    """Second line of defence, for a lock that does not hold (e.g. the job folder seen from two hosts):
    the woken process checks the job row before writing and stops."""
    job_id, old = stall(store, worker, steps=400)
    lock = Path(job_queue.job_detail(store, job_id)["output_dir"]) / "owner.lock"
    lock.unlink()  # the new owner locks a fresh file: both hold "the" lock
    job_control.reopen(store, job_id)
    new = worker(job_id, 400)
    wait_for(lambda: len(metric_steps(store, job_id)) >= 5)
    os.killpg(old.pid, signal.SIGCONT)
    assert old.wait(timeout=180) != 0
    out = old.stdout.read()
    assert "stopped without writing" in out
    assert [line for line in out.splitlines() if line.startswith("wrote step")] == ["wrote step 1", "wrote step 2"]
    job_control.cancel(store, job_id)
    assert new.wait(timeout=180) == 0
    writers = metric_values(store, job_id, "writer")
    assert {w for step, w in writers.items() if step > 2} == {new.pid}
    assert job_queue.job_detail(store, job_id)["pid"] == new.pid


@pytest.mark.process
def test_kill_9_shows_dead_from_the_cli_alone(store, worker, db_url):
    """Changed semantics: listing writes nothing; the CLI shows the killed job "dead" (derived), with the
    reason, and the store still says running until a reaper (app startup, a queued job, resume) writes
    interrupted."""
    job_id = job_queue.create_job(store, "train", {}, name="killed-run")
    p = worker(job_id, 10_000)
    wait_for(lambda: status(store, job_id) == "running")
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert status(store, job_id) == "running"  # nobody has looked yet
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for args in (["jobs", str(job_id)], ["jobs"]):
        out = subprocess.run([sys.executable, "-m", "trainer", *args, "--db", db_url, "--json"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        (row,) = [json.loads(x) for x in out.stdout.splitlines()]
        assert row["id"] == job_id and row["status"] == "dead" and row["name"] == "killed-run"
        assert f"process {p.pid} is gone" in row["error"]
    assert status(store, job_id) == "running"
    out = subprocess.run([sys.executable, "-m", "trainer", "jobs", "99", "--db", db_url], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "job 99 does not exist" in out.stderr


def test_two_stores_sharing_a_home_have_their_own_job_folders_and_a_clash_is_refused(store, tmp_path):
    from storage import make_store

    other = make_store(f"sqlite:///{tmp_path / 'other.db'}")
    a, b = job_queue.create_job(store, "train", {}), job_queue.create_job(other, "train", {})
    assert a == b == 1 and store_id(store) != store_id(other)
    dir_a, dir_b = (job_queue.job_detail(e, 1)["output_dir"] for e in (store, other))
    assert dir_a != dir_b and Path(dir_a).is_dir() and Path(dir_b).is_dir()
    (Path(dir_a).parent / "2").mkdir()  # a folder left by a deleted job 2 (or a copy of this store)
    with pytest.raises(JobError, match="already exists"):
        job_queue.create_job(store, "train", {})
    assert [j["id"] for j in job_queue.list_jobs(store)] == [1]
    other.dispose()


def test_resume_point_is_the_newest_complete_checkpoint_recorded_or_on_disk(store, tmp_path):
    job_id = job_queue.create_job(store, "train", {})
    root = Path(job_queue.job_detail(store, job_id)["output_dir"]) / "checkpoints"
    for step in (1, 3):  # 1 recorded and complete, 3 complete on disk but killed before its record
        (root / f"step-{step:06d}").mkdir(parents=True)
        (root / f"step-{step:06d}" / STATE_FILE).write_text("")
    (root / "step-000004").mkdir()  # no state file: incomplete
    with JobContext(store, job_id, install_signals=False) as ctx:
        ctx.add_checkpoint(1, str(root / "step-000001"))
        ctx.add_checkpoint(2, str(root / "step-000002"))  # recorded, folder since pruned
    assert JobContext(store, job_id).resume_from == str(root / "step-000003")
    assert job_queue.last_checkpoint(store, job_id)["step"] == 2  # the store alone, for jobs without folders


def test_a_queued_job_says_what_it_waits_behind(store):
    """The CLI's line and every view's: the first live job ahead, its kind and its time left at its pace."""
    import os
    from datetime import timedelta

    from storage import Job, session_scope
    from storage.models import utcnow
    from trainer.jobs.backend import host_name
    from trainer.jobs.admission import queued_behind

    first = job_queue.create_job(store, "benchmark", {"policy": "default"}, name="b")
    second = job_queue.create_job(store, "compare", {"comparison_id": 1}, name="c")
    third = job_queue.create_job(store, "train", {}, name="t")
    now = utcnow()
    with session_scope(store) as s:
        for job_id, status in ((first, "running"), (second, "queued"), (third, "queued")):
            job = s.get(Job, job_id)
            job.status, job.pid, job.host, job.heartbeat_at = status, os.getpid(), host_name(), now
        running = s.get(Job, first)  # owned on another machine: live while its heartbeat is fresh
        running.host, running.started_at, running.progress = "gpu-node-2", now - timedelta(minutes=4), 0.5
    assert queued_behind(store, second).startswith(f"queued behind #{first} (benchmark, about ")
    assert "min left" in queued_behind(store, second)
    assert queued_behind(store, third).endswith(", then 1 more")
    assert queued_behind(store, first) == "" and queued_behind(store, None) == ""


def test_what_a_job_takes_and_what_fits(tiny_model_dir, monkeypatch):
    """trainer.jobs.admission: the owner's limits, a job's memory and threads, and the fit rule."""
    import torch

    from trainer.jobs import admission
    from trainer.plan_shapes import model_shape
    from trainer.plan_memory import kv_bytes_per_token

    monkeypatch.setenv(admission.CORES_VAR, "6")
    monkeypatch.setenv(admission.MEMORY_VAR, "10")
    limits = admission.machine_limits()
    assert (limits.cores, limits.memory_gib, limits.source) == (6, 10.0, "owner")
    bench = admission.job_resources("benchmark", {"policy": str(tiny_model_dir), "concurrency": 4, "max_tokens": 512},
                                    limits)
    shape, width = model_shape(str(tiny_model_dir)), 2 if torch.cuda.is_available() else 4
    weights_and_kv = shape.total_params * width + kv_bytes_per_token(shape, width) * 4 * 512
    assert bench.threads == 3 and bench.memory_gib == round(admission.PROCESS_GIB + weights_and_kv / 2 ** 30, 2)
    train = admission.job_resources("train", {"model": str(tiny_model_dir)}, limits)
    assert train.threads == 6 and 0 < train.memory_gib < 10 and "plan" in train.why
    alone = admission.job_resources("benchmark", {"policy": "vllm:default"}, limits)
    assert alone.memory_gib == 10 and "runs alone" in alone.why
    one = admission.JobResources(4.0, 3, "")
    assert admission.fits(train, [], limits)  # a lone job always starts
    assert admission.fits(one, [one], limits) and not admission.fits(one, [one, one], limits)  # cores
    assert not admission.fits(admission.JobResources(6.5, 1, ""), [one], limits)  # memory
    assert admission.read_resources("/nonexistent-job-folder", limits).threads == 6  # unrecorded: the machine
    monkeypatch.delenv(admission.CORES_VAR)
    monkeypatch.delenv(admission.MEMORY_VAR)
    assert admission.machine_limits().source == "machine"


def test_a_web_job_estimated_above_the_machine_is_refused_with_both_figures(store, tiny_model_dir, monkeypatch):
    """Not clamped to the limit (it would run alone and run out of memory): failed before it starts, saying
    what it needs and what jobs may take. From the command line it runs alone."""
    from simulator.access import ACCESS_ENV, Access
    from trainer.jobs import admission
    from trainer.jobs.context import JobContext

    monkeypatch.setenv(admission.MEMORY_VAR, "1")
    config = {"policy": str(tiny_model_dir), "concurrency": 256, "max_tokens": 131_072}
    needed = admission.job_resources("benchmark", config, admission.machine_limits()).memory_gib
    assert needed > 1
    web = Access.web(logged_in=False, allowed_paths=(str(tiny_model_dir.parent),))
    monkeypatch.setenv(ACCESS_ENV, web.to_json())
    job_id = job_queue.create_job(store, "benchmark", config)
    with pytest.raises(job_queue.JobError) as refused:
        with JobContext(store, job_id, install_signals=False):
            pass
    assert f"{needed:,.1f} GiB" in str(refused.value) and "1.0 GiB jobs may take (--job-memory-gib)" in str(refused.value)
    detail = job_queue.job_detail(store, job_id)
    assert detail["status"] == "failed" and f"{needed:,.1f} GiB" in detail["error"]
    monkeypatch.delenv(ACCESS_ENV)
    shell_job = job_queue.create_job(store, "benchmark", config)
    with JobContext(store, shell_job, install_signals=False) as ctx:
        assert ctx.resources.memory_gib == 1.0  # the command line's job takes the machine and runs alone
