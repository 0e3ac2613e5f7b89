"""Warm starts (trainer.jobs.starter): a background process forked from the starter is what a cold
`python -m trainer ARGS` is to the lab: its own session and pid, its environment, its log, its exit."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import wait_for

from trainer.jobs import queue as job_queue
from trainer.jobs import starter
from trainer.jobs.owner import pid_alive

pytestmark = pytest.mark.process


def finished(pid: int) -> bool:
    return wait_for(lambda: not pid_alive(pid), timeout=120)


def test_a_started_command_is_forked_warm_in_its_own_session_with_its_store_and_log(store, db_url, tmp_path):
    job_id = job_queue.create_job(store, "benchmark", {"policy": "x"}, name="listed")
    log = tmp_path / "listed.log"
    proc = job_queue.start_command(db_url, ["jobs", "--json"], log, "reap-test")
    assert isinstance(proc, starter.WarmProcess)  # torch here is a CPU build: forked, not a new interpreter
    assert proc.pid != os.getpid()
    sid = wait_for(lambda: _sid(proc.pid), timeout=30)
    assert sid == proc.pid  # a new session: cancel's killpg reaches it and nothing of the launcher's
    finished(proc.pid)
    row = json.loads(log.read_text().strip().splitlines()[-1])  # the store came through RLVER_LAB_DB
    assert (row["id"], row["name"], row["status"]) == (job_id, "listed", "queued")

    bad = job_queue.start_command(db_url, ["jobs", "999"], log, "reap-test")
    finished(bad.pid)
    assert log.read_text().rstrip().endswith("error: job 999 does not exist")  # appended, stderr included
    assert not Path(f"/proc/{bad.pid}").exists()  # reaped: no zombie left behind


def test_a_launcher_whose_environment_changed_gets_a_new_starter(store, db_url, tmp_path, monkeypatch):
    job_queue.create_job(store, "benchmark", {"policy": "x"}, name="listed")
    first = job_queue.start_command(db_url, ["jobs", "--json"], tmp_path / "a.log", "reap-test")
    finished(first.pid)
    before = starter._STARTER
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "elsewhere"))  # the lab's own settings: same starter
    same = job_queue.start_command(db_url, ["jobs", "--json"], tmp_path / "b.log", "reap-test")
    finished(same.pid)
    assert starter._STARTER is before
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # a library may read it at import: a new starter
    other = job_queue.start_command(db_url, ["jobs", "--json"], tmp_path / "c.log", "reap-test")
    finished(other.pid)
    assert isinstance(other, starter.WarmProcess) and starter._STARTER is not before
    assert json.loads((tmp_path / "c.log").read_text().strip().splitlines()[-1])["name"] == "listed"


def test_warm_starts_off_starts_a_cold_interpreter(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv(starter.WARM_ENV, "0")
    proc = job_queue.start_command(db_url, ["jobs", "999"], tmp_path / "cold.log", "reap-test")
    assert isinstance(proc, subprocess.Popen)
    proc.wait(timeout=120)
    assert "error: job 999 does not exist" in (tmp_path / "cold.log").read_text()


def _sid(pid: int) -> int | None:
    try:
        sid = os.getsid(pid)
    except ProcessLookupError:
        raise AssertionError(f"process {pid} ended before it could be looked at") from None
    return sid if sid == pid else None
