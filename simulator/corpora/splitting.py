"""A corpus file cut into its conversations in one pass: time linear in the file's size, each record read
through the bounded decoder every import uses (simulator.personas.bounds), so a 200,000-deep record is
refused in one line like any other out-of-bounds record, never a RecursionError.

    for where, record in split_records(text, "esconv"): ...   # record: the parsed JSON, or the ValueError

`where` is "conversation N (line L)" in a JSON array (ESConv's release), "line L" in JSONL. Line numbers are
counted from the previous record on, never from the file's start. A record of a JSON array that is not JSON
ends the reading there (nothing after it can be found): its error says so, and says when the file ends inside
it (a truncated download), so the complete conversations before it can still be kept.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

from simulator.personas.bounds import OutOfBounds, decode_bounded, loads_line

_SEPARATORS = re.compile(r"[ \t\r\n,]*")
_WHITESPACE = re.compile(r"[ \t\r\n]*")


def split_records(text: str, fmt: str) -> Iterator[tuple[str, Any]]:
    """(where, parsed record or the ValueError to report) per conversation, in the file's order."""
    first = _WHITESPACE.match(text).end()
    if fmt == "esconv" and text.startswith("[", first):
        yield from _array_records(text, first + 1)
    else:
        yield from _line_records(text)


def _array_records(text: str, pos: int) -> Iterator[tuple[str, Any]]:
    line, counted, n = 1, 0, 0
    while True:
        pos = _SEPARATORS.match(text, pos).end()
        line += text.count("\n", counted, pos)
        counted = pos
        if pos >= len(text):
            yield f"line {line}", ValueError(f"line {line}: the JSON array is not closed: the file ends after "
                                             f"conversation {n} (truncated?)")
            return
        if text[pos] == "]":
            return
        n += 1
        where = f"conversation {n} (line {line})"
        try:
            record, pos = decode_bounded(text, pos)
        except json.JSONDecodeError as exc:
            rest = ("the file ends inside it (truncated?)" if _WHITESPACE.match(text, exc.pos).end() >= len(text)
                    else "the conversations after it cannot be read")
            yield where, ValueError(f"{where}: json: malformed JSON: {exc.msg} (line {exc.lineno}); {rest}")
            return
        except OutOfBounds as exc:
            yield where, ValueError(f"{where}: {exc}")
            if exc.end is None:  # too deep to find its end: nothing after it can be read
                return
            pos = exc.end
            continue
        yield where, record


def _line_records(text: str) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        record, problem = loads_line(line.removesuffix("\r"))
        yield f"line {number}", record if problem is None else ValueError(f"line {number}: {': '.join(problem)}")
