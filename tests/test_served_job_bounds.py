"""The grid bound and the live-jobs ceiling against a real `python -m app` (docs/security.md#limits): an
experiment grid sent to the Experiments view's Launch over the app's own HTTP API is refused naming each bound
(cells, parallel), and with the owner's ceiling taken a valid grid is refused naming --max-live-jobs; nothing is
recorded."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import wait_for_http

from app.services.experiments import arms_grid
from storage import make_store
from testkit import visitor
from trainer.experiments.grid import list_experiments
from trainer.jobs import queue as job_queue

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.process
def test_a_served_lab_refuses_a_grid_past_the_bounds_and_the_ceiling(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db_url = f"sqlite:///{tmp_path / 'lab.db'}"
    store = make_store(db_url)
    job_queue.create_job(store, "train", {})  # two live jobs from a shell: the ceiling of 3 leaves one place
    job_queue.create_job(store, "benchmark", {})
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", RLVER_LAB_PLAN_ON_OPEN="0")
    env.pop("RLVER_LAB_AUTH", None)
    log = tmp_path / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db", db_url,
                                 "--max-live-jobs", "3"], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base, proc, log)
        with httpx.Client(timeout=120) as client:
            config = visitor.read_config(base, client)
            grid_box = next(c["id"] for c in config["components"]
                            if (c.get("props") or {}).get("value") == arms_grid())
            launch = next(d for d in config["dependencies"] if d.get("backend_fn") and d["inputs"] == [grid_box]
                          and any(t[1] == "click" for t in d.get("targets") or []))

            def answer(text: str) -> str:
                data = (visitor.call(base, launch, [text], client).get("output") or {}).get("data") or [""]
                return str(data[0]).replace("\\", "")  # the message as shown (Markdown escapes dropped)

            seeds = ", ".join(str(i) for i in range(500))
            too_big = answer(f"name: wide\nparallel: 1000000\ngrid:\n  seed: [{seeds}]\n")
            assert "Not launched" in too_big and "cells" in too_big and "at most 64 from the web page (got 500)" \
                in too_big and "at most 8 from the web page (got 1,000,000)" in too_big, too_big
            full = answer(arms_grid())  # a valid grid: its runner and first cell need two places, one is free
            assert "Not launched" in full and "--max-live-jobs 3" in full, full
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    assert list_experiments(store) == []
