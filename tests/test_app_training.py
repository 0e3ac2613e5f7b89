"""Training view helpers against a real store: jobs made by trainer.jobs.queue, metrics and checkpoints as rows."""
from __future__ import annotations

import os
import re
import time

import pytest
from helpers import wait_for

from app.services import training
from app.services.plans import training_plan
from storage import Checkpoint, Job, Metric, session_scope
from storage.models import utcnow
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.owner import JobLock


@pytest.fixture
def owned(store):
    """own(job_id): this process takes the job's lock, as a live job process holds it (a running job whose
    lock nobody holds shows as dead)."""
    locks = []

    def own(job_id):
        lock = JobLock(job_queue.get_job(store, job_id)["output_dir"])
        assert lock.acquire()
        locks.append(lock)

    yield own
    for lock in locks:
        lock.release()


def _fill(store, job_id, steps):
    with session_scope(store) as s:
        job = s.get(Job, job_id)
        job.status, job.step, job.total_steps, job.progress = "running", steps, 4, steps / 4
        job.pid, job.heartbeat_at = os.getpid(), utcnow()  # a live process (with `owned`: it holds the lock)
        for step in range(steps):
            s.add(Metric(job_id=job_id, step=step, name="reward_mean", value=0.3 + 0.1 * step))
            s.add(Metric(job_id=job_id, step=step, name="reward_std", value=0.05))
            s.add(Metric(job_id=job_id, step=step, name="final_emotion_mean", value=30.0 + 10 * step))
            s.add(Metric(job_id=job_id, step=step, name="success_rate", value=0.1 * step))
            s.add(Metric(job_id=job_id, step=step, name="emotion_tier_A", value=0.5))
        s.add(Checkpoint(job_id=job_id, step=1, path="/ck/step-1", metrics={"reward_mean": 0.4}))
        s.add(Checkpoint(job_id=job_id, step=2, path="/ck/step-2", metrics={"reward_mean": 0.5}))


def test_jobs_rows_show_status_progress_and_queue(store, owned):
    first = job_queue.create_job(store, "train", {"algorithm": "grpo"}, name="first")
    second = job_queue.create_job(store, "train", {"algorithm": "ppo"}, name="second")
    _fill(store, first, 2)
    owned(first)
    with session_scope(store) as s:
        s.get(Job, second).pid, s.get(Job, second).heartbeat_at = os.getpid(), utcnow()  # launched, waiting
    rows = training.jobs_rows(job_queue.list_jobs(store))
    assert [r[0] for r in rows] == [second, first]
    assert rows[0][3:6] == ["queued", "0%", "ppo"]
    assert rows[0][7] == "waiting for the running job to end"
    assert rows[1][3:6] == ["running", "step 2/4 done (50%)", "grpo"]


def test_detail_figures_and_checkpoints(store):
    job_id = job_queue.create_job(store, "train", {"algorithm": "grpo", "model": "tiny", "mode": "think"},
                                  name="<b>x</b>")
    _fill(store, job_id, 3)
    detail = job_queue.job_detail(store, job_id)
    reward = training.reward_figure(detail)
    assert [t.name for t in reward.data] == ["reward_mean", "reward_std"]
    assert list(reward.data[0].x) == [0, 1, 2]
    assert list(reward.data[0].y) == pytest.approx([0.3, 0.4, 0.5])
    emotion = training.emotion_step_figure(detail)
    assert [t.name for t in emotion.data] == ["final_emotion_mean"]  # rates and tier shares are not on the emotion scale
    assert list(emotion.data[0].y) == [30.0, 40.0, 50.0]
    assert len(emotion.layout.shapes) == 5  # the S/A/B/C/F bands
    rows = training.checkpoint_rows(detail)
    assert [r[:2] for r in rows] == [[2, "/ck/step-2"], [1, "/ck/step-1"]]
    assert rows[0][2] == "reward_mean=0.5"
    summary = training.job_summary_md(detail)
    assert f"Job #{job_id}" in summary and "step 3/4" in summary and "model: **tiny**" in summary
    assert "<b>" not in summary  # the job name is shown as text, never as HTML
    ranks = [{"rank": r, "node_rank": r, "node_id": f"{r}abc" * 10, "node_ip": f"10.0.0.{r + 1}"} for r in (0, 1)]
    across = training.job_summary_md({**detail, "config": {**detail["config"], "ray_ranks": ranks,
                                                           "calibration": "esconv-scale"}})
    assert "calibration: **esconv\\-scale**" in across and "| rank | node rank | Ray node | address |" in across
    assert "| 1 | 1 | 1abc1abc1abc1abc | 10\\.0\\.0\\.2 |" in across


def test_empty_job_has_placeholder_figures(store):
    job_id = job_queue.create_job(store, "train", {}, name="empty")
    detail = job_queue.job_detail(store, job_id)
    assert training.reward_figure(detail).layout.annotations[0].text == "no data yet"
    assert training.checkpoint_rows(detail) == []
    assert training.job_summary_md(None) == "Select a job in the table."


def test_actions_follow_status():
    assert training.actions_for("running") == {"cancel": True, "resume": False, "clone": True}
    assert training.actions_for("interrupted") == {"cancel": False, "resume": True, "clone": True}
    assert training.actions_for("succeeded") == {"cancel": False, "resume": False, "clone": True}
    assert training.actions_for("dead") == {"cancel": False, "resume": True, "clone": True}  # derived when read
    assert training.actions_for("stalled") == {"cancel": True, "resume": False, "clone": True}  # a live owner


def _form(**over):
    values = dict(zip(training.FORM_NAMES, training.form_values()))
    values.update(over)
    return values


def test_form_round_trips_a_valid_config(tiny_model_dir):
    values = _form(model=str(tiny_model_dir), algorithm="grpo", steps=2.0, group_size=2, dialogues_per_step=4,
                   minibatch_size=4, micro_batch_size=2, actor_lr=1e-5, mode="think", persona_set="builtin")
    config, errors = training.config_from_form(values, "entropy_coef: 0.01\ntemperature: 0.7")
    assert errors == {}
    assert (config.algorithm, config.steps, config.group_size, config.mode) == ("grpo", 2, 2, "think")
    assert (config.entropy_coef, config.temperature) == (0.01, 0.7)
    assert training.form_values(config.to_dict())[training.FORM_NAMES.index("model")] == str(tiny_model_dir)


def test_form_shows_an_old_jobs_training_preset_by_its_new_name():
    old = {"simulator_preset": "training", "algorithm": "grpo"}
    values = dict(zip(training.FORM_NAMES, training.form_values(old)))
    assert values["simulator_preset"] == "rlver-hard" in training.field_choices("simulator_preset")
    assert training.field_choices("simulator_preset") == ("standard", "challenging", "rlver-hard", "rlver-moderate")


def test_form_errors_name_their_fields(tmp_path):
    values = _form(model=str(tmp_path / "missing"), algorithm="grpo", group_size=1, actor_lr=-1.0,
                   persona_set="nonsense", steps=None)
    config, errors = training.config_from_form(values, "")
    assert config is None
    assert set(errors) == {"model", "group_size", "actor_lr", "persona_set", "steps"}
    assert errors["steps"] == "required: a whole number"
    assert "positive" in errors["actor_lr"] and "at least 2" in errors["group_size"]
    per_field, other = training.error_updates(errors)
    assert per_field[training.FORM_NAMES.index("group_size")].startswith("⚠")
    assert per_field[training.FORM_NAMES.index("mode")] == "" and other == ""


def test_form_checks_a_stored_set_against_the_store_before_launch(store):
    from simulator.personas import sets as persona_sets
    from simulator.personas import store as persona_store

    persona_store.seed_builtin(store)
    persona_sets.create_from_filters(store, "two", personality="avoidant")
    config, errors = training.config_from_form(_form(persona_set="set:missing"), "", check_paths=False, store=store)
    assert config is None and set(errors) == {"persona_set"}
    assert "missing" in errors["persona_set"] and "stored sets: two" in errors["persona_set"]
    config, errors = training.config_from_form(_form(persona_set="set:two"), "", check_paths=False, store=store)
    assert errors == {} and config.persona_set == "set:two"


@pytest.mark.model
def test_form_other_settings_box_errors():
    _, errors = training.config_from_form(_form(), "entropy_coef: [1")
    assert "not valid YAML" in errors[training.GENERAL]
    _, errors = training.config_from_form(_form(), "- a list", check_paths=False)
    assert "mapping" in errors[training.GENERAL]
    _, errors = training.config_from_form(_form(), "no_such_setting: 1\nclip_eps: 2.0", check_paths=False)
    assert errors == {"no_such_setting": "unknown setting"}  # unknown keys stop before range checks
    _, errors = training.config_from_form(_form(), "clip_eps: 2.0", check_paths=False)
    per_field, other = training.error_updates(errors)
    assert "clip\\_eps" in other and not any(per_field)



def test_launch_training_job_queues_behind_a_live_job_and_runs_through_the_job_runner(store, db_url, owned):
    from datetime import timedelta

    from trainer.config import TrainConfig

    ahead = job_queue.create_job(store, "train", {}, name="ahead")
    with session_scope(store) as s:  # a live running job whose heartbeat stays fresh for the whole test
        job = s.get(Job, ahead)
        job.status, job.pid, job.heartbeat_at = "running", os.getpid(), utcnow() + timedelta(hours=1)
    owned(ahead)
    job_id, message = training.launch_training_job(store, db_url, TrainConfig(algorithm="grpo", mode="think"), "  ")
    assert message.startswith(f"Launched job #{job_id}; job(s) #{ahead} are live: it runs beside them if it fits")
    detail = job_queue.job_detail(store, job_id)
    assert detail["name"] == "grpo-think" and detail["status"] == "queued"
    pid = detail["pid"]
    log = wait_for(lambda: "queued behind" in job_queue.log_tail(detail["log_path"]) and detail["log_path"],
                   timeout=240)
    assert job_control.cancel(store, job_id) in ("queued", "cancelled")  # its waiting process marks itself cancelled
    wait_for(lambda: not job_queue.pid_alive(pid), timeout=240)
    assert job_queue.get_job(store, job_id)["status"] == "cancelled"
    text = job_queue.log_tail(log)
    assert text.count(f"job {job_id} queued behind #{ahead} (train, ") == 1  # stdout is the log: written once
    assert f"job {job_id} cancelled while queued" in text


def _set(page, elem_id, value):
    box = page.locator(f"#{elem_id} input, #{elem_id} textarea").first
    box.fill(str(value))
    box.press("Tab")


def _points(page, elem_id):
    """Points of the first curve of a gr.Plot in the page (0 when nothing is drawn yet)."""
    return page.evaluate("""(id) => { const p = document.querySelector(`#${id} .js-plotly-plot`);
        return p && p.data && p.data.length && p.data[0].x ? p.data[0].x.length : 0; }""", elem_id)


STEPS = 10  # enough steps that the 2 s poll sees the curve part-drawn even on a fast machine


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.slow
def test_launch_tiny_job_from_form_and_watch_curve_grow(lab_server, browser_page, tiny_model_dir, screenshot):
    page = browser_page
    page.get_by_role("tab", name="Training").click()
    for elem, value in (("train-name", "tiny-grpo"), ("train-model", tiny_model_dir), ("train-steps", STEPS),
                        ("train-group_size", 2),  # the form opens on cpu-demo: GRPO
                        ("train-dialogues_per_step", 2), ("train-minibatch_size", 2), ("train-micro_batch_size", 2),
                        ("train-max_turns", 1), ("train-max_new_tokens", 8), ("train-save_every", 1),
                        ("train-actor_lr", -1)):
        _set(page, elem, value)
    _set(page, "train-extra", "critic_lr: 0.0001\nmax_dialogue_tokens: 512")
    page.locator("#train-launch").click()
    page.locator("#err-actor_lr").get_by_text("must be positive", exact=False).wait_for()
    assert job_queue.list_jobs(lab_server.store) == []  # nothing half-launched
    _set(page, "train-actor_lr", 0.0001)
    page.locator("#train-launch").click()
    page.locator("#train-launch-msg").get_by_text("Launched job #", exact=False).wait_for()
    assert page.locator("#err-actor_lr").inner_text().strip() == ""
    job_id = job_queue.list_jobs(lab_server.store)[0]["id"]
    try:
        seen = []
        deadline = time.monotonic() + 900  # a generous limit: the job trains on a busy machine
        while time.monotonic() < deadline:  # the view's timer polls the store every 2 s
            n = _points(page, "train-reward")
            if not seen or n != seen[-1]:
                seen.append(n)
                if 0 < n < STEPS:
                    screenshot(page, "training.png")  # a running job, its curve part-drawn
            if n >= STEPS:
                break
            if job_queue.job_detail(lab_server.store, job_id)["status"] in ("failed", "cancelled", "interrupted"):
                break
            page.wait_for_timeout(500)
        detail = job_queue.job_detail(lab_server.store, job_id)
        assert seen[-1] == STEPS, (seen, detail["status"], detail["error"], detail["log_tail"][-2000:])
        assert any(0 < n < STEPS for n in seen), seen  # drawn while the job was still running
        page.locator("#train-summary").get_by_text("succeeded").wait_for(timeout=300_000)
        assert len(page.locator("#train-checkpoints [role=gridcell]").all()) >= 4  # at least one row
    finally:
        job_control.cancel(lab_server.store, job_id, force=True)
    assert page.dialogs == []


# ----------------------------------------------------------------------------------- presets and the plan
@pytest.mark.parametrize("name", training_plan.preset_choices())
def test_a_preset_fills_the_form_with_every_one_of_its_settings(name):
    from trainer.config import TrainConfig
    from trainer.presets import preset_dict

    values, extra, hardware = training_plan.preset_form(name)
    config, errors = training.config_from_form(dict(zip(training.FORM_NAMES, values)), extra, check_paths=False)
    assert errors == {}
    assert config.to_dict() == TrainConfig.from_dict(preset_dict(name)).to_dict()  # the job is the preset
    expected = {"one-gpu-lora-grpo-7b": (1, 1, 80.0), "one-gpu-grpo-1.5b": (1, 1, 24.0)}.get(
        name, (None, None, None) if name.startswith("cpu-") else (8, 4, 80.0))  # this machine; one GPU; the paper's
    assert hardware == expected


@pytest.mark.model
def test_the_form_opens_on_the_cpu_demo_not_the_papers_32_gpus():
    from trainer.presets import DEFAULT_PRESET

    values, extra, _ = training_plan.preset_form(DEFAULT_PRESET)
    form = dict(zip(training.FORM_NAMES, values))
    assert DEFAULT_PRESET == "cpu-demo"
    assert (form["model"], form["simulator"], form["steps"], form["lora"]) == ("default", "offline", 46, True)
    assert "gate_proj" in extra and "temperature: 0.7" in extra


def test_confirmation_is_asked_for_a_job_that_will_not_fit_or_runs_over_a_day():
    fits = {"fits": True, "per_gpu_gib": 3.0, "memory_gib": 24.0, "seconds_per_step": 80.0}
    assert training_plan.confirmation_reason(fits, 46) == ""  # the cpu-demo: about an hour
    assert "about 1.9 days" in training_plan.confirmation_reason(fits, 2000)
    too_big = {"fits": False, "per_gpu_gib": 281.7, "memory_gib": 24.0, "seconds_per_step": None}
    assert training_plan.confirmation_reason(too_big, 1000) == "it will not fit (281.7 GiB needed of 24.0 GiB)"
    assert training_plan.confirmation_reason({**too_big, "seconds_per_step": 100.0}, 1000).count(" and ") == 1
    assert training_plan.confirmation_reason({"error": "no such model"}, 10) == "no plan (no such model)"
    assert training_plan.run_seconds(fits, 10) == 800.0 and training_plan.run_seconds(too_big, 10) is None


def test_plan_markdown_and_hardware_arguments():
    plan = {"fits": False, "per_gpu_gib": 30.0, "memory_gib": 24.0, "device": "cuda", "gpus": 1,
            "parts": {"policy_weights": 10.0, "activations": 20.0}, "seconds_per_step": None,
            "notes": ["does not fit: <b>largest</b>"]}
    text = training_plan.plan_markdown(plan, 10)
    assert text.startswith("**Does not fit**: 30.0 GiB per GPU of 24.0 GiB") and "| activations | 20.00 |" in text
    assert "<b>" not in text and "not measured (a GPU plan)" in text
    cpu = {**plan, "fits": True, "device": "cpu", "seconds_per_step": 90.0}
    assert "90 s per step x 40 steps = about 1.0 hours" in training_plan.plan_markdown(cpu, 40)
    assert training_plan.plan_args(8, 4, 80) == ["--gpus", "8", "--nodes", "4", "--gpu-memory", "80"]
    assert training_plan.plan_args(None, 0, "") == []


def test_compute_plan_runs_the_plan_command_once_per_setting(tiny_model_dir):
    from trainer.config import TrainConfig

    config = TrainConfig(model=str(tiny_model_dir), dtype="bfloat16").to_dict()
    plan = training_plan.compute_plan(config, ["--gpus", "2", "--gpu-memory", "1"])
    assert plan["fits"] is True and plan["device"] == "cuda" and plan["gpus"] == 2 and plan["seconds_per_step"] is None
    assert training_plan.compute_plan({**config, "steps": 5}, ["--gpus", "2", "--gpu-memory", "1"]) is plan  # cached
    broken = training_plan.compute_plan({**config, "model": "/nowhere/Unknown-1B"}, [])
    assert "no config.json" in broken["error"]


@pytest.mark.model
@pytest.mark.process
@pytest.mark.browser
@pytest.mark.slow
def test_preset_dropdown_fills_the_form_and_launch_asks_to_confirm_a_job_that_will_not_fit(
        lab_server, browser_page, tiny_model_dir):
    from playwright.sync_api import expect

    page = browser_page
    page.reload()  # the module's page: an earlier test typed into this form
    page.get_by_role("tab", name="Training").click()
    expect(page.locator("#train-steps input")).to_have_value("46")  # opens on cpu-demo
    expect(page.locator("#train-model textarea")).to_have_value("default")
    page.locator("#train-preset input").click()
    page.get_by_role("option", name="paper-ppo-think-7b").click()
    expect(page.locator("#train-steps input")).to_have_value("1000")
    expect(page.locator("#train-plan-gpus input")).to_have_value("8")
    expect(page.locator("#train-extra textarea")).to_have_value(re.compile("deepspeed: zero3"))
    page.locator("#train-plan-btn").click()
    # the paper's 32 GPUs: the plan (fits or not: the learner's float32 logits at 15,000 positions, issue 33)
    page.locator("#train-plan").get_by_text("GiB per GPU", exact=False).wait_for(
        timeout=300_000)  # `python -m trainer plan` in its own process: a few seconds idle, minutes on a busy machine
    expect(page.locator("#train-plan")).to_contain_text("critic_grads_optimizer")
    # a tiny job planned for a process of 0.001 GiB: Launch asks first, and launches on the second click
    page.locator("#train-preset input").click()
    page.get_by_role("option", name="cpu-demo", exact=True).click()
    expect(page.locator("#train-steps input")).to_have_value("46")
    for elem, value in (("train-name", "too-big"), ("train-model", tiny_model_dir), ("train-steps", 2),
                        ("train-group_size", 2), ("train-dialogues_per_step", 2), ("train-minibatch_size", 2),
                        ("train-micro_batch_size", 2), ("train-max_new_tokens", 8), ("train-plan-memory", 0.001)):
        _set(page, elem, value)
    _set(page, "train-extra", "max_dialogue_tokens: 512")
    before = len(job_queue.list_jobs(lab_server.store))
    page.locator("#train-launch").click()
    page.locator("#train-launch-msg").get_by_text("Not launched: it will not fit", exact=False).wait_for(
        timeout=300_000)  # the plan measures one step first
    expect(page.locator("#train-plan")).to_contain_text("Does not fit")
    assert len(job_queue.list_jobs(lab_server.store)) == before
    page.locator("#train-confirm input").check()
    page.locator("#train-launch").click()
    page.locator("#train-launch-msg").get_by_text("Launched job #", exact=False).wait_for()
    job = job_queue.list_jobs(lab_server.store)[0]
    try:
        assert len(job_queue.list_jobs(lab_server.store)) == before + 1 and job["name"] == "too-big"
        expect(page.locator("#train-confirm")).to_be_hidden()
    finally:
        job_control.cancel(lab_server.store, job["id"], force=True)
