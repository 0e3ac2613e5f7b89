"""The README's five-minute tour in a real browser, as a newcomer meets it, on small settings so it runs in a
few minutes on 2 cores: Live rollout (the default policy, the packaged SmolLM2, one dialogue of one turn),
Plan and a one-step training job, a one-dialogue benchmark of its checkpoint from the Benchmark form, and a
one-persona comparison of the checkpoint with the untrained model from the Compare view. Each step must end
without an error toast, a JS dialog or a failed job.

The model trained and benchmarked is testkit's tiny model, copied into the lab's home (where a path given
from the web may point); the Live rollout step uses the form's own default policy.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import start_comparison_in_view, wait_for
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

# about 11 minutes on the 2-core machine at a load of ~10; 15 at ~16: longer than the suite's default limit
pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.process, pytest.mark.slow,
              pytest.mark.timeout(2400)]
JOB_WAIT_S = 600  # generous: the jobs run on a busy 2-core machine


def _set(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input, #{elem_id} textarea").first
    box.fill(str(value))
    box.press("Tab")


def _no_error_on_page(page) -> None:
    assert page.dialogs == []
    assert page.locator(".toast-body.error, .toast-wrap .error").count() == 0  # Gradio's error toasts


def _finished(store, job_id: int) -> dict:
    detail = wait_for(lambda: (d := job_queue.job_detail(store, job_id)) and d["status"] in
                      ("succeeded", "failed", "cancelled", "interrupted", "dead") and d, timeout=JOB_WAIT_S,
                      every=1.0)
    assert detail["status"] == "succeeded", (detail["status"], detail["error"], detail["log_tail"][-2000:])
    return detail


def tour_step_live_rollout(page) -> None:
    """1. Watch a dialogue: the lab opens on Live rollout; Start on the form's defaults (one dialogue, one
    turn) streams it and says how it ended."""
    from playwright.sync_api import expect

    expect(page.get_by_role("tab", name="Live rollout")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#live-policy textarea")).to_have_value("default")
    expect(page.locator("#live-personas .token")).to_have_count(1)  # the default persona, set as the page loads
    for elem, value in (("live-group", 1), ("live-max-turns", 1)):
        page.locator(f"#{elem} input[type=number]").fill(str(value))
        page.locator(f"#{elem} input[type=number]").press("Enter")
    page.click("#live-start")
    expect(page.locator("#live-status")).to_contain_text("Done: 1 dialogue ", timeout=JOB_WAIT_S * 1000)
    expect(page.locator("#live-chats .turn-assistant")).to_have_count(1)
    expect(page.locator("#live-chats .turn-error")).to_have_count(0)  # a reply cut at its cap is a note
    _no_error_on_page(page)


def tour_step_plan_and_train(page, store, model_dir: Path) -> str:
    """2. Plan, then train: the plan runs in the background with its progress and ends beside Launch with
    its time and what it was measured on; a one-step job is launched, followed, and succeeds. Returns the
    checkpoint's folder."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Training").click()
    expect(page.locator("#train-plan")).to_contain_text("Plan")  # the kept plan, or how to get one
    for elem, value in (("train-name", "tour"), ("train-model", model_dir), ("train-steps", 1),
                        ("train-group_size", 2), ("train-dialogues_per_step", 2), ("train-minibatch_size", 2),
                        ("train-micro_batch_size", 2), ("train-max_turns", 1), ("train-max_new_tokens", 8),
                        ("train-save_every", 1)):
        _set(page, elem, value)
    _set(page, "train-extra", "max_dialogue_tokens: 512")
    page.locator("#train-plan-btn").click()
    expect(page.locator("#train-plan")).to_contain_text("Timing one step", timeout=30_000)  # under the quick plan
    expect(page.locator("#train-plan")).to_contain_text("measured on", timeout=JOB_WAIT_S * 1000)
    expect(page.locator("#train-plan")).to_contain_text(re.compile(r"time: [\d.]+ s per step x 1 steps"))
    page.locator("#train-launch").click()
    page.locator("#train-launch-msg").get_by_text("Launched job #", exact=False).wait_for()
    job_id = job_queue.list_jobs(store, kind="train")[0]["id"]
    detail = _finished(store, job_id)
    expect(page.locator("#train-summary")).to_contain_text("succeeded", timeout=60_000)
    _no_error_on_page(page)
    assert detail["checkpoints"], detail["log_tail"][-2000:]
    return detail["checkpoints"][-1]["path"]


def tour_step_benchmark(page, store, checkpoint: str, grid_rows) -> int:
    """3. Benchmark the checkpoint from the Benchmark form's quick look (one held-out dialogue, short replies,
    the expected time shown before Start): the job's row opens its
    details, progress shows while it runs, and the run joins the leaderboard (its id in the "eval run" column).
    Returns the eval run's id."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Benchmark").click()
    expect(page.locator("#bench-simulator-temperature textarea, #bench-simulator-temperature input").first
           ).to_have_value("")  # empty: the backend's default, not 0
    _set(page, "bench-policy", checkpoint)
    page.locator("#bench-quick input").check()  # the README's quick look: one persona, 16-token replies
    expect(page.locator("#bench-limit input")).to_have_value("1")
    expect(page.locator("#bench-expected")).to_contain_text("Expected time: unknown until this policy has run")
    page.locator("#bench-start").click()
    expect(page.locator("#bench-msg")).to_contain_text("Benchmark job #")
    job_id = job_queue.list_jobs(store, kind="benchmark")[0]["id"]
    expect(page.locator("#bench-job-detail")).to_contain_text(f"Job #{job_id}")  # the started job is followed
    _finished(store, job_id)
    expect(page.locator("#bench-job-detail")).to_contain_text("succeeded", timeout=60_000)
    expect(page.locator("#bench-job-detail")).to_contain_text("1/1 dialogues")
    from app.services.benchmark_form import eval_run_of_job

    eval_run_id = eval_run_of_job(store, job_id)
    wait_for(lambda: any(row[2] == str(eval_run_id) for row in grid_rows(page, "bench-lab")), timeout=60)
    _no_error_on_page(page)
    return eval_run_id


def tour_step_compare(page, store, untrained: Path, checkpoint: str, grid_rows) -> None:
    """4. Compare the checkpoint (B) with the untrained model (A), persona by persona, from the Compare view:
    the comparison runs as a job with its progress beside Cancel, and when it ends its pairs open in the view."""
    from playwright.sync_api import expect

    from trainer.benchmarking import compare

    comparison_id = start_comparison_in_view(page, store, untrained, checkpoint, limit=1)
    expect(page.locator("#cmp-summary")).to_contain_text("wins", timeout=JOB_WAIT_S * 1000)
    assert compare.get_comparison(store, comparison_id)["status"] == "succeeded"
    assert len(wait_for(lambda: grid_rows(page, "cmp-pairs"), timeout=60)) == 1
    _no_error_on_page(page)


def test_the_readme_tour_on_small_settings(lab_server, browser_page, tiny_model_dir, grid_rows):
    page, store = browser_page, lab_server.store
    model_dir = Path(os.environ["RLVER_LAB_HOME"]) / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model_dir)
    try:
        tour_step_live_rollout(page)
        checkpoint = tour_step_plan_and_train(page, store, model_dir)
        tour_step_benchmark(page, store, checkpoint, grid_rows)
        tour_step_compare(page, store, model_dir, checkpoint, grid_rows)
    finally:
        for job in job_queue.list_jobs(store):
            if job["status"] in ("queued", "running", "stalled"):
                job_control.cancel(store, job["id"], force=True)
