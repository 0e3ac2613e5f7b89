"""The LLM layer under the simulated user, the judge and persona generation: one template filler and one
ask -> parse -> repair loop, driven against a real OpenAI-compatible HTTP server."""
from __future__ import annotations

import asyncio
import json

import pytest

from simulator.llm.prompting import fill
from simulator.llm.structured import ask_structured
from simulator.user.backends import BackendError, make_backend
from testkit.scripted_server import ScriptedServer


def test_fill_replaces_the_given_names_once_and_leaves_other_braces():
    template = "Persona: {persona}\nDialogue: {dialogue}\nJSON: {\"a\": 1} {unknown}"
    out = fill(template, {"persona": "writes '{dialogue}' in her diary", "dialogue": "hi"})
    assert out == "Persona: writes '{dialogue}' in her diary\nDialogue: hi\nJSON: {\"a\": 1} {unknown}"
    assert fill("{{slot}} {slot}", {"slot": "x"}, braces=2) == "x {slot}"
    assert fill("{n}", {"n": 3}) == "3" and fill("{n}", {}) == "{n}"


def _backend(srv: ScriptedServer):
    return make_backend("openai:scripted", base_url=srv.base_url, api_key="unused", max_retries=0)


def test_a_repair_is_sent_with_the_answer_and_the_problem_then_parsed():
    """The scripted server's policy answers are plain text: the first parse fails, the repair carries the
    answer and the problem, the second answer parses."""
    seen: list[str] = []

    def parse(text: str) -> str:
        seen.append(text)
        if len(seen) == 1:
            raise ValueError("no JSON object")
        return text.upper()

    with ScriptedServer().start() as srv:
        answer = asyncio.run(ask_structured(
            _backend(srv), [{"role": "user", "content": "Say something kind."}], parse,
            repair=lambda text, problem: [{"role": "assistant", "content": text},
                                          {"role": "user", "content": f"That was unreadable: {problem}"}]))
        second = srv.requests[-1]["messages"]
    assert answer.ok and answer.attempts == 2 and answer.value == seen[1].upper() and answer.n_tokens > 0
    assert second[-2] == {"role": "assistant", "content": seen[0]}
    assert second[-1]["content"] == "That was unreadable: no JSON object"


def test_an_answer_that_never_parses_stop_cancel_and_a_failed_call():
    def never(_text: str) -> str:
        raise ValueError("still not it")

    with ScriptedServer().start() as srv:
        backend = _backend(srv)
        msgs = [{"role": "user", "content": "hello"}]
        failed = asyncio.run(ask_structured(backend, msgs, never, attempts=3))  # no repair: the same prompt
        assert not failed.ok and failed.attempts == 3 and failed.problem == "still not it"
        assert [json.dumps(r["messages"]) for r in srv.requests[-3:]] == [json.dumps(msgs)] * 3
        stopped = asyncio.run(ask_structured(backend, msgs, never, stop=lambda t: "declined" if t else ""))
        assert stopped.stopped == "declined" and stopped.attempts == 1 and not stopped.problem
        cancelled = asyncio.run(ask_structured(backend, msgs, never, cancelled=lambda: True))
        assert cancelled.stopped == "cancelled" and cancelled.attempts == 0
        url = srv.base_url
    # the server is gone: the call fails, kept when it is one of call_errors, raised otherwise
    dead = make_backend("openai:scripted", base_url=url, api_key="unused", max_retries=0, timeout=5)
    kept = asyncio.run(ask_structured(dead, msgs, never, call_errors=(BackendError,)))
    assert isinstance(kept.call_error, BackendError) and kept.attempts == 0
    with pytest.raises(BackendError):
        asyncio.run(ask_structured(dead, msgs, never))
