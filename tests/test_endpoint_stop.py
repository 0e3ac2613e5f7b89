"""A client stops calling an endpoint after a few auth or connection failures in a row (simulator.llm.traffic):
a persona generation against a real local server that answers 401 to every request sends a handful of
requests, not one per persona, and ends failed naming the cause; a dialogue client does the same."""
from __future__ import annotations

import asyncio
import socket

import pytest

from simulator.access import Access
from simulator.llm.openai_client import OpenAIBackend
from simulator.llm.traffic import STOP_AFTER, EndpointStopped
from simulator.personas import generation_store
from simulator.personas import store as persona_store
from simulator.personas.generation import spec_from_dict
from testkit.visitor import RecordingServer

HELLO = [{"role": "user", "content": "hello"}]


@pytest.mark.model  # the generation's duplicate pool embeds the stored personas (MiniLM)
def test_a_generation_on_a_refused_key_stops_within_a_few_requests_and_fails(db_url):
    store = persona_store.open_store(db_url)
    in_flight = 2
    with RecordingServer(status=401, error="Incorrect API key provided") as server:
        gen = generation_store.make_generator(server.base_url, "m", max_in_flight=in_flight)
        gid = generation_store.run_generation(store, spec_from_dict({"count": 40, "seed": 0}), gen)
    g = generation_store.get_generation(store, gid)
    assert g["status"] == "failed", g
    assert "rejected the API key (HTTP 401)" in g["error"] and "in a row failed (auth)" in g["error"], g["error"]
    assert STOP_AFTER <= len(server.requests) <= STOP_AFTER + in_flight, len(server.requests)


def test_a_dialogue_client_stops_calling_a_dead_endpoint():
    with socket.socket() as s:  # a port nobody listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    backend = OpenAIBackend("m", base_url=dead, access=Access(), max_retries=1, backoff_s=0.01, max_backoff_s=0.01)
    with pytest.raises(EndpointStopped, match=r"cannot connect .*not called for 60s"):
        for _ in range(STOP_AFTER + 1):
            try:
                asyncio.run(backend.complete(HELLO))
            except EndpointStopped:
                raise
            except Exception:
                pass
    with RecordingServer() as fine:  # another endpoint is not touched by it
        assert asyncio.run(OpenAIBackend("m", base_url=fine.base_url, access=Access()).complete(HELLO)).text
