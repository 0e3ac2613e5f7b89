"""One structured LLM call: ask, parse the answer, and on an unreadable answer ask again (a repair).

The simulated user (each emotion and reply step), the social-cognition judge and persona generation all
ask a chat backend for an answer of a set shape. The loop is the same for the three and lives here:

    for attempt in 1..attempts:
        text = backend.complete(messages)             # response_format when the caller asks for JSON
        if stop(text): return                          # e.g. the judge's refusal: no repair can help
        try: return parse(text)
        except parse error as problem:
            messages += repair(text, problem)          # the answer and what is wrong with it; None asks the
                                                       # same prompt again (SAGE's own way)

What each caller does with an answer that never parsed (raise, or record the error) stays with the caller.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

Messages = list[dict[str, str]]


class AnswerParseError(ValueError):
    """An answer is not of the asked shape; the message says what is wrong (sent back in the repair)."""


def json_object(text: str) -> Any:
    """The first JSON object in the text: the whole answer, a ``` fenced block, or the outermost {...}."""
    candidates = [text.strip()]
    candidates += re.findall(r"```(?:json)?\s*(.*?)```", text, re.S)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except ValueError:
            continue
    raise AnswerParseError("no JSON object found in the answer")


@dataclass
class StructuredAnswer:
    value: Any = None  # the parsed answer; None when no answer parsed
    text: str = ""  # the last answer as the model wrote it
    attempts: int = 0  # calls made
    n_tokens: int = 0
    latency_s: float = 0.0
    problem: str = ""  # why the last answer did not parse ('' once one did)
    stopped: str = ""  # why the loop ended early: what stop() said, "cancelled", or the failed call's error
    call_error: Optional[BaseException] = None  # a call that failed with one of `call_errors`

    @property
    def ok(self) -> bool:
        return not self.problem and not self.stopped and self.attempts > 0


async def ask_structured(backend: Any, messages: Messages, parse: Callable[[str], Any], *, attempts: int = 2,
                         repair: Optional[Callable[[str, str], Optional[Messages]]] = None,
                         response_format: Optional[dict] = None, parse_errors: Sequence[type] = (ValueError,),
                         call_errors: Sequence[type] = (), stop: Optional[Callable[[str], str]] = None,
                         cancelled: Optional[Callable[[], bool]] = None) -> StructuredAnswer:
    """Ask `backend` (its `complete(messages[, response_format])`) until `parse` reads an answer, at most
    `attempts` calls. `repair(answer, problem)` gives the messages appended before the next call (None: the
    same prompt again). `stop(answer)` returning a reason ends the loop without parsing. A call raising one
    of `call_errors` ends it with the error kept; other errors propagate. `cancelled()` is checked before
    every call."""
    answer = StructuredAnswer()
    for attempt in range(1, attempts + 1):
        if cancelled is not None and cancelled():
            answer.stopped = "cancelled"
            return answer
        try:
            completion = await (backend.complete(messages, response_format=response_format)
                                if response_format is not None else backend.complete(messages))
        except tuple(call_errors) as exc:
            answer.stopped, answer.call_error = str(exc), exc
            return answer
        answer.attempts, answer.text = attempt, completion.text
        answer.n_tokens += completion.n_tokens
        answer.latency_s += getattr(completion, "latency_s", 0.0)
        if stop is not None and (reason := stop(completion.text)):
            answer.stopped = reason
            return answer
        try:
            answer.value, answer.problem = parse(completion.text), ""
            return answer
        except tuple(parse_errors) as exc:
            answer.problem = str(exc)
            follow_up = repair(completion.text, answer.problem) if repair is not None else None
            if follow_up:
                messages = messages + follow_up
    return answer
