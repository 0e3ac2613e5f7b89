"""Small helpers shared by test modules (import as `from helpers import ...`; tests/ is on sys.path)."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(cond: Callable[[], Any], timeout: float = 60.0, every: float = 0.1) -> Any:
    """Poll `cond` until it returns something truthy (returned) or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not reached in time")


async def play_dialogue(agent: Any, replies: list[str]) -> list[Any]:
    """The agent's opening, then one user turn per policy reply until the dialogue ends: [opening, *turns]."""
    first = await agent.opening()
    history, turns = [{"role": "user", "content": first.text}], [first]
    for reply in replies:
        turn = await agent.respond(history, reply)
        turns.append(turn)
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": turn.text}]
        if turn.done:
            break
    return turns


def wait_for_http(base: str, proc: Any, log: Any, tries: int = 240) -> None:
    """Wait until a server process answers GET `base`/ (any status); it must not exit meanwhile (its log
    file `log` is shown if it does)."""
    import httpx

    for _ in range(tries):
        try:
            httpx.get(base + "/", timeout=2)
            return
        except httpx.TransportError:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.5)
    raise AssertionError(f"{base} did not answer")
