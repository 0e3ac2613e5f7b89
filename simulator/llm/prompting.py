"""Filling prompt templates: one way for every prompt the lab sends.

`fill` replaces the placeholders of the given names only, in one pass, so text inserted for one
placeholder (a persona that happens to contain "{dialogue}") is never scanned again, and any other brace
in a template stays as written. Templates use `{name}`; the lab's own pack uses `{{name}}` (braces=2).
"""
from __future__ import annotations

import re
from typing import Any, Mapping


def fill(template: str, values: Mapping[str, Any], braces: int = 1) -> str:
    """`template` with `{name}` (or `{{name}}` for braces=2) replaced by str(values[name]) for each given name."""
    if not values:
        return template
    names = "|".join(re.escape(k) for k in sorted(values, key=len, reverse=True))
    pattern = re.compile(re.escape("{" * braces) + f"({names})" + re.escape("}" * braces))
    return pattern.sub(lambda m: str(values[m.group(1)]), template)
