"""What a web visitor may spend (docs/security.md, "Limits"): a cancelled job stops even when it ignores
SIGTERM (SIGKILL after a grace period), numeric fields that cost time have upper bounds from the web named in
the message, uploads have a size limit, live jobs a ceiling, and failed logins are slowed."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from helpers import wait_for

from storage import Job, read_scope
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.owner import owner_pid, pid_alive


@pytest.mark.process
def test_a_cancelled_job_that_ignores_sigterm_is_killed_after_the_grace_period(store, monkeypatch, tmp_path):
    monkeypatch.setattr(job_control, "CANCEL_GRACE_S", 1.0)
    job_id = job_queue.create_job(store, "personas", {"generation_id": 0}, name="stubborn")
    folder = job_queue.job_dir(store, job_id)
    stubborn = textwrap.dedent(f"""
        import signal, sys, time
        from trainer.jobs.owner import JobLock
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # a process stuck where no handler runs
        lock = JobLock({str(folder)!r})
        assert lock.acquire()
        print("owner", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "owner"
        assert owner_pid(folder) == proc.pid
        job_control.cancel(store, job_id)
        wait_for(lambda: proc.poll() is not None, timeout=60)  # SIGTERM ignored; SIGKILL after the grace
        assert proc.returncode == -9

        def status() -> str:
            with read_scope(store) as s:
                return s.get(Job, job_id).status
        wait_for(lambda: status() == "cancelled", timeout=60)
        assert not pid_alive(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_costly_numbers_have_upper_bounds_from_the_web_named_in_the_message(monkeypatch):
    from app.services import persona_generation_form
    from simulator.access import ACCESS_ENV, WEB_BOUNDS, Access, config_errors
    from trainer.benchmarking.benchmark import BenchmarkConfig
    from trainer.benchmarking.compare import CompareConfig
    from trainer.config import TrainConfig

    web = Access.web(logged_in=False)
    too_much = {"steps": 10**7, "dialogues_per_step": 10**6, "max_new_tokens": 10**6}
    refused = config_errors(TrainConfig(**too_much), web)
    assert set(too_much) <= set(refused)
    assert refused["steps"].startswith(f"at most {WEB_BOUNDS['steps']:,} from the web page (got 10,000,000)")
    assert config_errors(TrainConfig(**too_much), Access()) == {}  # the command line: no bound
    assert "seeds" in config_errors(CompareConfig(seeds=10**4), web)
    assert {"max_tokens", "concurrency"} <= set(config_errors(BenchmarkConfig(max_tokens=10**9, concurrency=10**5), web))
    monkeypatch.setenv(ACCESS_ENV, web.to_json())
    assert BenchmarkConfig(max_tokens=10**9).errors()["max_tokens"].startswith("at most")
    form = {"count": 10**6, "languages": ["en"], "base_url": "", "model": "m", "threshold": 0.9}
    _, _, errs = persona_generation_form.read_form(form)
    assert "500" in errs["count"]  # a generation's own bound (GenerationSpec), within the web's
    assert WEB_BOUNDS["count"] >= 500


def test_failed_logins_wait_longer_each_time_per_address_and_per_account():
    import asyncio

    from app.trust import FREE_LOGIN_TRIES, MAX_LOGIN_WAIT_S, LoginGate, login_keys

    status, waited = {"code": 400}, []

    async def gradio(scope, receive, send):
        await send({"type": "http.response.start", "status": status["code"], "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def wait(seconds: float) -> None:  # what the gate would sleep, recorded instead
        waited.append(seconds)

    gate = LoginGate(gradio, logged_in=lambda cookies: False)
    gate.sleep = wait

    def attempt(address: str = "10.0.0.7", user: str = "ana") -> None:
        async def noop(message):
            return None

        async def receive():
            return {"type": "http.request", "body": f"username={user}&password=wrong".encode()}

        asyncio.run(gate({"type": "http", "method": "POST", "path": "/login", "client": (address, 1),
                          "headers": [(b"content-type", b"application/x-www-form-urlencoded")]}, receive, noop))

    for _ in range(FREE_LOGIN_TRIES + 6):
        attempt()
    assert waited == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_LOGIN_WAIT_S]  # the first FREE_LOGIN_TRIES wait nothing
    assert gate.throttle.wait_s(login_keys("10.0.0.8", "bo")) == 0.0  # another address and account: not slowed
    assert gate.throttle.wait_s(login_keys("10.0.0.8", "ana")) == MAX_LOGIN_WAIT_S  # the account is
    assert gate.throttle.wait_s(login_keys("10.0.0.7", "bo")) == MAX_LOGIN_WAIT_S  # and so is the address
    status["code"] = 200
    attempt()
    assert gate.throttle.wait_s(login_keys("10.0.0.7", "ana")) == 0.0  # a login clears the count


def test_the_live_view_and_play_refuse_costly_numbers_from_the_web(store, monkeypatch):
    from app.services import play
    from app.views import live_rollout
    from simulator.access import ACCESS_ENV, Access
    from simulator.personas.builtin import builtin_profiles

    monkeypatch.setenv(ACCESS_ENV, Access.web(logged_in=False).to_json())
    [first] = list(live_rollout.start_rollout(store, "limits", ["en-01-maya-chen"], "default", "", "offline", "",
                                              "standard", "direct", 10_000, 4, 96, 1.0, 0))
    assert first[0].startswith("**Not started.**") and "group: at most 64 from the web page" in first[0]
    with pytest.raises(ValueError, match="max_turns: at most 50 from the web page"):
        play.start_play(store, builtin_profiles()[0], "hello", "ana", "default", max_turns=10**5)


def test_live_jobs_from_the_web_stop_at_the_owners_ceiling(store, monkeypatch):
    from app.services import persona_generation_jobs
    from simulator.access import ACCESS_ENV, Access
    from simulator.personas import generation_store
    from simulator.personas.generation import spec_from_dict

    monkeypatch.setenv(ACCESS_ENV, Access.web(logged_in=False, max_live_jobs=2).to_json())
    first = job_queue.create_job(store, "train", {})
    job_queue.create_job(store, "benchmark", {})
    with pytest.raises(job_queue.JobError, match=r"2 jobs are queued or running.*--max-live-jobs 2"):
        job_queue.create_job(store, "train", {})
    with pytest.raises(job_queue.JobError, match="--max-live-jobs 2"):
        persona_generation_jobs.start(store, "", spec_from_dict({"count": 1}), None)
    assert generation_store.list_generations(store) == []  # nothing recorded for a refused start
    job_control.cancel(store, first)
    assert job_queue.create_job(store, "train", {})  # a slot is free again
    monkeypatch.delenv(ACCESS_ENV)
    assert all(job_queue.create_job(store, "train", {}) for _ in range(3))  # the command line: no ceiling


def test_a_deeply_nested_yaml_from_the_web_is_one_line_naming_the_field():
    from app.services import training as training_service
    from trainer.experiments.grid import ExperimentError, parse_grid

    with pytest.raises(ExperimentError) as caught:
        parse_grid("[" * 5000)
    assert caught.value.errors == {"grid file": "not valid YAML (nested too deeply)"}
    config, errors = training_service.config_from_form({}, "a: " + "[" * 5000, check_paths=False)[:2]
    assert config is None and "other settings: not valid YAML (nested too deeply)" in errors.values()


def test_a_grid_from_the_web_stays_within_the_bounds_and_its_runner_and_cells_count(store, monkeypatch):
    """parallel and the number of cells within WEB_BOUNDS (counted before any cell is built), and an experiment
    needs room under --max-live-jobs for its runner and a cell; a live runner counts as a live job."""
    import os

    from simulator.access import ACCESS_ENV, WEB_BOUNDS, Access
    from storage import Experiment, session_scope
    from storage.models import utcnow
    from trainer.experiments.grid import ExperimentError, create_experiment, parse_grid
    from trainer.jobs.backend import host_name
    from trainer.jobs.liveness import live_count

    monkeypatch.setenv(ACCESS_ENV, Access.web(logged_in=False, max_live_jobs=3).to_json())
    seeds = ", ".join(str(i) for i in range(500))
    huge = "\n".join(f"  {key}: [{', '.join(str(v) for v in range(1, 11))}]" for key in
                      ("seed", "steps", "dialogues_per_step", "group_size", "ppo_epochs", "max_turns",
                       "max_new_tokens", "save_every", "lora_r", "warmup_steps"))
    for text, field, got in ((f"name: x\nparallel: 1000000\ngrid:\n  seed: [{seeds}]\n", "cells", "500"),
                             ("name: x\nparallel: 1000000\ngrid:\n  seed: [1, 2]\n", "parallel", "1,000,000"),
                             (f"name: x\ngrid:\n{huge}\n", "cells", "10,000,000,000")):
        with pytest.raises(ExperimentError) as caught:
            parse_grid(text, check_paths=False)
        bound = WEB_BOUNDS[field]
        assert caught.value.errors[field] == (f"at most {bound:,} from the web page (got {got}); larger runs start "
                                              "from the command line"), caught.value.errors
    spec = parse_grid("name: x\nparallel: 2\ngrid:\n  seed: [1, 2]\n", check_paths=False)
    job_queue.create_job(store, "train", {})
    with session_scope(store) as s:  # a live runner of another experiment (this process, beating now)
        s.add(Experiment(name="other", status="running", runner_pid=os.getpid(), runner_host=host_name(),
                         runner_heartbeat_at=utcnow()))
    assert live_count(store) == 2
    with pytest.raises(ExperimentError) as caught:
        create_experiment(store, spec)
    assert "2 jobs are queued or running and this needs 2" in caught.value.errors["jobs"]
    assert "--max-live-jobs 3" in caught.value.errors["jobs"]
    assert job_queue.create_job(store, "benchmark", {})  # one job fits: the third place
    with pytest.raises(job_queue.JobError, match="3 jobs are queued or running.*--max-live-jobs 3"):
        job_queue.create_job(store, "benchmark", {})  # the runner holds a place like a job
    monkeypatch.delenv(ACCESS_ENV)
    assert create_experiment(store, spec)  # the command line: no ceiling
