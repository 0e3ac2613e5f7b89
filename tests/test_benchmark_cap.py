"""A benchmark that ends: the local engines' reply cap and repetition stop are part of the recorded protocol,
cut replies stay counted, and progress with the time left is printed while the run goes on."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
import torch
from conftest import REPO

from storage import EvalRun, session_scope
from trainer.benchmarking import benchmark, protocol
from trainer.benchmarking.progress import eta_seconds, fraction_done, progress_text, run_progress
from trainer.policies.base import SamplingConfig
from trainer.policies.repetition import RepetitionRule, RepetitionStop, is_degenerate


def test_a_loop_is_degenerate_and_varied_text_is_not():
    rule = RepetitionRule(window=60, n=5, max_share=0.5)
    assert is_degenerate([7] * 60, rule)
    assert is_degenerate(list(range(100)) + [1, 2, 3, 4, 5, 6] * 10, rule)  # a loop of period 6 after prose
    assert not is_degenerate(list(range(500)), rule)
    assert not is_degenerate([7] * 59, rule)  # shorter than the window: too early to say
    loop_with_a_slip = ([1, 2, 3, 4, 5, 6, 7, 8] * 8)[:60]
    loop_with_a_slip[30] = 99
    assert is_degenerate(loop_with_a_slip, rule)


def test_the_stopping_criterion_fires_row_by_row():
    rule = RepetitionRule(window=40, n=4)
    prompt = [5, 6, 7]
    looping = prompt + [9, 8] * 20
    varied = prompt + list(range(100, 140))
    stop = RepetitionStop(len(prompt), rule)
    done = stop(torch.tensor([looping, varied]), None)
    assert done.tolist() == [True, False] and stop.fired == {0: 40}


def test_a_looping_reply_is_cut_and_flagged(tiny_model_dir):
    """The tiny random model, greedy, repeats one token: with the stop it ends there instead of at the cap."""
    from trainer.policies.hf_engine import HFEngine

    engine = HFEngine(tiny_model_dir)
    prompt = engine.encode_chat([{"role": "user", "content": "hello there"}])
    params = SamplingConfig(temperature=0, max_new_tokens=300)
    free = engine.generate_ids([prompt], params)[0]
    assert free.finish_reason == "length" and len(free.token_ids) == 300
    engine.repetition_rule = RepetitionRule()
    cut = engine.generate_ids([prompt], params)[0]
    assert cut.finish_reason == "repetition" and len(cut.token_ids) < 300
    assert cut.token_ids == free.token_ids[:len(cut.token_ids)]  # the same reply, ended at the loop
    assert len(cut.logprobs) == len(cut.token_ids)


def test_the_cap_and_the_stop_are_recorded_for_local_engines_only():
    config = benchmark.BenchmarkConfig()
    local = protocol.protocol_record(config, ["en"], 8192, local=True)
    api = protocol.protocol_record(config, ["en"], None, local=False)
    assert local["max_new_tokens"] == protocol.LOCAL_REPLY_CAP and local["stop_on_repetition"]["window"] > 0
    assert api["max_new_tokens"] is None and "stop_on_repetition" not in api  # replays and API models as before
    other_cap = protocol.protocol_record(benchmark.BenchmarkConfig(max_new_tokens=512), ["en"], 8192, local=True)
    no_stop = protocol.protocol_record(benchmark.BenchmarkConfig(stop_on_repetition=False), ["en"], 8192, local=True)
    hashes = {r["protocol_hash"] for r in (local, api, other_cap, no_stop)}
    assert len(hashes) == 4  # runs whose caps differ are never ranked together


def test_eta_from_the_fraction_done():
    assert fraction_done(0, 4, 0, 10) == 0 and eta_seconds(0.0, 30.0) is None
    assert fraction_done(1, 4, 5, 10) == pytest.approx(1.5 / 4)
    assert eta_seconds(0.25, 60.0) == pytest.approx(180.0)
    assert fraction_done(4, 4, 0, 10) == 1.0 and eta_seconds(1.0, 60.0) == 0.0


def test_progress_is_read_from_the_store(store, tiny_model_dir):
    config = benchmark.BenchmarkConfig(policy=str(tiny_model_dir), profiles="builtin:heldout", limit=2,
                                       max_new_tokens=8)
    result = benchmark.run_benchmark(store, config, log=lambda _m: None)
    with session_scope(store) as s:  # pretend it is still running, started two minutes ago
        run = s.get(EvalRun, result.eval_run_id)
        run.status, run.created_at = "running", run.finished_at - timedelta(seconds=120)
    p = run_progress(store, result.eval_run_id, now=run.finished_at)
    assert (p["done"], p["total"]) == (2, 2) and p["replies"] >= 2 and p["tokens"] >= p["replies"]
    assert p["tokens_per_s"] == pytest.approx(p["tokens"] / 120) and p["eta_s"] == 0.0
    assert progress_text(p).startswith("2/2 dialogues, ") and "about 0 s left" in progress_text(p)


@pytest.mark.slow
@pytest.mark.process
def test_the_cli_prints_progress_and_records_the_cap(tiny_model_dir, tmp_path):
    r = subprocess.run([sys.executable, "-m", "trainer", "benchmark", "--policy", str(tiny_model_dir),
                        "--profiles", "builtin:heldout", "--limit", "2", "--temperature", "0",
                        "--db", f"sqlite:///{tmp_path / 'lab.db'}", "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr[-2000:]
    progress = [line for line in r.stderr.splitlines() if line.startswith("progress: ")]
    assert len(progress) >= 2 and "2/2 dialogues" in progress[-1] and "tok/s" in progress[-1]
    import json

    from storage import make_store
    from trainer.benchmarking.eval_runs import get_eval_run

    result = json.loads(r.stdout)
    store = make_store(f"sqlite:///{tmp_path / 'lab.db'}")
    run = get_eval_run(store, result["eval_run_id"])
    assert run["protocol"]["max_new_tokens"] == protocol.LOCAL_REPLY_CAP and "stop_on_repetition" in run["protocol"]
    # greedy, the tiny model loops in every reply: each one is cut by the stop and counted
    assert result["truncations"]["replies_cut"] > 0
    store.dispose()
