"""A calibration as a job (trainer.benchmarking.calibrate_jobs) and the People view's service that starts it
(app.services.people.calibrations), on a real SQLite store with a scripted simulator: started as the view
starts it, the job judges every reply of a small human set in its own process, then fits and saves the
calibration and records it on the job; a job killed while it judges resumes and ends with the calibration an
uninterrupted one saves; a running one shows its stage, turns judged and time left; bad input is refused
naming the field, with nothing recorded."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import wait_for
from sqlalchemy import func, select

from app.services.people import calibrations
from simulator.evaluation.human_corpora import import_corpus
from simulator.user.calibration import Calibration, load_calibration, save_calibration
from storage import make_store, read_scope
from storage.ratings import ShadowJudgement
from testkit.human_corpus import quality_dialogue
from trainer.benchmarking.calibrate_jobs import calibrate_job, create_calibrate_job
from trainer.jobs import queue as job_queue
from trainer.jobs.foreground import run_foreground

REPO = Path(__file__).resolve().parent.parent
FOLLOWER, SLOW = "python:testkit.scripted_shadow:follower", "python:testkit.scripted_shadow:slow_follower"


def people(store, n: int, name: str = "lab") -> None:
    rng = np.random.default_rng(4)
    import_corpus(store, "\n".join(json.dumps(quality_dialogue(k, rng)) for k in range(n)), "jsonl", name)


def judged(store) -> int:
    with read_scope(store) as s:
        return int(s.scalar(select(func.count(ShadowJudgement.id))))


def ended(store, job_id: int) -> dict:
    wait_for(lambda: job_queue.get_job(store, job_id)["status"] in ("succeeded", "failed", "dead", "cancelled"),
             timeout=300)
    return job_queue.get_job(store, job_id)


@pytest.mark.process
def test_a_calibrate_job_started_from_the_view_judges_fits_and_saves(store, db_url):
    from storage.db import lab_home

    people(store, 6)
    message, job_id = calibrations.start_calibration(store, db_url, " human:lab ", FOLLOWER, "", "lab-cal", 2.0,
                                                     method="scale")
    assert job_id and message == f"Calibrate job {job_id} started: `lab-cal`."
    job = ended(store, job_id)
    assert job["status"] == "succeeded" and job["step"] == job["total_steps"] == 30, job.get("error")
    result, config = job["config"]["result"], job["config"]
    saved = load_calibration("lab-cal", lab_home())
    assert result["hash"] == saved.hash() and result["path"] == str(lab_home() / "calibrations" / "lab-cal.json")
    assert result["simulator_fingerprint_hash"] == config["fingerprint_hash"] == saved.simulator_fingerprint_hash
    assert result["n_turns"] == 30 and result["folds"] == 2 and config["stage"] == "done"
    for side in ("before", "after"):
        assert result[side]["turns"]["spearman"] == saved.report[side]["turns"]["spearman"]
    assert result["before"]["turns"]["spearman"]["value"] > 0.4  # the follower ranks replies as people do
    table, resumable, live = calibrations.calibrate_jobs_md(store)
    assert "| succeeded | 30/30 |" in table and f"`{result['hash']}`" in table and resumable is None and not live
    listed = calibrations.saved_md()
    assert f"| `lab-cal` | scale | `{saved.simulator_fingerprint_hash}` | 30 | " \
        f"{calibrations.before_after(saved.report, 'spearman')} |" in listed
    assert result["map"] == saved.data["map"] == "scale" and len(saved.knots_x) == 2
    # judged already: a second calibration of the same simulator plays nothing and fits at once, here with the
    # least-squares map and the reply signal (its held-out figures a third side, its weights in the file)
    _, again = calibrations.start_calibration(store, db_url, "human:lab", FOLLOWER, "", "lab-cal-2", 3, True)
    second = ended(store, again)
    assert second["status"] == "succeeded" and judged(store) == 30
    with_signal = load_calibration("lab-cal-2", lab_home())
    assert with_signal.report["folds"] == 3 and with_signal.reply_signal is not None
    assert with_signal.data["map"] == second["config"]["calibration"]["map"] == "predict"  # the default
    assert second["config"]["result"]["after_signal"]["turns"]["spearman"] == \
        with_signal.report["after_signal"]["turns"]["spearman"]
    assert calibrations.before_after(with_signal.report, "spearman").count(" -> ") == 2


def test_the_view_refuses_bad_input_naming_the_field_and_records_nothing(store, tmp_path):
    people(store, 3)
    cases = {("human:lab", "offline", "Bad/../name", 2): "--name: 'Bad/../name' is not a name",
             ("human:lab", "offline", "", 2): "--name: '' is not a name",
             ("human:nobody", "offline", "ok", 2): "--set: 'human:nobody' names no stored human dialogues",
             ("people", "offline", "ok", 2): "--set: 'people' is not a human set",
             ("human:lab", "nonsense:x", "ok", 2): "--simulator: simulator: unknown simulator 'nonsense:x'",
             ("human:lab", "offline", "ok", 1): "--folds: must be a whole number of 2 or more, got 1",
             ("human:lab", "offline", "ok", 2.5): "--folds: a whole number of 2 or more, got 2.5",
             ("human:lab", "offline", "ok", None): "--folds: a whole number of 2 or more, got None",
             ("human:lab", "offline", "ok", 4): "--folds: 4 folds need at least 4 dialogues; human:lab has 3"}
    message, job_id = calibrations.start_calibration(store, "sqlite:///unused.db", "human:lab", "offline", "", "ok",
                                                     2, False, "isotonic")
    assert job_id is None and "--map: must be one of predict, scale, got 'isotonic'" in message.replace("\\", "")
    for (set_spec, simulator, name, folds), problem in cases.items():
        message, job_id = calibrations.start_calibration(store, "sqlite:///unused.db", set_spec, simulator, "",
                                                         name, folds)
        assert job_id is None and message.startswith("**Not started:**"), message
        assert problem in message.replace("\\", ""), (problem, message)  # md() escapes the punctuation
    assert job_queue.list_jobs(store, kind="calibrate") == []
    assert not (tmp_path / "lab_home" / "calibrations").exists()
    save_calibration(Calibration("kept", [-1.0, 1.0], [-2.0, 2.0]), tmp_path / "lab_home")  # not to be replaced
    message, job_id = calibrations.start_calibration(store, "sqlite:///unused.db", "human:lab", "offline", "",
                                                     "kept", 2)
    assert job_id is None and "--name: a calibration named 'kept' already exists" in message.replace("\\", "")
    assert load_calibration("kept", tmp_path / "lab_home").knots_y == [-2.0, 2.0]
    assert job_queue.list_jobs(store, kind="calibrate") == []


@pytest.mark.process
def test_a_calibrate_job_killed_while_judging_resumes_to_the_uninterrupted_calibration(db_url, tmp_path,
                                                                                       monkeypatch):
    store = make_store(db_url)
    people(store, 4)
    job_id = create_calibrate_job(store, {"spec": SLOW}, "human:lab", "resumed", folds=2, seed=5, n_boot=100)
    job_queue.launch(db_url, job_id)
    pid = wait_for(lambda: job_queue.get_job(store, job_id)["pid"], timeout=120)
    try:
        wait_for(lambda: judged(store) >= 5, timeout=180, every=0.05)
    finally:
        os.killpg(pid, signal.SIGKILL)
    job = wait_for(lambda: (j := job_queue.get_job(store, job_id))["status"] == "dead" and j, timeout=120)
    assert 5 <= judged(store) < 20 and "result" not in job["config"]
    out = subprocess.run([sys.executable, "-m", "trainer", "resume", str(job_id), "--db", db_url, "--json"], cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    job = job_queue.get_job(store, job_id)
    assert job["status"] == "succeeded" and job["step"] == job["total_steps"] == 20 and judged(store) == 20
    resumed = load_calibration("resumed")
    # the same set in a second store and lab folder, calibrated without interruption (in this process)
    other_home = tmp_path / "other_home"
    monkeypatch.setenv("RLVER_LAB_HOME", str(other_home))
    other = make_store(f"sqlite:///{tmp_path / 'other.db'}")
    people(other, 4)
    other_id = create_calibrate_job(other, {"spec": SLOW}, "human:lab", "resumed", folds=2, seed=5, n_boot=100)
    summary = run_foreground(other, other_id, lambda ctx: calibrate_job(other, ctx))
    uninterrupted = load_calibration("resumed", other_home)
    assert summary["calibration"]["hash"] == job["config"]["result"]["hash"] == resumed.hash() == uninterrupted.hash()
    assert (resumed.knots_x, resumed.knots_y, resumed.report) == (uninterrupted.knots_x, uninterrupted.knots_y,
                                                                  uninterrupted.report)
    store.dispose()
    other.dispose()


def test_a_running_calibrate_job_shows_its_stage_turns_judged_and_time_left(store):
    from datetime import timedelta

    from trainer.jobs.context import JobContext

    people(store, 3)
    job_id = create_calibrate_job(store, {"spec": FOLLOWER}, "human:lab", "live-cal", folds=2)
    with JobContext(store, job_id, install_signals=False) as ctx:
        ctx.record_config("stage", "judging")
        ctx.progress(5, 15)
        started = job_queue.get_job(store, job_id)["started_at"]
        table, resumable, live = calibrations.calibrate_jobs_md(store, now=started + timedelta(seconds=20))
    shown = table.replace("\\", "")  # md() escapes the parentheses
    assert "| `live-cal` | `human:lab` |" in shown and "| running (judging) | 5/15 | ~40 s |  |" in shown, table
    assert live and resumable is None
