"""Bounds on the JSON a record may hold, and the JSON decoder every import reads through: it never raises on
hostile input except to name the bound a record breaks.

Every imported line (profiles, SAGE transcripts) and every stored profile stays inside these bounds, so
nothing that passes an import can later break an export, a listing, a view or a rollout:

- nesting: a line at most MAX_LINE_DEPTH levels deep (the line's own object is level 1); a profile's
  `extra` at most MAX_EXTRA_DEPTH levels (the `extra` object itself is level 1);
- numbers: integers within ±MAX_INT (2**53 - 1, exact in every JSON reader), floats finite
  (NaN / Infinity are not JSON);
- text: valid Unicode (no lone surrogate escapes such as "\\ud800"); object keys are text;
- size: a profile's `extra` at most MAX_EXTRA_CHARS characters of text (keys and values summed).

Problems are reported with a bounded quote of the bad value (`quote`), never the whole value.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Iterator, Optional

MAX_LINE_DEPTH = 24
MAX_EXTRA_DEPTH = 16
MAX_EXTRA_CHARS = 200_000
MAX_INT = 2**53 - 1
QUOTE_CHARS = 60
_INT_DIGITS = len(str(MAX_INT))


class _Rejected:
    """Stands in for a number the parser refused, so the walk can name the field it sits in."""

    def __init__(self, problem: str):
        self.problem = problem


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """repr() of `value` cut to about `limit` characters (a 10 MB value gives a short quote)."""
    if isinstance(value, str):
        text = repr(value[:limit + 1])
    elif isinstance(value, (list, dict)):
        text = f"<{type(value).__name__} of {len(value)}>"
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        text = f"<int of {value.bit_length()} bits>"  # repr of a huge int is slow, or refused
    else:
        text = repr(value)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(value) if isinstance(value, str) else len(text)} chars)"
    return text


class OutOfBounds(ValueError):
    """A JSON value outside the bounds: `field` is the top-level key holding the problem ("json" when none)."""

    def __init__(self, field: str, problem: str, end: Optional[int] = None):
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem
        self.end = end  # where the value ends, when it could be read (a reader may go on after it)


def decode_bounded(text: str, start: int = 0) -> tuple[Any, int]:
    """The JSON value that begins at `start` of `text` and the index just past it, held to the bounds: nesting
    beyond MAX_LINE_DEPTH, out-of-range numbers, NaN / Infinity and lone surrogates raise OutOfBounds (never
    RecursionError, however deep); malformed JSON raises json.JSONDecodeError. Every import reads its records
    through this (a JSONL line by loads_line, a record of a JSON array where it starts)."""
    rejected: list[_Rejected] = []

    def reject(problem: str) -> _Rejected:
        rejected.append(_Rejected(problem))
        return rejected[-1]

    def parse_int(text: str) -> Any:
        digits = text.lstrip("-")
        if len(digits) > _INT_DIGITS or abs(int(text)) > MAX_INT:
            return reject(f"integer of {len(digits)} digits is out of range (at most ±{MAX_INT})")
        return int(text)

    def parse_float(text: str) -> Any:
        value = float(text)
        return value if math.isfinite(value) else reject(f"number {quote(text, 30)} overflows to infinity")

    decoder = json.JSONDecoder(parse_int=parse_int, parse_float=parse_float,
                               parse_constant=lambda name: reject(f"{name} is not standard JSON"))
    try:
        value, end = decoder.raw_decode(text, start)
    except RecursionError:
        key = _key_at_depth(text[start:], MAX_LINE_DEPTH)
        raise OutOfBounds(key or "json", f"nested more than {MAX_LINE_DEPTH} levels deep") from None
    # The walk is needed only when a number was refused, a surrogate escape or deep nesting is possible.
    if rejected or _SURROGATE_ESCAPE.search(text, start, end) or \
            text.count("[", start, end) + text.count("{", start, end) > MAX_LINE_DEPTH:
        for key, problem in problems(value, MAX_LINE_DEPTH, limit=1):
            raise OutOfBounds(field_name(key) if key is not None else "json", problem, end)
    return value, end


def loads_line(text: str) -> tuple[Optional[Any], Optional[tuple[str, str]]]:
    """json.loads for one line, held to the bounds (decode_bounded): (value, None), or (None, (field,
    problem)) for malformed JSON or a value outside the bounds. `field` is the top-level key holding the
    problem ("json" when there is none)."""
    try:
        value, end = decode_bounded(text, _WHITESPACE.match(text, 0).end())
        if _WHITESPACE.match(text, end).end() != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    except json.JSONDecodeError as e:
        return None, ("json", f"malformed JSON: {e.msg} (column {e.colno})")
    except OutOfBounds as e:
        return None, (e.field, e.problem)
    return value, None


def field_name(key: str, limit: int = 40) -> str:
    """A key as a field name safe to print: at most `limit` characters, unprintables escaped."""
    short = key if len(key) <= limit else key[:limit] + "…"
    return short if short.isprintable() else repr(short)[1:-1]


def problems(value: Any, max_depth: int, max_chars: Optional[int] = None,
             limit: int = 5) -> Iterator[tuple[Optional[str], str]]:
    """(top-level key or None, problem) for every value outside the bounds (at most `limit`), walking
    iteratively so no depth can exhaust the stack. Depth counts containers: `value` itself is level 1."""
    found, chars = 0, 0
    stack: list[tuple[Any, Optional[str], int]] = [(value, None, 1)]
    while stack and found < limit:
        item, top, depth = stack.pop()
        problem = ""
        if isinstance(item, str):
            chars += len(item)
            if not valid_text(item):
                problem = "contains a lone surrogate (\\ud800-\\udfff): not valid Unicode text"
        elif isinstance(item, bool) or item is None:
            pass
        elif isinstance(item, int):
            if abs(item) > MAX_INT:
                problem = f"integer is out of range (at most ±{MAX_INT})"
        elif isinstance(item, float):
            if not math.isfinite(item):
                problem = f"{item!r} is not standard JSON"
        elif isinstance(item, (dict, list)):
            if depth > max_depth:
                problem = f"nested more than {max_depth} levels deep"
            elif isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(k, str) or not valid_text(k):
                        problem = f"key {quote(k, 30)} must be valid text"
                        break
                    chars += len(k)
                    stack.append((v, k if top is None else top, depth + 1))
            else:
                stack.extend((v, top, depth + 1) for v in item)
        elif isinstance(item, _Rejected):
            problem = item.problem
        else:
            problem = f"a {type(item).__name__} is not a JSON value"
        if not problem and max_chars is not None and chars > max_chars:
            problem, stack = f"holds more than {max_chars} characters of text", []
        if problem:
            found += 1
            yield top, problem


def valid_text(text: str) -> bool:
    """False when `text` holds a lone surrogate (it cannot be encoded, stored or exported)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?|[\[\]{}]', re.DOTALL)


def _key_at_depth(text: str, max_depth: int) -> str:
    """The top-level key under which `text` first nests deeper than max_depth ("" if none): a scan of
    strings and brackets only, for lines too deep for json.loads."""
    depth, key = 0, ""
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if token in "[{":
            depth += 1
            if depth > max_depth:
                return key
        elif token in "]}":
            depth -= 1
        elif m.group(1) and depth == 1:
            try:
                key = field_name(json.loads(token[:token.rindex('"') + 1]))
            except (ValueError, RecursionError):
                key = ""
    return ""
