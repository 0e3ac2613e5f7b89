"""The Published people view's service (app.services.human_sets) against a real SQLite store: a corpus file
imported (all or nothing, then keeping the good), a shadow run launched as a background job process that ends
succeeded with every reply judged, the runs table with its progress, a refused resume, and the report's plots."""
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


@pytest.mark.process
def test_import_run_shadow_in_the_background_and_plot_the_agreement(store, db_url, tmp_path):
    rng = np.random.default_rng(3)
    bad = tmp_path / "esconv.json"
    convs = [esconv_conversation(k, rng) for k in range(3)]
    convs[1]["dialog"][0]["speaker"] = "robot"
    bad.write_text(json.dumps(convs), encoding="utf-8")
    message = human_sets.import_file(store, str(bad), "esconv", "", False)
    assert message.startswith("**Nothing imported:** 1 bad conversation(s)") and "robot" in message
    assert "Imported 2 dialogue(s) into `human:esconv`" in human_sets.import_file(store, str(bad), "esconv", "", True)
    good = tmp_path / "people.jsonl"
    good.write_text("\n".join(json.dumps(quality_dialogue(k, rng)) for k in range(6)), encoding="utf-8")
    assert human_sets.import_file(store, str(good), "jsonl", "lab", False) == \
        "Imported 6 dialogue(s) into `human:lab`."
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

    report = human_agreement(store, "human:lab", n_boot=100)
    (table,) = report["by_fingerprint"].values()
    assert table["turns"]["spearman"]["n"] == 30 and table["turns"]["spearman"]["value"] > 0.4
    bars, groups = human_spearman_bars(report), human_group_bars(report)
    assert len(bars.data) == 2 and bars.data[0].y[0] == pytest.approx(table["turns"]["spearman"]["value"])
    assert set(groups.data[0].x) == set(table["by_problem_type"])
