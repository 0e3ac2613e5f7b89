"""A URL a web visitor types (--allow-free-urls) gets nothing of the owner's configuration: real clients
against real listeners on 127.0.0.1, with canaries in every OPENAI_* variable the OpenAI library reads itself;
and what such a URL answers to a failed request is not put on the lab's page (the owner's endpoints' is)."""
from __future__ import annotations

import asyncio

import pytest

from simulator.access import Access
from simulator.llm.client import BackendError
from simulator.llm.openai_client import VISITOR_HEADERS, OpenAIBackend
from testkit.visitor import RecordingServer
from trainer.policies.base import SamplingConfig
from trainer.policies.openai_engine import OpenAIEngine

CANARIES = {"OPENAI_ORG_ID": "org-canary-3391", "OPENAI_PROJECT_ID": "proj-canary-8812",
            "OPENAI_API_KEY": "sk-canary-owner-77", "OPENAI_WEBHOOK_SECRET": "whsec-canary-51",
            "OPENAI_CUSTOM_HEADERS": "X-Canary-Header: custom-canary-4410"}
HELLO = [{"role": "user", "content": "hello"}]


def _ask_both(url: str, access: Access) -> None:
    asyncio.run(OpenAIBackend("m", base_url=url, access=access, max_retries=0).complete(HELLO))
    OpenAIEngine("m", base_url=url, access=access, max_retries=0).generate([HELLO], SamplingConfig(max_new_tokens=8))


def test_a_visitors_url_gets_no_ambient_configuration(monkeypatch):
    with RecordingServer() as owner, RecordingServer() as theirs:
        for name, value in CANARIES.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("OPENAI_BASE_URL", owner.base_url)  # the owner's `default` endpoint
        web = Access.web(logged_in=False, free_urls=True)
        _ask_both(theirs.base_url, web)
        _ask_both("default", web)
    assert len(theirs.requests) == 2 and len(owner.requests) == 2
    seen = theirs.everything()
    for canary in [*CANARIES.values(), owner.base_url]:
        assert canary not in seen, canary
    for request in theirs.requests:
        assert set(request["headers"]) <= VISITOR_HEADERS, request["headers"]  # no key, ids or custom headers
    for request in owner.requests:  # the owner's endpoint keeps the library's reading of the owner's settings
        assert request["headers"]["openai-organization"] == CANARIES["OPENAI_ORG_ID"]
        assert request["headers"]["authorization"] == f"Bearer {CANARIES['OPENAI_API_KEY']}"


def test_a_visitors_url_error_text_is_not_shown_the_owners_is(monkeypatch):
    with RecordingServer(status=400, error="VISITOR-TEXT <img src=x>") as theirs, \
            RecordingServer(status=400, error="owner says: bad request") as owner:
        monkeypatch.setenv("OPENAI_BASE_URL", owner.base_url)
        web = Access.web(logged_in=False, free_urls=True)
        for url, shown in ((theirs.base_url, "its answer is not shown"), ("default", "owner says: bad request")):
            with pytest.raises(BackendError) as simulator_side:
                asyncio.run(OpenAIBackend("m", base_url=url, access=web, max_retries=0).complete(HELLO))
            [reply] = OpenAIEngine("m", base_url=url, access=web, max_retries=0).generate([HELLO], SamplingConfig())
            for text in (str(simulator_side.value), reply.error):
                assert shown in text and "VISITOR-TEXT" not in text, text
