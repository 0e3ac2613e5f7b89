"""A corpus imported from the web runs as a job (trainer.import_jobs, started by the People view's service
app.services.people.human_sets.start_import): its own process on a real SQLite store, its progress and result
in the job's row, a bound on conversations named when it refuses, Cancel with nothing stored; and every web
import (corpus, ratings, personas, transcripts) refuses a 200,000-deep file in one line."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from helpers import wait_for

from app.services.people import human_sets
from simulator.evaluation import ratings, transcripts
from simulator.evaluation.human_corpora import human_sets as stored_sets
from simulator.personas import store as persona_store
from testkit.human_corpus import esconv_conversation, esconv_text
from trainer.jobs import queue as job_queue

FINAL = ("succeeded", "failed", "cancelled", "dead", "interrupted")
REFUSAL = "json: nested more than 24 levels deep"


def shown(store) -> tuple[str, int | None]:
    """The import jobs' Markdown as it reads (Markdown's backslash escapes removed) and the live job's id."""
    text, live = human_sets.import_jobs_md(store)
    return re.sub(r"\\(.)", r"\1", text), live


def finished(store, job_id: int, timeout: float = 300) -> dict:
    return wait_for(lambda: (j := job_queue.get_job(store, job_id)) and j["status"] in FINAL and j, timeout=timeout,
                    every=0.3)


@pytest.mark.process
def test_a_web_import_runs_as_its_own_process_and_reports_what_it_stored(store, db_url, tmp_path):
    rng = np.random.default_rng(3)
    convs = [esconv_conversation(k, rng) for k in range(4)]
    convs[2]["dialog"][0]["speaker"] = "robot"
    path = tmp_path / "ESConv.json"
    path.write_text(json.dumps(convs, indent=2), encoding="utf-8")
    message, job_id = human_sets.start_import(store, db_url, str(path), "esconv", "", False)
    assert message == f"Import job {job_id} started: `ESConv.json` (at most 20,000 conversations)."
    job = finished(store, job_id)
    assert job["status"] == "failed" and job["pid"] != os.getpid() and stored_sets(store) == []
    text, live = shown(store)
    assert live is None and text.startswith(f"**Nothing imported** (job {job_id}, failed): nothing stored: 1 bad "
                                            "conversation(s), the first conversation 3 (line ")
    assert "unknown speaker 'robot'" in text

    message, job_id = human_sets.start_import(store, db_url, str(path), "esconv", "", True)
    job = finished(store, job_id)
    assert job["status"] == "succeeded", job["error"]
    result = job["config"]["result"]
    assert result["imported"] == 3 and result["bad"] == 1 and result["turns"] == 3 * 13
    assert result["ratings"] == result["rated_turns"] == 3 * 3 and result["state_pairs"] == 3
    text, _ = shown(store)
    assert text.startswith("Imported 3 dialogue(s) into `human:esconv`: 39 turns, 9 people's ratings on 9 turns, 3 "
                           "pre/post pairs. Left out 1:\n- conversation 3 (line ")
    assert "| esconv | 3 |" in human_sets.sets_md(store).replace("`human:", "").replace("`", "")

    path.write_text(json.dumps([dict(convs[0], situation="Corrected.")] + convs[1:2] + convs[3:]), encoding="utf-8")
    _, job_id = human_sets.start_import(store, db_url, str(path), "esconv", "", False)
    assert finished(store, job_id)["status"] == "failed"
    assert "store it as a new version with --version NAME" in shown(store)[0]
    _, job_id = human_sets.start_import(store, db_url, str(path), "esconv", "", False, version="fix-1")
    assert finished(store, job_id)["status"] == "succeeded"
    assert stored_sets(store) == [{"name": "esconv", "n": 3}, {"name": "esconv@fix-1", "n": 3}]


@pytest.mark.process
def test_the_owners_bound_on_conversations_is_named_and_nothing_is_stored(store, db_url, tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(esconv_text(12, seed=1), encoding="utf-8")
    monkeypatch.setenv("RLVER_LAB_MAX_IMPORT_CONVERSATIONS", "10")
    message, job_id = human_sets.start_import(store, db_url, str(path), "esconv", "big", True)
    assert "(at most 10 conversations)" in message
    job = finished(store, job_id)
    assert job["status"] == "failed" and stored_sets(store) == []
    assert job["error"] == ("ValueError: file: holds more than 10 conversations, the most a web import takes (the "
                            "owner's --max-import-conversations 10); nothing stored (import it with `python -m "
                            "simulator import-human`, or in parts)")
    refused, none = human_sets.start_import(store, db_url, str(path), "csv", "big", True)
    assert none is None and refused == "**Not started:** format: one of esconv, jsonl, got 'csv'"
    refused, none = human_sets.start_import(store, db_url, str(path), "esconv", "big", True, version="v 2")
    assert none is None and "version: a corpus name of letters, digits" in refused


@pytest.mark.process
@pytest.mark.slow
def test_cancel_stops_an_import_with_nothing_stored(store, db_url, tmp_path, monkeypatch):
    path = tmp_path / "large.json"
    path.write_text(esconv_text(30_000, seed=2, replies=2), encoding="utf-8")
    monkeypatch.setenv("RLVER_LAB_MAX_IMPORT_CONVERSATIONS", "40000")
    _, job_id = human_sets.start_import(store, db_url, str(path), "esconv", "large", False)
    wait_for(lambda: (job_queue.get_job(store, job_id) or {}).get("step"), timeout=300, every=0.05)  # reading
    assert "conversation(s) read" in shown(store)[0]
    assert shown(store)[1] == job_id  # the live job, which Cancel names
    assert human_sets.cancel_import(store, job_id).startswith(f"Import job {job_id}: ")
    job = finished(store, job_id)
    assert job["status"] == "cancelled" and stored_sets(store) == []


def write_deep(path):
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    return path


@pytest.mark.process
def test_a_200k_deep_corpus_from_the_web_is_refused_in_one_line(store, db_url, tmp_path):
    _, job_id = human_sets.start_import(store, db_url, str(write_deep(tmp_path / "deep.json")), "esconv", "", False)
    job = finished(store, job_id)
    assert job["status"] == "failed" and job["error"] == ("ValueError: nothing stored: 1 bad conversation(s), the "
                                                          f"first conversation 1 (line 1): {REFUSAL}")
    assert "RecursionError" not in job_queue.job_detail(store, job_id).get("log", "")


def test_the_other_web_imports_refuse_a_200k_deep_file_in_one_line(store, tmp_path):
    deep = write_deep(tmp_path / "deep.jsonl")
    report = ratings.import_jsonl(store, deep.read_text(encoding="utf-8"))  # what the Rate view calls
    assert report.imported == 0 and report.errors == [f"line 1: {REFUSAL}"]
    report = persona_store.import_file(store, str(deep))  # the Personas view
    assert report.stored == 0 and [str(e) for e in report.errors] == [f"line 1: {REFUSAL}"]
    report = transcripts.import_file(store, deep)  # the Transcripts view
    assert report.dialogue_ids == [] and [str(e) for e in report.errors] == [f"line 1: {REFUSAL}"]
