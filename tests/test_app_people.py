"""The People view against a real SQLite store: its service (app.services.people.human_sets) imports a corpus
file in an import job (all or nothing, then keeping the good), launches a shadow run as a background job process that ends
succeeded with every reply judged, lists the runs with their progress and refuses a resume of a finished one;
the report's plots; and the tab in a real browser, from import to the agreement table and plots (the
calibration curve beside the declared map among them), and its Calibrate panel (a bad name refused, the saved
calibrations listed)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import wait_for

from app.agreement_plots import human_group_bars, human_spearman_bars
from app.services.people import human_sets
from simulator.evaluation.human_agreement import human_agreement
from testkit.human_corpus import esconv_conversation, quality_dialogue
from trainer.jobs import queue as job_queue


def imported(store, db_url: str, *args) -> str:
    """The import job's result as the view shows it, once the job (started as the view starts it) has ended."""
    _, job_id = human_sets.start_import(store, db_url, *args)
    wait_for(lambda: job_queue.get_job(store, job_id)["status"] in ("succeeded", "failed", "dead"), timeout=180)
    return human_sets.import_jobs_md(store)[0]


@pytest.mark.process
def test_import_run_shadow_in_the_background_and_plot_the_agreement(store, db_url, tmp_path):
    rng = np.random.default_rng(3)
    bad = tmp_path / "esconv.json"
    convs = [esconv_conversation(k, rng) for k in range(3)]
    convs[1]["dialog"][0]["speaker"] = "robot"
    bad.write_text(json.dumps(convs), encoding="utf-8")
    message = imported(store, db_url, str(bad), "esconv", "", False)
    assert message.startswith("**Nothing imported** (job 1, failed): nothing stored: 1 bad conversation") and \
        "robot" in message
    assert "Imported 2 dialogue(s) into `human:esconv`" in imported(store, db_url, str(bad), "esconv", "", True)
    good = tmp_path / "people.jsonl"
    good.write_text("\n".join(json.dumps(quality_dialogue(k, rng)) for k in range(6)), encoding="utf-8")
    assert imported(store, db_url, str(good), "jsonl", "lab", False).startswith(
        "Imported 6 dialogue(s) into `human:lab`: 66 turns, 30 people's ratings on 30 turns, 6 pre/post pairs.")
    assert "`human:lab` | 6" in human_sets.sets_md(store)

    refused, none = human_sets.start_shadow(store, db_url, "human:nobody", "offline", "", 0)
    assert none is None and "names no stored human dialogues" in refused
    message, job_id = human_sets.start_shadow(store, db_url, "human:lab", "python:testkit.scripted_shadow:follower",
                                              "", 2)
    assert job_id and message == f"Shadow job {job_id} started."
    wait_for(lambda: job_queue.get_job(store, job_id)["status"] in ("succeeded", "failed", "dead"), timeout=180)
    job = job_queue.get_job(store, job_id)
    assert job["status"] == "succeeded" and job["step"] == job["total_steps"] == 30, job.get("error")
    table, resumable = human_sets.shadow_jobs_md(store)
    assert "| succeeded | 30/30 |" in table and resumable is None
    assert "Not resumed" in human_sets.resume_shadow(store, db_url, job_id)

    report = human_agreement(store, "human:lab", n_boot=100, with_realism=False)
    (table,) = report["by_fingerprint"].values()
    assert table["turns"]["spearman"]["n"] == 30 and table["turns"]["spearman"]["value"] > 0.4
    bars, groups = human_spearman_bars(report), human_group_bars(report)
    assert len(bars.data) == 2 and bars.data[0].y[0] == pytest.approx(table["turns"]["spearman"]["value"])
    assert set(groups.data[0].x) == set(table["by_problem_type"])


@pytest.mark.browser
def test_published_people_tab_imports_and_shows_the_agreement(browser_page, lab_server, tmp_path):
    from playwright.sync_api import expect

    from trainer.benchmarking.shadow_jobs import run_shadow_foreground

    page, store = browser_page, lab_server.store
    rng = np.random.default_rng(5)
    path = tmp_path / "people.jsonl"
    path.write_text("\n".join(json.dumps(quality_dialogue(k, rng)) for k in range(6)) + "\n{broken", encoding="utf-8")
    page.get_by_role("tab", name="People", exact=True).click()
    page.get_by_label("jsonl").check()
    page.locator("#people-name textarea").fill("lab")
    page.locator("#people-upload input[type=file]").set_input_files(str(path))
    page.click("#people-import")
    expect(page.locator("#people-import-status")).to_contain_text("Import job 1 started: people.jsonl")
    expect(page.locator("#people-import-jobs")).to_contain_text("Nothing imported (job 1, failed): nothing stored: 1 "
                                                                "bad conversation(s)", timeout=180_000)
    expect(page.locator("#people-import-jobs")).to_contain_text("line 7: json: malformed JSON")
    path.write_text("\n".join(json.dumps(quality_dialogue(k, rng)) for k in range(6)), encoding="utf-8")
    page.locator("#people-upload input[type=file]").set_input_files(str(path))
    page.click("#people-import")
    expect(page.locator("#people-import-jobs")).to_contain_text("Imported 6 dialogue(s) into human:lab: 66 turns",
                                                                timeout=180_000)
    expect(page.locator("#people-sets")).to_contain_text("human:lab")

    page.locator("#people-report-set textarea").fill("human:lab")
    page.click("#people-report")
    expect(page.locator("#people-report-table")).to_contain_text("no simulator has judged human:lab")
    # sync Playwright keeps an event loop running in this thread: the job's work runs beside it
    run_shadow_foreground(store, {"spec": "python:testkit.scripted_shadow:follower"}, "human:lab", 0)
    page.click("#people-refresh")
    expect(page.locator("#people-runs")).to_contain_text("30/30")
    page.click("#people-report")
    expect(page.locator("#people-report-table")).to_contain_text("human:lab: 6 dialogue(s), 30 people's score(s)")
    expect(page.locator("#people-bars .barlayer .trace")).to_have_count(2)
    expect(page.locator("#people-groups .barlayer .trace")).to_have_count(1)
    expect(page.locator("#people-curve .scatterlayer .trace")).to_have_count(2)  # the simulator and the map
    expect(page.locator("#people-ranking")).to_contain_text("a ranking needs two or more")  # one policy here
    expect(page.locator("#people-report-table")).to_contain_text("next message vs the person's (MiniLM cosine, n 30")
    page.locator("#people-realism input").uncheck()
    page.click("#people-report")
    expect(page.locator("#people-report-table")).not_to_contain_text("next message vs the person's")
    expect(page.locator("#people-report-table")).to_contain_text("interval width by dialogues rated")
    assert page.dialogs == []


@pytest.mark.browser
def test_people_tab_calibrate_panel_refuses_a_bad_name_and_lists_the_saved_calibrations(browser_page, lab_server):
    from playwright.sync_api import expect

    from simulator.user.calibration import Calibration, save_calibration
    from storage.db import lab_home

    page = browser_page
    figures = {side: {"turns": {"spearman": {"value": s}, "mean_diff": {"value": d}}}
               for side, s, d in (("before", 0.31, -6.2), ("after", 0.35, 0.4))}
    save_calibration(Calibration("shown-cal", [-5.0, 5.0], [-2.0, 8.0], simulator_fingerprint_hash="ab12cd34ef56ab78",
                                 report={**figures, "n_turns": 42}), lab_home())
    page.get_by_role("tab", name="People", exact=True).click()
    page.get_by_text("4. Calibrate a simulator to the people").click()
    page.locator("#people-cal-name textarea").fill("../elsewhere")
    page.click("#people-cal-start")
    expect(page.locator("#people-cal-status")).to_contain_text("Not started: --name: '../elsewhere' is not a name")
    page.click("#people-cal-refresh")
    row = page.locator("#people-cal-saved tr", has_text="shown-cal")
    expect(row).to_contain_text("ab12cd34ef56ab78")
    expect(row).to_contain_text("predict")  # a calibration saved without its map named was fitted by least squares
    expect(page.locator("#people-cal-map input[value='predict']")).to_be_checked()
    expect(row).to_contain_text("+0.31 -> +0.35")
    expect(row).to_contain_text("-6.20 -> +0.40")
    expect(page.locator("#people-cal-jobs")).to_contain_text("No calibrate jobs yet.")
    assert not (lab_home() / "elsewhere.json").exists() and page.dialogs == []
