"""A job that waits says so: a benchmark started behind a running training job answers "queued behind #N (train,
about ... left)" with its expectation including the wait, and every view that starts jobs opens the one jobs list."""
from __future__ import annotations

import os
from datetime import timedelta

import pytest
from helpers import wait_for

from app.services.job_wait import expectation_with_wait, queue_wait, time_left_s
from storage import Job, session_scope
from storage.models import utcnow
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.owner import JobLock


def _running_training(store, progress: float, started_s_ago: float) -> tuple[int, JobLock]:
    """A training job shown as running: this process holds its lock and beats for it (a live job's process)."""
    job_id = job_queue.create_job(store, "train", {"steps": 10, "dialogues_per_step": 2}, name="ahead")
    lock = JobLock(job_queue.get_job(store, job_id)["output_dir"])
    assert lock.acquire()
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        job.status, job.progress, job.step, job.total_steps = "running", progress, int(progress * 10), 10
        job.pid, job.heartbeat_at, job.started_at = os.getpid(), utcnow(), utcnow() - timedelta(seconds=started_s_ago)
    return job_id, lock


def test_a_queued_job_names_what_it_waits_for_and_how_long(store):
    ahead, lock = _running_training(store, 0.5, 120)
    try:
        queued = job_queue.create_job(store, "benchmark", {"policy": "default"}, name="behind")
        with session_scope(store) as s:
            s.get(Job, queued).pid = os.getpid()  # its process waits its turn
        text, wait = queue_wait(store, queued)
        assert text.startswith(f"queued behind #{ahead} (train, about ") and wait == pytest.approx(120, abs=30)
        assert "It waits first: about 2 min before it starts." in expectation_with_wait("Expected: about 1 min.", wait)
        assert "a time not known yet" in expectation_with_wait("Expected: about 1 min.", None)
        assert queue_wait(store, ahead) == ("", 0.0)
        with session_scope(store) as s:
            assert time_left_s(s.get(Job, ahead)) == pytest.approx(120, abs=30)
    finally:
        lock.release()


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.model
def test_a_benchmark_behind_a_training_job_says_queued_behind_it(lab_server, browser_page):
    from playwright.sync_api import expect

    store, page = lab_server.store, browser_page
    ahead, lock = _running_training(store, 0.5, 60)
    try:
        page.get_by_role("tab", name="Benchmark").click()
        page.locator("#bench-quick input").check()
        expect(page.locator("#bench-expected")).to_contain_text("1 dialogue × 10 replies × 16 tokens")
        page.locator("#bench-start").click()
        expect(page.locator("#bench-msg")).to_contain_text(f"is queued behind #{ahead} (train, about")
        expect(page.locator("#bench-msg")).to_contain_text("It waits first: about")
        expect(page.locator("#bench-msg")).not_to_contain_text("started")
        bench = job_queue.list_jobs(store, kind="benchmark")[0]["id"]
        page.locator("#bench-all-jobs").click()  # the one jobs list: the training job and the benchmark
        expect(page.locator("#train-jobs")).to_contain_text("ahead")
        expect(page.locator("#train-jobs")).to_contain_text(f"queued behind #{ahead}")
        job_control.cancel(store, bench)
        wait_for(lambda: job_queue.get_job(store, bench)["status"] == "cancelled", timeout=240)
    finally:
        lock.release()
        with session_scope(store) as s:
            s.get(Job, ahead).status = "cancelled"
