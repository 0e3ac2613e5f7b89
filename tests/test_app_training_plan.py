"""The Training view's plan never stands between a user and Launch: the quick plan answers at once, the timed probe
runs in the background (followed after a reload, stopped by Stop or by Launch), and a job shows its time left from
the plan's step time until a step of its own has ended."""
from __future__ import annotations

from datetime import timedelta

import pytest
from helpers import wait_for

from app.services import job_progress
from app.services.plans import probe_task, training_plan
from storage.models import utcnow
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue


@pytest.mark.process
def test_a_probe_runs_in_the_background_and_stop_ends_it(tiny_model_dir, monkeypatch, tmp_path):
    from trainer.config import TrainConfig

    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "home"))
    config = TrainConfig(model=str(tiny_model_dir), steps=7).to_dict()
    quick = training_plan.quick_plan(config, [], "cpu-demo")
    assert quick["device"] == "cpu" and quick["seconds_per_step"] is None and "transient_peak" in quick["parts"]
    key = probe_task.start(config, [], "cpu-demo", quick)
    assert probe_task.running(key) and probe_task.running_key("cpu-demo") == key  # what a reloaded page follows
    shown = probe_task.progress(key)
    assert shown.startswith(training_plan.plan_markdown(quick, 7)) and "**Timing one step…**" in shown
    assert "Launch does not wait for it" in shown
    assert probe_task.cancel(key, "Stop") and not probe_task.cancel(key, "Stop")
    wait_for(lambda: not probe_task.running(key), timeout=120)
    assert "The timed probe was stopped (Stop)" in probe_task.progress(key)
    assert probe_task.running_key("cpu-demo") is None


def test_a_job_shows_time_left_from_the_plans_step_time_until_its_own_first_step(monkeypatch, tmp_path):
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "home"))
    config = {"model": "default", "steps": 10, "algorithm": "grpo", "seed": 3}
    detail = {"kind": "train", "status": "running", "id": 1, "config": config, "total_steps": 10, "step": 0,
              "started_at": utcnow() - timedelta(seconds=100)}
    assert job_progress.planned_time_left(detail, 10, utcnow()) == ""  # no timed plan of these settings
    training_plan.keep("cpu-demo", training_plan.plan_key({**config, "seed": 0}, []), 10,  # seed: not planning
                       {"fits": True, "per_gpu_gib": 3.1, "seconds_per_step": 60.0})
    text = job_progress.planned_time_left(detail, 10, utcnow())
    assert text.startswith("; about ") and "the plan's 60 s a step" in text
    assert job_progress.planned_time_left({**detail, "config": {**config, "algorithm": "ppo"}}, 10, utcnow()) == ""


def _set(page, elem_id, value):
    box = page.locator(f"#{elem_id} input, #{elem_id} textarea").first
    box.fill(str(value))
    box.press("Tab")


@pytest.mark.model
@pytest.mark.process
@pytest.mark.browser
@pytest.mark.slow
def test_the_probe_survives_a_reload_and_launch_does_not_wait_for_it(lab_server, browser_page, tiny_model_dir):
    from playwright.sync_api import expect

    page = browser_page
    page.get_by_role("tab", name="Training").click()
    expect(page.locator("#train-steps input")).to_have_value("46")  # cpu-demo: a probe of minutes
    page.locator("#train-plan-btn").click()
    page.locator("#train-plan").get_by_text("Timing one step", exact=False).wait_for()
    expect(page.locator("#train-plan")).to_contain_text("GiB per process")  # the quick plan, shown meanwhile
    key = probe_task.running_key("cpu-demo")
    assert key is not None
    page.reload()
    page.get_by_role("tab", name="Training").click()
    page.locator("#train-plan").get_by_text("Timing one step", exact=False).wait_for()  # followed after the reload
    for elem, value in (("train-name", "while-probing"), ("train-model", tiny_model_dir), ("train-steps", 1),
                        ("train-group_size", 2), ("train-dialogues_per_step", 2), ("train-minibatch_size", 2),
                        ("train-micro_batch_size", 2), ("train-max_new_tokens", 8)):
        _set(page, elem, value)
    _set(page, "train-extra", "max_dialogue_tokens: 512")
    assert probe_task.running(key)
    page.locator("#train-launch").click()
    page.locator("#train-launch-msg").get_by_text("Launched job #", exact=False).wait_for()
    jobs = job_queue.list_jobs(lab_server.store)
    try:
        assert [j["name"] for j in jobs] == ["while-probing"]
        expect(page.locator("#train-launch-msg")).to_contain_text("The timing probe was stopped")
        wait_for(lambda: not probe_task.running(key), timeout=120)
        assert "stopped (Launch)" in probe_task.progress(key)  # the probe had not ended: Launch did not wait
    finally:
        job_control.cancel(lab_server.store, jobs[0]["id"], force=True)
