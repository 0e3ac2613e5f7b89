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
from trainer.jobs.commands import run_command, start_command
from trainer.jobs.owner import pid_alive

pytestmark = pytest.mark.process


def finished(pid: int) -> bool:
    return wait_for(lambda: not pid_alive(pid), timeout=120)


def test_a_started_command_is_forked_warm_in_its_own_session_with_its_store_and_log(store, db_url, tmp_path):
    job_id = job_queue.create_job(store, "benchmark", {"policy": "x"}, name="listed")
    log = tmp_path / "listed.log"
    proc = start_command(db_url, ["jobs", "--json"], log, "reap-test")
    assert isinstance(proc, starter.WarmProcess)  # torch here is a CPU build: forked, not a new interpreter
    assert proc.pid != os.getpid()
    sid = wait_for(lambda: _sid(proc.pid), timeout=30)
    assert sid == proc.pid  # a new session: cancel's killpg reaches it and nothing of the launcher's
    finished(proc.pid)
    row = json.loads(log.read_text().strip().splitlines()[-1])  # the store came through RLVER_LAB_DB
    assert (row["id"], row["name"], row["status"]) == (job_id, "listed", "queued")

    bad = start_command(db_url, ["jobs", "999"], log, "reap-test")
    finished(bad.pid)
    assert log.read_text().rstrip().endswith("error: job 999 does not exist")  # appended, stderr included
    assert not Path(f"/proc/{bad.pid}").exists()  # reaped: no zombie left behind


def test_a_launcher_whose_environment_changed_gets_a_new_starter(store, db_url, tmp_path, monkeypatch):
    job_queue.create_job(store, "benchmark", {"policy": "x"}, name="listed")
    first = start_command(db_url, ["jobs", "--json"], tmp_path / "a.log", "reap-test")
    finished(first.pid)
    before = starter._STARTER
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "elsewhere"))  # the lab's own settings: same starter
    same = start_command(db_url, ["jobs", "--json"], tmp_path / "b.log", "reap-test")
    finished(same.pid)
    assert starter._STARTER is before
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # a library may read it at import: a new starter
    other = start_command(db_url, ["jobs", "--json"], tmp_path / "c.log", "reap-test")
    finished(other.pid)
    assert isinstance(other, starter.WarmProcess) and starter._STARTER is not before
    assert json.loads((tmp_path / "c.log").read_text().strip().splitlines()[-1])["name"] == "listed"


def test_warm_starts_off_starts_a_cold_interpreter(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv(starter.WARM_ENV, "0")
    proc = start_command(db_url, ["jobs", "999"], tmp_path / "cold.log", "reap-test")
    assert isinstance(proc, subprocess.Popen)
    proc.wait(timeout=120)
    assert "error: job 999 does not exist" in (tmp_path / "cold.log").read_text()


@pytest.mark.parametrize("warm", ["1", "0"])
def test_a_command_run_to_its_end_leaves_its_output_and_one_past_its_time_is_killed(store, db_url, tmp_path,
                                                                                    monkeypatch, warm):
    """run_command (the Training view's plans): warm or cold, it waits for the command's end; past its time the
    command's whole process group is killed and it says so."""
    monkeypatch.setenv(starter.WARM_ENV, warm)
    monkeypatch.setenv("RLVER_LAB_DB", db_url)  # run_command passes the launcher's environment on
    job_queue.create_job(store, "benchmark", {"policy": "x"}, name="listed")
    assert run_command(["jobs", "--json"], tmp_path / "jobs.out", timeout_s=300)
    assert json.loads((tmp_path / "jobs.out").read_text().strip().splitlines()[-1])["name"] == "listed"
    assert run_command(["jobs", "999"], tmp_path / "missing.out", timeout_s=300)
    assert (tmp_path / "missing.out").read_text().rstrip().endswith("error: job 999 does not exist")

    late = tmp_path / "late.out"  # the CPU demo's plan trains a probe step for minutes on this machine
    assert run_command(["plan", "--preset", "cpu-demo", "--json"], late, timeout_s=3.0) is False
    wait_for(lambda: not _writers(late), timeout=30)  # nothing left running with the output open
    assert "{" not in late.read_text()  # killed before it could print its plan


def _writers(path: Path) -> list[int]:
    """The processes that have `path` open."""
    pids = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == str(path) for fd in fd_dir.iterdir()):
                pids.append(int(fd_dir.parent.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids

def _sid(pid: int) -> int | None:
    try:
        sid = os.getsid(pid)
    except ProcessLookupError:
        raise AssertionError(f"process {pid} ended before it could be looked at") from None
    return sid if sid == pid else None
