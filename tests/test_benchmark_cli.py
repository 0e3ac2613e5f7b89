"""`python -m trainer benchmark` and benchmark jobs, end to end with real processes.

Policies: the tiny random model (fixture tiny_model_dir) or a real OpenAI-compatible HTTP server on
127.0.0.1 (testkit.scripted_server) whose replies are supportive; simulators: the offline one or the
same server playing the simulated user over HTTP.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BACKENDS, run_in_process
from helpers import wait_for as _wait_for

from simulator.personas.io import dumps_profiles
from simulator.user.packs import OwnPack
from storage import Dialogue, EvalRun, read_scope
from storage.dialogues import load_dialogue
from testkit.scripted_server import ScriptedServer
from trainer.benchmarking import benchmark, eval_runs, protocol
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent
JSON_KEYS = {"score", "success", "failure", "n", "ci_low", "ci_high", "eval_run_id"}


def cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m trainer benchmark ARGS`, run in this process (the kill and Ctrl-C tests start real ones)."""
    return run_in_process("trainer", "benchmark", *args)


def start_cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trainer", "benchmark", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))


def last_json(out: str) -> dict:
    lines = [line for line in out.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"--json must print exactly one line on stdout, got: {out!r}"
    return json.loads(lines[0])


def wait_for(cond, timeout=180.0, every=0.2):
    return _wait_for(cond, timeout, every)


def run_dialogues(store, eval_run_id):
    with read_scope(store) as s:
        return [(d.id, d.persona_id, d.status) for d in s.query(Dialogue).filter(Dialogue.eval_run_id == eval_run_id)
                .order_by(Dialogue.id)]


@pytest.fixture
def server():
    with ScriptedServer().start() as srv:
        yield srv


@pytest.fixture
def slow_server():
    with ScriptedServer(latency_s=0.05).start() as srv:
        yield srv


# ------------------------------------------------------------------------------------------- protocol
def test_protocol_first_line_start_40_cap_of_10_turns(store, db_url, server, tmp_path):
    """A supportive policy (+3 a turn from the scripted simulator): every dialogue opens with the profile's
    scripted first line at emotion 40 and runs exactly 10 policy replies of which 9 are judged (SAGE stops
    before the simulator reacts to the 10th), ending at 67 with max_turns on the policy's message."""
    out = tmp_path / "scripted_result.jsonl"
    r = cli("--policy", "openai:scripted", "--policy-base-url", server.base_url, "--simulator", "openai:scripted",
            "--simulator-base-url", server.base_url, "--profiles", "builtin", "--limit", "3", "--db", db_url,
            "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert JSON_KEYS <= set(res)
    assert (res["score"], res["success"], res["failure"], res["n"], res["n_errors"]) == (67.0, 0, 0, 3, 0)
    profiles = {p.id: p for p in benchmark.load_profiles("builtin", limit=3)}
    ids = [i for i, _, _ in run_dialogues(store, res["eval_run_id"])]
    assert len(ids) == 3
    for i in ids:
        d = load_dialogue(store, i)
        assert d["source"] == "benchmark" and d["status"] == "finished" and d["outcome"] == "max_turns"
        first = d["turns"][0]
        assert first["role"] == "user" and first["text"] == profiles[d["persona_id"]].first_line
        assert first["emotion"] == 40.0
        assert d["n_turns"] == 10 and sum(t["role"] == "assistant" for t in d["turns"]) == 10
        assert [t["emotion"] for t in d["turns"] if t["role"] == "user"] == [40.0 + 3 * k for k in range(10)]
        assert d["turns"][-1]["role"] == "assistant"  # the 10th reply is not judged
    run = eval_runs.get_eval_run(store, res["eval_run_id"])
    assert run["status"] == "succeeded" and run["model_ref"].startswith("openai:scripted@")
    proto = run["protocol"]
    assert proto["rules"]["start"] == 40.0 and proto["rules"]["max_delta"] == 10.0
    assert proto["rules"]["max_turns"] == 10 and not proto["rules"]["judge_final_reply"]
    assert proto["first_line"] == "scripted" and proto["version"] == protocol.PROTOCOL_VERSION
    assert proto["max_new_tokens"] is None and proto["protocol_hash"] == res["protocol_hash"]
    assert proto["policy_system_prompts"]["en"] == OwnPack().policy_system_prompt("en")
    fp = run["simulator_fingerprint"]
    assert fp["backend"] == "openai" and fp["model"] == "scripted" and fp["rules"]["start"] == 40.0
    assert run["fingerprint_hash"] and run["profile_set_hash"] == benchmark.profile_set_hash(list(profiles.values()))
    assert run["code_version"] and run["config"]["limit"] == 3

    # export -> `python -m simulator score` gives the same numbers
    s = run_in_process("simulator", "score", str(out), "--json")
    assert s.returncode == 0, s.stderr
    scored = json.loads(s.stdout)
    assert {k: scored[k] for k in ("score", "success", "failure", "n", "ci_low", "ci_high")} == \
        {k: res[k] for k in ("score", "success", "failure", "n", "ci_low", "ci_high")}


@pytest.mark.model
def test_offline_simulator_clamps_changes_and_round_trips(store, db_url, tiny_model_dir, tmp_path):
    """The tiny random model's garbled replies make the offline user drop fast: raw changes beyond -10 are
    clamped to -10, and the exported file scores to the same numbers (failures included)."""
    out = tmp_path / "tiny_result.jsonl"
    r = cli("--policy", str(tiny_model_dir), "--simulator", "offline", "--profiles", "builtin", "--limit", "4",
            "--max-new-tokens", "16", "--db", db_url, "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["n"] == 4 and res["failure"] >= 1
    raws, deltas = [], []
    for i, _, status in run_dialogues(store, res["eval_run_id"]):
        d = load_dialogue(store, i)
        assert status == "finished" and d["turns"][0]["emotion"] == 40.0
        assert d["n_turns"] <= 10
        prev = 40.0
        for t in d["turns"][1:]:
            if t["role"] != "user":
                continue
            raw = t["inner"]["raw_change"]
            assert t["delta"] == max(-10.0, min(10.0, raw)) or t["emotion"] in (0.0, 100.0)
            assert t["emotion"] == pytest.approx(min(100.0, max(0.0, prev + t["delta"])))
            prev = t["emotion"]
            raws.append(raw)
            deltas.append(t["delta"])
        assert d["final_emotion"] == prev
    assert any(abs(x) > 10 for x in raws), "no change beyond the clamp was produced; the test shows nothing"
    assert all(abs(x) <= 10 for x in deltas)
    s = run_in_process("simulator", "score", str(out), "--json")
    assert json.loads(s.stdout)["score"] == res["score"] and json.loads(s.stdout)["n"] == 4


# --------------------------------------------------------------------------------- errors and bad input
@pytest.mark.model
def test_failing_dialogues_are_recorded_and_counted(store, db_url, tiny_model_dir, tmp_path):
    """A Chinese profile the offline simulator cannot play fails with its reason and stays in n."""
    from tests.conftest import make_sim_profile

    profiles = benchmark.load_profiles("builtin", limit=2) + [make_sim_profile("zh-user", language="zh")]
    path = tmp_path / "mixed.jsonl"
    path.write_text(dumps_profiles(profiles))
    r = cli("--policy", str(tiny_model_dir), "--profiles", str(path), "--max-new-tokens", "8", "--db", db_url,
            "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["n"] == 3 and res["n_errors"] == 1
    rows = eval_runs.eval_run_dialogues(store, res["eval_run_id"])
    failed = [d for d in rows if d["status"] == "failed"]
    assert [d["persona_id"] for d in failed] == ["zh-user"]
    assert "English profiles only" in failed[0]["error"] and failed[0]["final_emotion"] is None
    assert eval_runs.get_eval_run(store, res["eval_run_id"])["n_errors"] == 1


def test_policy_outage_fails_every_dialogue_but_none_is_dropped(store, db_url, tmp_path):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    r = cli("--policy", "openai:gone", "--policy-base-url", dead, "--profiles", "builtin", "--limit", "2",
            "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert (res["n"], res["n_errors"], res["score"], res["failure"]) == (2, 2, 0.0, 2)
    assert all("policy" in d["error"] for d in eval_runs.eval_run_dialogues(store, res["eval_run_id"]))


@pytest.mark.parametrize("content, expected", [(b"", "is empty"), (b"{oops\n", "malformed JSON")])
def test_bad_profile_file_exits_2_with_a_clear_message(db_url, tmp_path, content, expected):
    path = tmp_path / "profiles.jsonl"
    path.write_bytes(content)
    r = cli("--profiles", str(path), "--db", db_url)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: profiles: ") and expected in r.stderr


def test_bad_options_exit_2_naming_the_field(db_url):
    r = cli("--simulator", "gpt4", "--db", db_url)
    assert r.returncode == 2 and "simulator" in r.stderr
    r = cli("--resume", "42", "--db", db_url)
    assert r.returncode == 2 and "eval run 42 does not exist" in r.stderr
    r = cli("--policy", "/no/such/model", "--db", db_url)
    assert r.returncode == 2 and "policy" in r.stderr


# ------------------------------------------------------------------------------------------------ resume
def test_resume_after_kill_skips_finished_profiles(store, db_url, slow_server, tmp_path):
    common = ["--policy", "openai:scripted", "--policy-base-url", slow_server.base_url, "--simulator",
              "openai:scripted", "--simulator-base-url", slow_server.base_url, "--db", db_url]
    p = start_cli(*common, "--profiles", "builtin", "--limit", "4", "--concurrency", "1")
    try:
        with_done = wait_for(lambda: [r for r in run_dialogues(store, 1) if r[2] == "finished"])
        os.killpg(p.pid, signal.SIGKILL)
    finally:
        p.wait()
    before = run_dialogues(store, 1)
    finished_before = {pid for _, pid, st in before if st == "finished"}
    assert 1 <= len(with_done) <= len(finished_before) < 4
    assert eval_runs.get_eval_run(store, 1)["status"] == "running"

    r = cli("--resume", "1", "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["eval_run_id"] == 1 and res["n"] == 4 and res["score"] == 67.0
    after = run_dialogues(store, 1)
    scored = [pid for _, pid, st in after if st == "finished"]
    assert sorted(scored) == sorted(p.id for p in benchmark.load_profiles("builtin", limit=4))  # each exactly once
    assert {pid for _, pid, st in after[:len(before)] if st == "finished"} == finished_before  # kept, not replayed
    cut = [row for row in after if row[2] == "cancelled"]
    assert all(row[1] not in finished_before for row in cut)
    r = cli("--resume", "1", "--db", db_url)
    assert r.returncode == 2 and "already finished" in r.stderr


def test_ctrl_c_stops_cleanly_and_the_run_resumes(store, db_url, slow_server):
    p = start_cli("--policy", "openai:scripted", "--policy-base-url", slow_server.base_url, "--simulator",
                  "openai:scripted", "--simulator-base-url", slow_server.base_url, "--db", db_url,
                  "--profiles", "builtin", "--limit", "4", "--concurrency", "1")
    wait_for(lambda: any(st == "finished" for _, _, st in run_dialogues(store, 1)))
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 1 and "--resume 1" in out and "(cancelled)" in out
    run = eval_runs.get_eval_run(store, 1)
    statuses = [st for _, _, st in run_dialogues(store, 1)]
    assert run["status"] == "cancelled" and "running" not in statuses and 1 <= run["n"] < 4
    r = cli("--resume", "1", "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout)["n"] == 4 and eval_runs.get_eval_run(store, 1)["status"] == "succeeded"


# ------------------------------------------------------------------------------------------------- jobs
@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_benchmark_job_runs_in_the_background_and_records_everything(store, db_url, server):
    config = {"policy": "openai:scripted", "policy_base_url": server.base_url, "simulator": "openai:scripted",
              "simulator_base_url": server.base_url, "limit": 2, "name": "scripted"}
    job_id = benchmark.start_benchmark_job(store, db_url, config)
    wait_for(lambda: job_queue.job_detail(store, job_id)["status"] in job_queue.FINAL_STATUSES)
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "succeeded", d["log_tail"]
    assert d["kind"] == "benchmark" and d["progress"] == 1.0 and d["step"] == 2
    assert d["metrics"]["score"]["value"] == [67.0]
    assert "eval run 1: score 67.0" in d["log_tail"]
    with read_scope(store) as s:
        run = s.query(EvalRun).filter(EvalRun.job_id == job_id).one()
        assert run.status == "succeeded" and run.n == 2 and run.name == "scripted"
        run_id = run.id
    groups = eval_runs.leaderboard(store)
    assert groups[0]["rows"][0]["id"] == run_id and not groups[0]["published"]


def test_benchmark_job_bad_config_is_refused_before_launch(store, db_url, tmp_path):
    with pytest.raises(benchmark.BenchmarkInputError, match="limit"):
        benchmark.start_benchmark_job(store, db_url, {"limit": -3})
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(benchmark.BenchmarkInputError, match="is empty"):
        benchmark.start_benchmark_job(store, db_url, {"profiles": str(empty)})
    assert job_queue.list_jobs(store) == []


def test_benchmark_job_killed_then_resumed_continues_its_eval_run(store, db_url, slow_server):
    config = {"policy": "openai:scripted", "policy_base_url": slow_server.base_url, "simulator": "openai:scripted",
              "simulator_base_url": slow_server.base_url, "limit": 3, "concurrency": 1}
    job_id = benchmark.start_benchmark_job(store, db_url, config)
    wait_for(lambda: job_queue.job_detail(store, job_id)["step"] >= 1)
    pid = job_queue.job_detail(store, job_id)["pid"]
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not job_queue.pid_alive(pid))
    wait_for(lambda: job_queue.reap_dead_jobs(store) == [job_id])  # the reaper, once its lock is free
    job_control.resume(store, db_url, job_id)
    wait_for(lambda: job_queue.job_detail(store, job_id)["status"] in job_queue.FINAL_STATUSES)
    d = job_queue.job_detail(store, job_id)
    assert d["status"] == "succeeded", d["log_tail"]
    with read_scope(store) as s:
        [run] = s.query(EvalRun).filter(EvalRun.job_id == job_id).all()  # the same eval run, continued
        assert run.n == 3 and run.status == "succeeded"
        run_id = run.id
    finished = [pid_ for _, pid_, st in run_dialogues(store, run_id) if st == "finished"]
    assert len(finished) == len(set(finished)) == 3


def test_benchmark_job_cancel(store, db_url, slow_server):
    config = {"policy": "openai:scripted", "policy_base_url": slow_server.base_url, "simulator": "openai:scripted",
              "simulator_base_url": slow_server.base_url, "limit": 6, "concurrency": 1}
    job_id = benchmark.start_benchmark_job(store, db_url, config)
    wait_for(lambda: job_queue.job_detail(store, job_id)["step"] >= 1)
    job_control.cancel(store, job_id)
    wait_for(lambda: job_queue.job_detail(store, job_id)["status"] in job_queue.FINAL_STATUSES)
    assert job_queue.job_detail(store, job_id)["status"] == "cancelled"
    with read_scope(store) as s:
        run = s.query(EvalRun).filter(EvalRun.job_id == job_id).one()
        assert run.status == "cancelled" and run.n < 6
        statuses = {d.status for d in s.query(Dialogue).filter(Dialogue.eval_run_id == run.id)}
        fp_hash = run.fingerprint_hash
    assert "running" not in statuses
    assert all(g["fingerprint_hash"] != fp_hash for g in eval_runs.leaderboard(store))  # unfinished: not ranked


def test_a_training_checkpoint_folder_is_benchmarked_through_its_policy(store, db_url, tiny_model_dir, tmp_path):
    import shutil

    ckpt = tmp_path / "checkpoints" / "step-000002"
    shutil.copytree(tiny_model_dir, ckpt / "policy")
    r = cli("--policy", str(ckpt), "--limit", "1", "--max-new-tokens", "8", "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr
    run = eval_runs.get_eval_run(store, last_json(r.stdout)["eval_run_id"])
    assert run["model_ref"] == str(ckpt / "policy") and run["config"]["policy"] == str(ckpt)
