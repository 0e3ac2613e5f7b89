"""A judge run is a job: `python -m trainer judge` in its own real process against the real scripted
OpenAI-compatible server (a slow reply, one call in flight, so a kill lands mid-run), killed with SIGKILL
once some dialogues are judged in the store: the job shows as dead, a resume judges only the rest (no
dialogue judged twice) and ends with the scores an uninterrupted run gives; a resume while the run's
process lives is refused naming its pid, and `python -m trainer resume` continues it through the job runner."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import COLD_REPLIES, WARM_REPLIES, run_in_process, store_judged_dialogues, wait_for
from sqlalchemy import select

from storage import Dialogue, JudgeScore, read_scope, session_scope
from testkit.scripted_server import start_server
from trainer.__main__ import main
from trainer.jobs import queue as job_queue

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-judge-jobs"
DIALOGUES = {"warm": WARM_REPLIES, "cold": COLD_REPLIES, "warm0": WARM_REPLIES[:1], "warm1": WARM_REPLIES[1:],
             "cold0": COLD_REPLIES[:1], "mixed": [WARM_REPLIES[0], COLD_REPLIES[1]],
             "advice": [WARM_REPLIES[1], "Could you try a short walk each morning?"], "asks": ["What happened then?"]}


def trainer(*args: str, wait: bool = True) -> subprocess.Popen | subprocess.CompletedProcess:
    """`python -m trainer ARGS` with this test's lab home and the judge's key: run to its end in this process
    (wait=True), or started as a real process in its own process group, to be killed."""
    if wait:
        return run_in_process("trainer", *args, env={"OPENAI_API_KEY": KEY})
    env = dict(os.environ, OPENAI_API_KEY=KEY, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def stored(store) -> dict[int, tuple]:
    """dialogue id -> (row id, created_at, scores, reasons) of its judge rows judged without error. A row judged
    again is told by (id, created_at): SQLite gives a new row the id of the highest row just deleted."""
    with read_scope(store) as s:
        return {r.dialogue_id: (r.id, r.created_at, dict(r.scores), dict(r.reasons))
                for r in s.scalars(select(JudgeScore).where(JudgeScore.status == "ok"))}


def start_and_kill(store, db_url: str, server, at_least: int) -> tuple[dict[str, int], int, int]:
    """Store DIALOGUES in an eval run, start a judge run of it and SIGKILL it once `at_least` dialogues are
    judged; (dialogue ids by name, eval run id, job id)."""
    ids = store_judged_dialogues(store, DIALOGUES)
    with session_scope(store) as s:
        run_id = s.get(Dialogue, ids["warm"]).eval_run_id
    proc = trainer("judge", "--eval-run", str(run_id), "--model", "scripted", "--base-url", server.base_url,
                   "--max-in-flight", "1", "--db", db_url, "--json", wait=False)
    try:
        wait_for(lambda: proc.poll() is None and len(stored(store)) >= at_least, timeout=120, every=0.05)
        (job,) = job_queue.list_jobs(store, kind="judge")
        assert job["status"] == "running" and job["pid"] == proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return ids, run_id, job["id"]


@pytest.mark.process
def test_a_killed_judge_run_shows_dead_and_resumes_judging_only_the_rest(store, db_url, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with start_server(api_key=KEY, latency_s=0.4) as server:
        ids, run_id, job_id = start_and_kill(store, db_url, server, at_least=3)
        (job,) = job_queue.list_jobs(store, kind="judge")
        assert job["status"] == "dead" and job["stored_status"] == "running"
        before = stored(store)
        assert 3 <= len(before) < len(DIALOGUES)
        calls = server.calls

        resumed = trainer("judge", "--resume", str(job_id), "--db", db_url, "--json")
        assert resumed.returncode == 0, resumed.stderr
        out = json.loads(resumed.stdout.strip().splitlines()[-1])
        assert (out["job_id"], out["dialogues"], out["skipped"], out["judged"], out["ok"], out["left"]) == (
            job_id, len(DIALOGUES), len(before), len(DIALOGUES) - len(before), len(DIALOGUES) - len(before), 0)
        assert server.calls - calls == len(DIALOGUES) - len(before)  # one call per dialogue not yet judged
        after = stored(store)
        assert set(after) == set(ids.values())
        assert all(after[d] == row for d, row in before.items())  # the rows judged before the kill: untouched
        (job,) = job_queue.list_jobs(store, kind="judge")
        assert job["status"] == "succeeded" and job["step"] == job["total_steps"] == len(DIALOGUES)

        # an uninterrupted run of the same judge over the same dialogues (--force: all again) gives the same scores
        code = main(["judge", "--eval-run", str(run_id), "--model", "scripted", "--base-url", server.base_url,
                     "--force", "--db", db_url, "--json"])
    uninterrupted = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and (uninterrupted["judged"], uninterrupted["skipped"]) == (len(DIALOGUES), 0)
    again = stored(store)
    assert {d: r[2:] for d, r in again.items()} == {d: r[2:] for d, r in after.items()}
    assert all(again[d][:2] != after[d][:2] for d in after)  # judged anew, not skipped
    assert len({tuple(sorted(r[2].items())) for r in after.values()}) > 2  # the scores tell dialogues apart
    assert uninterrupted["means"] == out["means"]


@pytest.mark.process
def test_a_resume_while_the_judge_runs_is_refused_naming_its_pid_and_trainer_resume_continues_it(store, db_url,
                                                                                                 capsys):
    with start_server(api_key=KEY, latency_s=1.0) as server:
        ids = store_judged_dialogues(store, DIALOGUES)
        proc = trainer("judge", "--dialogues", *map(str, ids.values()), "--model", "scripted", "--base-url",
                       server.base_url, "--max-in-flight", "1", "--db", db_url, wait=False)
        try:
            wait_for(lambda: proc.poll() is None and len(stored(store)) >= 1, timeout=120, every=0.05)
            (job,) = job_queue.list_jobs(store, kind="judge")
            for args in (["judge", "--resume", str(job["id"])], ["resume", str(job["id"])]):  # from this process
                assert main([*args, "--db", db_url]) == 2
                assert f"job {job['id']} is still owned by live process {proc.pid}" in capsys.readouterr().err
            assert proc.poll() is None  # the refusals left the owner running
            judged = len(stored(store))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert job_queue.get_job(store, job["id"])["status"] == "dead"
        before = stored(store)
        assert len(before) >= judged

        resumed = trainer("resume", str(job["id"]), "--db", db_url, "--json")  # through trainer.job_runner
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and set(result["metrics"]) == {
        "empathic_depth", "core_insight", "solution_crafting", "dialogue_guidance", "style_adaptability"}
    after = stored(store)
    assert set(after) == set(ids.values()) and all(after[d] == row for d, row in before.items())
    detail = job_queue.job_detail(store, job["id"])
    assert detail["metrics"]["judge_empathic_depth"]["value"] == [result["metrics"]["empathic_depth"]]
    assert "job {} running (pid".format(job["id"]) in detail["log_tail"]


@pytest.mark.process
def test_ctrl_c_stops_a_forced_judge_run_and_its_resume_keeps_what_it_judged_again(store, db_url, monkeypatch):
    """--force judges every dialogue again; stopped by Ctrl-C (the job ends cancelled, the calls in flight
    abandoned), its resume judges again only the dialogues the run had not reached."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ids = store_judged_dialogues(store, DIALOGUES, eval_run=False)
    args = ["--collection", "judge-test", "--model", "scripted", "--db", db_url]
    with start_server(api_key=KEY) as server:
        port = server.base_url.split(":")[2].split("/")[0]
        assert main(["judge", *args, "--base-url", server.base_url, "--json"]) == 0
    first, (first_job,) = stored(store), job_queue.list_jobs(store, kind="judge")
    assert set(first) == set(ids.values())
    with start_server(api_key=KEY, latency_s=0.5, port=int(port)) as server:  # the same endpoint: the same judge
        proc = trainer("judge", *args, "--base-url", server.base_url, "--force", "--max-in-flight", "1", wait=False)
        job_id = wait_for(lambda: proc.poll() is None and next(
            (j["id"] for j in job_queue.list_jobs(store, kind="judge") if j["id"] != first_job["id"]
             and (j["step"] or 0) >= 2), None), timeout=120)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 1
        job = job_queue.get_job(store, job_id)
        rejudged = {d for d, row in stored(store).items() if row[:2] != first[d][:2]}
        assert job["status"] == "cancelled" and 2 <= len(rejudged) < len(DIALOGUES) and job["step"] == len(rejudged)
        calls = server.calls

        resumed = trainer("judge", "--resume", str(job_id), "--db", db_url, "--json")
        assert resumed.returncode == 0, resumed.stderr
        out = json.loads(resumed.stdout.strip().splitlines()[-1])
        assert (out["skipped"], out["judged"], out["left"]) == (len(rejudged), len(DIALOGUES) - len(rejudged), 0)
        assert server.calls - calls == len(DIALOGUES) - len(rejudged)
    after = stored(store)
    assert all(after[d][:2] != first[d][:2] for d in after)  # every dialogue judged again by the forced run ...
    assert {d: r[2:] for d, r in after.items()} == {d: r[2:] for d, r in first.items()}  # ... to the same scores
    assert job_queue.get_job(store, job_id)["status"] == "succeeded"


@pytest.mark.parametrize("args, message", [
    (["--collection", "x"], "--model: required"),
    (["--resume", "99"], "--resume: job 99 does not exist"),
    (["--resume", "1", "--eval-run", "3", "--model", "m"], "leave out --eval-run, --model"),
])
def test_judge_command_names_what_is_wrong_and_records_nothing(store, db_url, capsys, args, message):
    assert main(["judge", *args, "--db", db_url]) == 2
    assert message in capsys.readouterr().err and job_queue.list_jobs(store) == []
