"""trainer.job_runner.run_job in this process, for jobs that cannot run: the exit status and a message
naming the problem (the jobs that run are exercised through the CLIs in test_train_cli.py,
test_benchmark_cli.py and test_app_training.py)."""
from __future__ import annotations

from storage import Job, session_scope
from trainer.job_runner import EXIT_CANNOT_RUN, run_job
from trainer.jobs import queue as job_queue


def test_unknown_job_cannot_run(store, capsys):
    assert run_job(store, 999) == EXIT_CANNOT_RUN
    assert "error: job 999 does not exist" in capsys.readouterr().err


def test_unknown_kind_is_named_and_the_job_left_queued(store, capsys):
    job_id = job_queue.create_job(store, "train", {})
    with session_scope(store) as s:
        s.get(Job, job_id).kind = "distill"
    assert run_job(store, job_id) == EXIT_CANNOT_RUN
    assert f"job {job_id}: unknown kind 'distill'; one of train, benchmark" in capsys.readouterr().err
    assert job_queue.job_detail(store, job_id)["status"] == "queued"


def test_finished_job_cannot_run_again(store, capsys):
    job_id = job_queue.create_job(store, "benchmark", {})
    with session_scope(store) as s:
        s.get(Job, job_id).status = "succeeded"
    assert run_job(store, job_id, as_json=True) == EXIT_CANNOT_RUN
    out = capsys.readouterr()
    assert f"job {job_id} is succeeded; only a queued job can run" in out.err
    assert f'"job_id": {job_id}, "status": "succeeded"' in out.out.splitlines()[-1]
