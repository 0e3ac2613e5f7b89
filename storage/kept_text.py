"""Text columns that keep every code point on every backend (docs/store.md#every-character-kept).

PostgreSQL's text cannot hold NUL (chr(0)), and neither driver can encode a lone surrogate (U+D800..U+DFFF, e.g.
from a JSON import's "\\ud800") to UTF-8. So the store's text and string columns escape those characters, the
same way on SQLite and PostgreSQL, with the noncharacter U+FFFF (Unicode keeps it for a program's internal use):

    chr(0)            -> U+FFFF "0"
    U+FFFF itself     -> U+FFFF "f"
    a lone surrogate  -> U+FFFF "u" and its 4 lowercase hex digits

and read it back exactly. Only values holding one of these characters change; any other text is stored as is.
Comparisons and LIKE patterns on a column escape their own value the same way, so they match the stored form.
JSON columns need nothing: their serialised form writes these characters as \\u escapes (ASCII).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from sqlalchemy import String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

ESCAPE = "\uffff"
_TO_ESCAPE = re.compile("[\x00\uffff\ud800-\udfff]")
_ESCAPED = re.compile("\uffff(?:(0)|(f)|u([0-9a-f]{4}))")


def _escape_one(match: re.Match) -> str:
    char = match.group(0)
    if char == "\x00":
        return ESCAPE + "0"
    if char == ESCAPE:
        return ESCAPE + "f"
    return f"{ESCAPE}u{ord(char):04x}"


def _unescape_one(match: re.Match) -> str:
    nul, escape, surrogate = match.groups()
    if nul:
        return "\x00"
    if escape:
        return ESCAPE
    return chr(int(surrogate, 16))


def escape_text(value: str) -> str:
    """`value` as the store keeps it (unchanged unless it holds NUL, U+FFFF or a lone surrogate)."""
    return _TO_ESCAPE.sub(_escape_one, value)


def unescape_text(stored: str) -> str:
    """The text `escape_text` was given. An U+FFFF not followed by a code is kept as is."""
    return _ESCAPED.sub(_unescape_one, stored) if ESCAPE in stored else stored


class KeptText(TypeDecorator):
    """TEXT that stores and reads back any Python str (see the module's docstring)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Optional[Any], dialect: Dialect) -> Optional[Any]:
        return escape_text(value) if isinstance(value, str) else value

    def process_result_value(self, value: Optional[Any], dialect: Dialect) -> Optional[Any]:
        return unescape_text(value) if isinstance(value, str) else value


class KeptString(KeptText):
    """VARCHAR(n) that stores and reads back any Python str. An escaped character takes 2 (NUL, U+FFFF) or 6 (a
    lone surrogate) of the column's n characters."""

    impl = String
    cache_ok = True
