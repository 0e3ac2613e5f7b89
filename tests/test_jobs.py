"""The job system with real processes and a real SQLite store.

The worker below is a real job process: it runs JobContext exactly as `python -m trainer job` does,
around a loop of short units (metrics, progress, a checkpoint per unit), so queueing, heartbeats,
kill -9, cancel and resume are exercised without loading a model. `launch` itself (the `python -m trainer
job` command) is exercised with a real benchmark job in tests/test_benchmark_cli.py.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import wait_for

from storage import Job, read_scope
from trainer import jobs
from trainer.jobs import JobContext, JobError

REPO = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent("""
    import sys, time
    from storage import make_engine
    from trainer.jobs import JobContext
    url, job_id, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    engine = make_engine(url)
    with JobContext(engine, job_id, heartbeat_s=0.2, stale_after_s=5) as ctx:
        start = ctx.last_checkpoint["step"] if ctx.last_checkpoint else 0
        print("start", start, flush=True)
        for step in range(start + 1, steps + 1):
            if ctx.cancelled:
                break
            time.sleep(0.15)
            ctx.log_metrics(step, {"reward": step / 10, "loss": 1.0 / step})
            ctx.progress(step, steps)
            ctx.add_checkpoint(step, f"ckpt-{step}", {"reward": step / 10})
""")


@pytest.fixture
def worker(tmp_path, db_url):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs: list[subprocess.Popen] = []

    def start(job_id: int, steps: int) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        p = subprocess.Popen([sys.executable, str(script), db_url, str(job_id), str(steps)], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()




def status(engine, job_id):
    with read_scope(engine) as s:
        return s.get(Job, job_id).status


def metric_steps(engine, job_id, name="reward"):
    return jobs.job_detail(engine, job_id)["metrics"].get(name, {}).get("step", [])


# ------------------------------------------------------------------------------------- service functions
def test_create_job_records_queued_job_with_code_version(engine):
    job_id = jobs.create_job(engine, "benchmark", {"limit": 2}, name="b", seed=7)
    [row] = jobs.list_jobs(engine)
    assert row["id"] == job_id and row["status"] == "queued" and row["seed"] == 7
    assert row["config"] == {"limit": 2} and row["code_version"]
    assert row["output_dir"].endswith(f"jobs/{job_id}")


def test_create_job_rejects_bad_input(engine):
    with pytest.raises(JobError, match="kind"):
        jobs.create_job(engine, "nonsense", {})
    with pytest.raises(JobError, match="config"):
        jobs.create_job(engine, "train", ["not", "a", "dict"])


def test_clone_copies_config_and_points_at_parent(engine):
    job_id = jobs.create_job(engine, "train", {"lr": 1e-6}, name="ppo", seed=3)
    new_id = jobs.clone(engine, job_id)
    d = jobs.job_detail(engine, new_id)
    assert new_id != job_id and d["parent_id"] == job_id and d["status"] == "queued"
    assert d["config"] == {"lr": 1e-6} and d["seed"] == 3 and d["kind"] == "train"


def test_context_records_metrics_once_per_step_and_succeeds(engine):
    job_id = jobs.create_job(engine, "train", {})
    with JobContext(engine, job_id, install_signals=False) as ctx:
        assert status(engine, job_id) == "running"
        for step in (1, 2):
            ctx.log_metrics(step, {"reward": 0.1 * step})
            ctx.progress(step, 4)
        ctx.log_metrics(2, {"reward": 0.5, "kl": 0.01})  # step 2 written again: replaced, not duplicated
        ctx.add_checkpoint(2, "/ckpt/2", {"reward": 0.5})
    d = jobs.job_detail(engine, job_id)
    assert d["status"] == "succeeded" and d["error"] == "" and d["finished_at"] is not None
    assert d["metrics"]["reward"] == {"step": [1, 2], "value": [pytest.approx(0.1), 0.5]}
    assert d["metrics"]["kl"] == {"step": [2], "value": [0.01]}
    assert d["step"] == 2 and d["total_steps"] == 4 and d["progress"] == 0.5
    assert [c["path"] for c in d["checkpoints"]] == ["/ckpt/2"]
    assert JobContext(engine, job_id).resume_from == "/ckpt/2"


def test_context_marks_failed_with_error_text(engine):
    job_id = jobs.create_job(engine, "train", {})
    with pytest.raises(RuntimeError):
        with JobContext(engine, job_id, install_signals=False):
            raise RuntimeError("simulator unreachable at step 3")
    d = jobs.job_detail(engine, job_id)
    assert d["status"] == "failed" and d["error"] == "RuntimeError: simulator unreachable at step 3"


def test_context_marks_cancelled(engine):
    job_id = jobs.create_job(engine, "train", {})
    with JobContext(engine, job_id, install_signals=False) as ctx:
        ctx.request_cancel()
        ctx.check_cancelled()
        raise AssertionError("check_cancelled must raise")  # pragma: no cover
    assert status(engine, job_id) == "cancelled"


def test_finished_job_cannot_run_again_and_only_ended_jobs_resume(engine, db_url):
    job_id = jobs.create_job(engine, "train", {})
    with JobContext(engine, job_id, install_signals=False):
        pass
    with pytest.raises(JobError, match="succeeded"):
        with JobContext(engine, job_id, install_signals=False):
            pass
    with pytest.raises(JobError, match="only an interrupted, failed or cancelled"):
        jobs.resume(engine, db_url, job_id)
    with pytest.raises(JobError, match="only a queued job"):
        jobs.launch(db_url, job_id)
    with pytest.raises(JobError, match="does not exist"):
        jobs.cancel(engine, 999)


def test_log_tail_reads_last_lines(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("".join(f"line {i}\n" for i in range(500)))
    assert jobs.log_tail(str(log), 3) == "line 497\nline 498\nline 499"
    assert jobs.log_tail(str(tmp_path / "missing.log")) == ""


# ---------------------------------------------------------------------------------------- real processes
def test_job_process_heartbeats_and_writes_metrics(engine, worker):
    job_id = jobs.create_job(engine, "train", {})
    p = worker(job_id, 4)
    assert p.wait(timeout=120) == 0, p.stdout.read()
    d = jobs.job_detail(engine, job_id)
    assert d["status"] == "succeeded" and d["pid"] == p.pid and d["heartbeat_at"] is not None
    assert d["metrics"]["reward"]["step"] == [1, 2, 3, 4] and d["progress"] == 1.0
    assert d["started_at"] <= d["finished_at"]


def test_kill_9_marks_interrupted_and_resume_continues_without_duplicates(engine, worker):
    job_id = jobs.create_job(engine, "train", {})
    p = worker(job_id, 10_000)
    wait_for(lambda: len(metric_steps(engine, job_id)) >= 3)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert status(engine, job_id) == "running"  # nobody has noticed yet
    assert jobs.mark_stale_jobs(engine) == [job_id]
    d = jobs.job_detail(engine, job_id)
    assert d["status"] == "interrupted" and "is gone" in d["error"]
    done = len(d["metrics"]["reward"]["step"])
    last = d["checkpoints"][-1]["step"]
    assert last in (done, done - 1)

    jobs.reopen(engine, job_id)
    p2 = worker(job_id, last + 3)
    assert p2.wait(timeout=120) == 0
    out = p2.stdout.read()
    assert f"start {last}" in out
    assert metric_steps(engine, job_id) == list(range(1, last + 4))
    assert status(engine, job_id) == "succeeded"


def test_stale_heartbeat_marks_interrupted(engine, worker):
    job_id = jobs.create_job(engine, "train", {})
    p = worker(job_id, 10_000)
    wait_for(lambda: status(engine, job_id) == "running")
    os.killpg(p.pid, signal.SIGSTOP)  # alive but frozen: its heartbeat stops
    try:
        time.sleep(1.0)
        assert jobs.mark_stale_jobs(engine, stale_after_s=60) == []
        assert jobs.mark_stale_jobs(engine, stale_after_s=0.5) == [job_id]
        assert "no heartbeat" in jobs.job_detail(engine, job_id)["error"]
    finally:
        os.killpg(p.pid, signal.SIGKILL)


def test_cancel_signals_the_process_group_and_job_ends_cancelled(engine, worker):
    job_id = jobs.create_job(engine, "train", {})
    p = worker(job_id, 10_000)
    wait_for(lambda: len(metric_steps(engine, job_id)) >= 2)
    assert jobs.cancel(engine, job_id) == "running"  # the job itself finishes its unit, then marks itself
    assert p.wait(timeout=60) == 0
    d = jobs.job_detail(engine, job_id)
    assert d["status"] == "cancelled" and d["finished_at"] is not None
    steps = d["metrics"]["reward"]["step"]
    assert steps == list(range(1, len(steps) + 1))  # the last unit was completed, none half-written


def queue_behind_a_running_job(engine, worker):
    """A long job running and a short second one whose process is waiting in the queue behind it."""
    first = jobs.create_job(engine, "train", {})
    second = jobs.create_job(engine, "train", {})
    p1 = worker(first, 10_000)
    wait_for(lambda: status(engine, first) == "running")
    p2 = worker(second, 2)
    wait_for(lambda: jobs.job_detail(engine, second)["pid"] == p2.pid)
    return first, second, p1, p2


def test_second_job_waits_in_queue_until_the_first_ends(engine, worker):
    first, second, p1, p2 = queue_behind_a_running_job(engine, worker)
    time.sleep(2.0)  # several queue polls
    assert status(engine, second) == "queued" and metric_steps(engine, second) == []
    jobs.cancel(engine, first)
    assert p1.wait(timeout=60) == 0
    assert p2.wait(timeout=120) == 0
    d1, d2 = jobs.job_detail(engine, first), jobs.job_detail(engine, second)
    assert d1["status"] == "cancelled" and d2["status"] == "succeeded"
    assert d2["started_at"] >= d1["finished_at"]
    assert "queued behind job(s) 1" in p2.stdout.read()


def test_dead_running_job_does_not_block_the_queue(engine, worker):
    first = jobs.create_job(engine, "train", {})
    second = jobs.create_job(engine, "train", {})
    p1 = worker(first, 10_000)
    wait_for(lambda: status(engine, first) == "running")
    os.killpg(p1.pid, signal.SIGKILL)
    p1.wait()
    p2 = worker(second, 2)  # finds a dead "running" job ahead, marks it interrupted and runs
    assert p2.wait(timeout=120) == 0
    assert status(engine, first) == "interrupted" and status(engine, second) == "succeeded"


def test_cancel_while_queued(engine, worker):
    first, second, p1, p2 = queue_behind_a_running_job(engine, worker)
    assert jobs.cancel(engine, second) == "cancelled"
    assert p2.wait(timeout=60) != 0  # ended without running
    assert status(engine, second) == "cancelled" and metric_steps(engine, second) == []
    jobs.cancel(engine, first, force=True)
    p1.wait(timeout=60)
    assert status(engine, first) == "cancelled"


def test_never_launched_queued_job_is_not_stale(engine):
    job_id = jobs.create_job(engine, "train", {})
    assert jobs.mark_stale_jobs(engine) == [] and status(engine, job_id) == "queued"
    assert jobs.cancel(engine, job_id) == "cancelled"
