"""API traffic control (simulator.llm.traffic) against the real scripted OpenAI-compatible server on
127.0.0.1, and the server's latency model and 429 share, checked with the server's own statistics."""
from __future__ import annotations

import asyncio
import random
import re
import statistics
import threading

import pytest
from helpers import wait_for

from simulator.llm.traffic import Traffic, TrafficLimits, parse_retry_after, read_snapshot, traffic_text, write_snapshot
from simulator.user.backends import BackendError, make_backend
from testkit.scripted_server import ScriptedServer, start_server
from testkit.server_latency import LatencyModel
from trainer.jobs.context import JobContext


def backend_for(server, **kw):
    opts = dict(base_url=server.base_url, api_key="k", timeout=5.0, max_retries=4, backoff_s=0.01, max_backoff_s=0.05)
    opts.update(kw)
    return make_backend("openai:sim", **opts)


def ask_all(backend, n, prefix="hi"):
    async def many():
        return await asyncio.gather(*[backend.complete([{"role": "user", "content": f"{prefix} {i}"}])
                                      for i in range(n)])
    return asyncio.run(many())


def test_in_flight_limit_holds_under_fifty_concurrent_calls():
    with start_server(latency_s=0.05) as server:
        backend = backend_for(server, max_in_flight=4)
        comps = ask_all(backend, 50)
        assert all(c.text for c in comps) and server.calls == 50
        assert server.max_in_flight == 4  # reached, never passed
        counters = backend.traffic.limiter.counters
        assert (counters.sent, counters.in_flight, counters.waiting, counters.retried) == (50, 0, 0, 0)


def test_requests_per_minute_spaces_the_starts():
    """300 a minute = one start every 0.2 s: the k-th request cannot reach the server before 0.2 * k s after
    the first (the limit's definition; 0.1 s allowed for the first request's own trip)."""
    with start_server() as server:
        backend = backend_for(server, requests_per_minute=300)
        ask_all(backend, 6)
        received = sorted(t for t, _ in server.timeline)
    assert len(received) == 6
    for k, t in enumerate(received):
        assert t - received[0] >= 0.2 * k - 0.1, (k, t - received[0])


def test_retry_after_is_honoured():
    """Calls one at a time, half of them answered 429 with Retry-After: 0.3: the request after a 429 (its
    retry) reaches the server no sooner than 0.3 s after the 429 did."""
    with start_server(rate_limit_share=0.5, retry_after_s=0.3, seed=4) as server:
        backend = backend_for(server, max_retries=10, backoff_s=0.0)

        async def one_at_a_time():
            return [await backend.complete([{"role": "user", "content": f"q{i}"}]) for i in range(5)]

        comps = asyncio.run(one_at_a_time())
        timeline = list(server.timeline)
    statuses = [s for _, s in timeline]
    assert statuses.count(429) == server.rate_limited >= 2 and statuses.count(200) == 5
    for (t, status), (t_next, _) in zip(timeline, timeline[1:]):
        if status == 429:
            assert t_next - t >= 0.3, t_next - t
    assert sum(c.attempts for c in comps) == len(timeline)
    counters = backend.traffic.limiter.counters
    assert counters.rate_limited == counters.retried == server.rate_limited


def test_retry_after_as_seconds_or_http_date():
    now = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
    assert parse_retry_after("7") == 7.0 and parse_retry_after("0.25") == 0.25
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", now=now) == 30.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now=now) == 0.0  # already past
    assert parse_retry_after("soon") is None and parse_retry_after("") is None and parse_retry_after(None) is None


def test_giving_up_names_the_endpoint_and_the_last_status():
    with start_server(rate_limit_share=1.0, retry_after_s=0.01) as server:
        backend = backend_for(server, max_retries=2)
        host = server.base_url.split("//")[1].split("/")[0]
        with pytest.raises(BackendError) as err:
            ask_all(backend, 1)
        assert host in str(err.value) and "HTTP 429" in str(err.value)
        assert "gave up after 3 attempts; last status: HTTP 429" in str(err.value)
        counters = backend.traffic.limiter.counters
        assert (counters.sent, counters.retried, counters.rate_limited, counters.gave_up) == (3, 2, 3, 1)
        assert server.calls == 3


def test_a_retry_after_longer_than_allowed_fails_at_once():
    with start_server(rate_limit_share=1.0, retry_after_s=3600) as server:
        with pytest.raises(BackendError, match="asks to wait 3600s before a retry, more than the 600s allowed"):
            ask_all(backend_for(server), 1)
        assert server.calls == 1


def test_backoff_jitter_is_seeded():
    limits = TrafficLimits(backoff_s=1.0, max_backoff_s=5.0)
    waits = [[Traffic("http://jitter.test/v1", limits, seed=s).backoff_s(k) for k in range(1, 6)] for s in (3, 3, 4)]
    assert waits[0] == waits[1] != waits[2]
    for k, w in enumerate(waits[0], start=1):
        base = min(5.0, 2.0 ** (k - 1))
        assert 0.5 * base <= w < 1.5 * base


def test_cancelled_waiters_give_their_slots_back():
    with start_server(latency_s=0.2) as server:
        backend = backend_for(server, max_in_flight=2)

        async def cancel_some():
            tasks = [asyncio.ensure_future(backend.complete([{"role": "user", "content": str(i)}])) for i in range(8)]
            await asyncio.sleep(0.05)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return await backend.complete([{"role": "user", "content": "after"}])

        assert asyncio.run(cancel_some()).text
        limiter = backend.traffic.limiter
        assert limiter._slots_used == 0 and not limiter._waiters
        assert (limiter.counters.in_flight, limiter.counters.waiting) == (0, 0)


def test_simulator_and_api_policy_on_one_endpoint_share_its_limit():
    """The policy's batch runs on its own event loop in another thread; the limit holds across both."""
    from trainer.policies import SamplingConfig, make_policy_engine

    with start_server(latency_s=0.05) as server:
        backend = backend_for(server, max_in_flight=3)
        policy = make_policy_engine("openai:scripted", base_url=server.base_url, max_in_flight=3)
        out = {}
        thread = threading.Thread(target=lambda: out.update(gens=policy.generate(
            [[{"role": "user", "content": f"p{i}"}] for i in range(12)], SamplingConfig(max_new_tokens=16))))
        thread.start()
        comps = ask_all(backend, 12)
        thread.join()
        assert all(c.text for c in comps) and all(g.text and not g.error for g in out["gens"])
        assert policy.traffic.limiter is backend.traffic.limiter and server.max_in_flight <= 3
        assert server.calls == 24


def test_api_policy_retries_rate_limits_and_reports_giving_up():
    from trainer.policies import SamplingConfig, make_policy_engine

    with start_server(rate_limit_share=1.0, retry_after_s=0.01) as server:
        policy = make_policy_engine("openai:scripted", base_url=server.base_url, max_retries=1)
        [gen] = policy.generate([[{"role": "user", "content": "hello"}]], SamplingConfig(max_new_tokens=8))
        assert gen.finish_reason == "error" and server.calls == 2  # the client's own retries are off
        assert "HTTP 429" in gen.error and "last status: HTTP 429" in gen.error and "127.0.0.1" in gen.error


# ------------------------------------------------------------------------------ the scripted server's model
def test_lognormal_latency_matches_its_median_and_p99():
    model = LatencyModel(median_s=0.2, p99_s=2.0)
    rng = random.Random(0)
    draws = sorted(model.draw(rng) for _ in range(20000))
    assert statistics.median(draws) == pytest.approx(0.2, rel=0.05)
    assert draws[int(0.99 * len(draws))] == pytest.approx(2.0, rel=0.1)
    assert LatencyModel(fixed_s=0.3).draw(rng) == 0.3


def test_server_latency_and_429_share_over_many_requests():
    """Server-side statistics: the delays the server drew and the 429s it sent, with a fixed seed."""
    with start_server(latency_median_s=0.004, latency_p99_s=0.04, rate_limit_share=0.2, retry_after_s=0.001,
                      seed=1) as server:
        backend = backend_for(server, max_in_flight=16, max_retries=20)
        ask_all(backend, 400)
        latencies, statuses = sorted(server.latencies), [s for _, s in server.timeline]
    assert len(latencies) == statuses.count(200) == 400
    assert statuses.count(429) / len(statuses) == pytest.approx(0.2, abs=0.04)
    assert statistics.median(latencies) == pytest.approx(0.004, rel=0.15)
    assert latencies[int(0.99 * len(latencies))] == pytest.approx(0.04, rel=0.4)


def test_bad_latency_settings_name_the_field():
    with pytest.raises(ValueError, match="latency_p99_s must be a number >= latency_median_s"):
        ScriptedServer(latency_median_s=1.0, latency_p99_s=0.5)
    with pytest.raises(ValueError, match="latency_median_s and latency_p99_s go together"):
        ScriptedServer(latency_median_s=1.0)
    with pytest.raises(ValueError, match="rate_limit_share must be in"):
        ScriptedServer(rate_limit_share=1.5)


# --------------------------------------------------------------------------- configs, fingerprint, views
def test_limits_are_validated_by_name_and_stay_out_of_the_fingerprint():
    from trainer.benchmarking.benchmark import BenchmarkConfig
    from trainer.config import TrainConfig

    errors = TrainConfig(simulator_requests_per_minute=-1, simulator_max_in_flight=0).errors(check_paths=False)
    assert errors["simulator_requests_per_minute"] == "must be an integer >= 0 (0 = no limit), got -1"
    assert errors["simulator_max_in_flight"] == "must be an integer >= 1, got 0"
    assert BenchmarkConfig(policy_max_retries=-2).errors() == {"policy_max_retries": "must be an integer >= 0, got -2"}
    a = make_backend("openai:m", base_url="http://fp.test/v1", max_in_flight=2, requests_per_minute=60)
    b = make_backend("openai:m", base_url="http://fp.test/v1", max_in_flight=9, max_retries=0)
    assert a.fingerprint() == b.fingerprint()
    assert a.traffic.limiter is b.traffic.limiter and a.traffic.limiter.max_in_flight == 2  # the stricter


def test_progress_text_shows_a_running_jobs_traffic(tmp_path):
    from app.services import training

    with start_server(rate_limit_share=0.5, retry_after_s=0.001, seed=4) as server:
        ask_all(backend_for(server, max_retries=10), 4)
        write_snapshot(tmp_path)
    snap = read_snapshot(tmp_path)
    host = server.base_url.split("//")[1].split("/")[0]
    assert snap[host]["sent"] == server.calls and snap[host]["rate_limited"] == server.rate_limited > 0
    job = {"status": "running", "step": 2, "total_steps": 8, "progress": 0.25, "output_dir": str(tmp_path)}
    text = training.progress_text(job)
    assert text.startswith("step 2/8 done (25%) · API ") and "0 in flight · 0 waiting" in text
    assert f"{server.rate_limited}×429" in text and traffic_text(snap) in text
    assert training.progress_text({**job, "status": "succeeded"}) == "step 2/8 done (25%)"


@pytest.mark.process
def test_benchmark_job_shows_traffic_while_it_runs(store, db_url):
    """A real benchmark job over the scripted server, two requests in flight at most: its row in the jobs
    table (Training and Benchmark views) shows them in flight and the rest waiting."""
    from app.services import training
    from trainer.benchmarking import benchmark
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    with start_server(latency_s=0.2) as server:
        config = {"policy": "openai:scripted", "policy_base_url": server.base_url, "simulator": "openai:scripted",
                  "simulator_base_url": server.base_url, "limit": 4, "concurrency": 4,
                  "simulator_max_in_flight": 2, "policy_max_in_flight": 2}
        job_id = benchmark.start_benchmark_job(store, db_url, config)

        def progress() -> str:
            [row] = [r for r in training.jobs_rows(job_queue.list_jobs(store, kind="benchmark")) if r[0] == job_id]
            return row[4]

        seen = []
        wait_for(lambda: seen.append(progress()) or re.search(r"· API [12] in flight · \d+ waiting", seen[-1]),
                 timeout=180)
        assert not any(re.search(r"API [3-9] in flight", text) for text in seen)
        # what the server saw before the cancel (a cancelled client drops requests the server still serves)
        assert server.max_in_flight <= 2
        job_control.cancel(store, job_id)
        wait_for(lambda: job_queue.job_detail(store, job_id)["status"] in job_queue.FINAL_STATUSES, timeout=120)
        assert "API" not in progress()


def test_training_job_records_its_limits_and_reports_its_traffic(tiny_model_dir, tmp_path, store):
    """One PPO step against the scripted server as simulator, one request in flight, a third of them 429:
    the job's config keeps the limits, the server never sees two at once, and the job folder holds the
    counters the views read."""
    from trainer.config import TrainConfig
    from trainer.jobs import queue as job_queue
    from trainer.learning.rl_trainer import RLTrainer

    with start_server(latency_s=0.01, rate_limit_share=0.3, retry_after_s=0.01, seed=2) as server:
        cfg = TrainConfig(model=str(tiny_model_dir), algorithm="ppo", dialogues_per_step=2, minibatch_size=2,
                          micro_batch_size=1, steps=1, max_turns=2, max_new_tokens=6, max_dialogue_tokens=1024,
                          simulator="openai:sim", simulator_base_url=server.base_url, simulator_max_in_flight=1,
                          simulator_max_retries=20, output_dir=str(tmp_path / "run"), store_dialogues=False)
        job_id = job_queue.create_job(store, "train", cfg.to_dict())
        ctx = JobContext(store, job_id, heartbeat_s=0.1, install_signals=False)
        host = server.base_url.split("//")[1].split("/")[0]
        with ctx:
            RLTrainer(cfg, store=store, job=ctx).train()
            wait_for(lambda: read_snapshot(ctx.output_dir).get(host, {}).get("sent") == server.calls, timeout=10)
        assert server.max_in_flight == 1 and server.rate_limited > 0
    detail = job_queue.job_detail(store, job_id)
    assert detail["status"] == "succeeded"
    assert (detail["config"]["simulator_max_in_flight"], detail["config"]["simulator_max_retries"]) == (1, 20)
    counters = read_snapshot(detail["output_dir"])[host]
    assert counters["rate_limited"] == counters["retried"] == server.rate_limited
    assert (counters["in_flight"], counters["waiting"], counters["gave_up"]) == (0, 0, 0)
