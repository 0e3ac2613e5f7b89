"""The openai backend against a real OpenAI-compatible HTTP server on 127.0.0.1 (testkit.scripted_server)."""
import asyncio
import socket

import pytest
from conftest import make_sim_profile

from simulator.user.agent import SentientAgent
from simulator.user.backends import BackendError, make_backend
from storage.dialogues import add_turn, finish_dialogue, load_dialogue, start_dialogue
from testkit.scripted_server import FAULTS, start_server

REPLIES = ["I hear you. That sounds like a hard year, and you did a lot.", "Whatever, get over it.",
           "It makes sense that you feel overlooked; I'm proud of what you did."]


def backend_for(server, **kw):
    opts = dict(base_url=server.base_url, api_key="test-key", timeout=0.5, max_retries=2, backoff_s=0.01,
                max_backoff_s=0.05, max_in_flight=8)
    opts.update(kw)
    return make_backend(opts.pop("spec", "openai:sim-model"), **opts)


async def run_dialogue(store, profile, backend, seed, max_turns=6):
    """Play and store one dialogue the way the dialogue rollout does; never raises."""
    agent = SentientAgent(profile, backend, seed=seed)
    fp = agent.fingerprint()
    did = start_dialogue(store, persona_id=profile.id, source="rollout", simulator_fingerprint=fp,
                         fingerprint_hash=agent.fingerprint_hash(), seed=seed)
    turn = await agent.opening()
    history, index = [{"role": "user", "content": turn.text}], 0
    add_turn(store, did, index, "user", turn.text, emotion=turn.emotion, error=turn.error)
    for k in range(max_turns):
        if turn.done:
            break
        reply = REPLIES[(seed + k) % len(REPLIES)]
        index += 1
        add_turn(store, did, index, "assistant", reply)
        turn = await agent.respond(history, reply)
        index += 1
        add_turn(store, did, index, "user", turn.text, emotion=turn.emotion, delta=turn.delta, inner=turn.inner,
                 n_tokens=turn.n_tokens, latency_s=turn.latency_s, error=turn.error)
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": turn.text}]
    status = "failed" if turn.outcome == "error" else "finished"
    finish_dialogue(store, did, status, turn.emotion, outcome=turn.outcome or "max_turns", error=turn.error)
    return did


def test_completion_records_latency_and_tokens():
    with start_server(latency_s=0.05) as server:
        backend = backend_for(server)
        comp = asyncio.run(backend.complete([{"role": "user", "content": "hello"}]))
        assert comp.text and comp.n_tokens > 0 and comp.latency_s >= 0.05 and comp.attempts == 1
        # a second event loop gets its own client (no "event loop is closed")
        assert asyncio.run(backend.complete([{"role": "user", "content": "again"}])).text
        assert server.calls == 2


def test_thirty_percent_faults_every_dialogue_ends_with_its_reason(store):
    profile = make_sim_profile()
    with start_server(fault_rate=0.3, seed=7, hang_s=3.0) as server:
        backend = backend_for(server, max_retries=1, timeout=1.0)

        async def all_dialogues():
            return await asyncio.gather(*[run_dialogue(store, profile, backend, seed) for seed in range(16)])

        ids = asyncio.run(all_dialogues())
        assert set(server.injected) == set(FAULTS)  # every kind of fault happened
    dialogues = [load_dialogue(store, i) for i in ids]
    assert all(d["status"] in ("finished", "failed") for d in dialogues)
    failed = [d for d in dialogues if d["status"] == "failed"]
    finished = [d for d in dialogues if d["status"] == "finished"]
    assert failed and finished
    for d in failed:
        assert d["outcome"] == "error" and d["error"]
        assert d["turns"][-1]["error"] == d["error"]
        assert any(w in d["error"] for w in ("timed out", "HTTP 429", "HTTP 500", "unreadable", "cannot connect"))
    for d in finished:
        assert d["outcome"] in ("success", "failure", "goodbye", "max_turns") and not d["error"]
        assert all(t["inner"].get("raw_change") is not None for t in d["turns"][2::2])
    assert all(d["fingerprint_hash"] == dialogues[0]["fingerprint_hash"] for d in dialogues)


def test_retries_recover_from_transient_errors():
    with start_server(fault_rate=0.5, seed=3, faults=("429", "500", "malformed")) as server:
        backend = backend_for(server, max_retries=8)

        async def many():
            return await asyncio.gather(*[backend.complete([{"role": "user", "content": f"hi {i}"}]) for i in range(10)])

        comps = asyncio.run(many())
        assert all(c.text for c in comps) and any(c.attempts > 1 for c in comps)
        assert server.calls == sum(c.attempts for c in comps)


def test_retries_are_bounded():
    with start_server(fault_rate=1.0, faults=("500",)) as server:
        backend = backend_for(server, max_retries=3)
        with pytest.raises(BackendError, match=r"HTTP 500 \(gave up after 4 attempts; last status: HTTP 500\)"):
            asyncio.run(backend.complete([{"role": "user", "content": "x"}]))
        assert server.calls == 4


def test_unparseable_output_is_repaired_then_recorded_as_error():
    profile = make_sim_profile()
    with start_server(fault_rate=1.0, faults=("wrong_format",)) as server:
        agent = SentientAgent(profile, backend_for(server), max_repairs=2, pack="v1")  # v1 sends repair prompts
        turn = asyncio.run(agent.respond([{"role": "user", "content": profile.first_line}], REPLIES[0]))
        assert turn.outcome == "error" and turn.done and "unreadable simulator output after 3 attempts" in turn.error
        assert server.calls == 3
        repair = server.requests[-1]["messages"]
        assert repair[-2]["role"] == "assistant" and "could not be read" in repair[-1]["content"]


def test_wrong_key_is_not_retried():
    with start_server(api_key="right-key") as server:
        agent = SentientAgent(make_sim_profile(), backend_for(server, api_key="wrong-key"))
        turn = asyncio.run(agent.respond([], REPLIES[0]))
        assert turn.outcome == "error" and "rejected the API key (HTTP 401)" in turn.error
        assert "wrong-key" not in turn.error and server.calls == 1


def test_unknown_model_is_reported():
    with start_server(models=["sim-model"]) as server:
        agent = SentientAgent(make_sim_profile(), backend_for(server, spec="openai:no-such-model"))
        turn = asyncio.run(agent.respond([], REPLIES[0]))
        assert turn.outcome == "error" and "does not know model 'no-such-model'" in turn.error
        assert server.calls == 1


def test_refused_connection_is_reported():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = make_backend("openai:m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=1,
                           backoff_s=0.01)
    turn = asyncio.run(SentientAgent(make_sim_profile(), backend).respond([], REPLIES[0]))
    assert turn.outcome == "error" and f"cannot connect to the simulator endpoint http://127.0.0.1:{port}/v1" in turn.error


def test_concurrency_limit():
    with start_server(latency_s=0.1) as server:
        backend = backend_for(server, max_in_flight=3)

        async def many():
            await asyncio.gather(*[backend.complete([{"role": "user", "content": str(i)}]) for i in range(9)])

        asyncio.run(many())
        assert server.max_in_flight == 3 and server.calls == 9


def test_fingerprint_has_host_not_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-env")
    backend = make_backend("openai:deepseek-chat", base_url="https://user:pw@api.deepseek.com/v1", temperature=0.3)
    fp = SentientAgent(make_sim_profile(), backend).fingerprint()
    assert fp["endpoint"] == "api.deepseek.com" and fp["model"] == "deepseek-chat"
    assert fp["sampling"] == {"temperature": 0.3, "top_p": 1.0, "max_tokens": 1024}
    assert "secret" not in repr(fp) and "pw" not in repr(fp)


def test_bad_specs():
    with pytest.raises(ValueError, match="unknown simulator backend 'gpt'"):
        make_backend("gpt")
    with pytest.raises(ValueError, match="no model given"):
        make_backend("openai:")
    with pytest.raises(ValueError, match="unknown option"):
        make_backend("openai:m", colour="blue")


def test_one_backend_shared_by_event_loops_in_threads():
    from concurrent.futures import ThreadPoolExecutor

    with start_server(latency_s=0.02) as server:
        backend = backend_for(server)

        def use(i):
            async def go():
                comps = [await backend.complete([{"role": "user", "content": f"{i}-{k}"}]) for k in range(3)]
                await backend.aclose()
                return comps
            return asyncio.run(go())

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(use, range(4)))
        assert all(c.text for comps in results for c in comps) and server.calls == 12


def test_context_overflow_is_a_clear_per_dialogue_error_naming_the_limit():
    profile = make_sim_profile()
    with start_server(context_tokens=300) as server:
        agent = SentientAgent(profile, backend_for(server))
        turn = asyncio.run(agent.respond([{"role": "user", "content": profile.first_line}], REPLIES[0]))
    assert turn.outcome == "error" and turn.done
    assert "does not fit the context" in turn.error and "its limit is 300 tokens" in turn.error
    assert server.calls == 1  # not retried: the same prompt cannot fit the next time either
