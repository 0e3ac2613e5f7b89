"""Prompt files and templates: one way for every prompt the lab sends.

`load_prompt_file` reads a versioned prompt file (a system part, then `=== user ===` and `=== repair ===`
sections), the judge's and persona generation's alike.

`fill` replaces the placeholders of the given names only, in one pass, so text inserted for one
placeholder (a persona that happens to contain "{dialogue}") is never scanned again, and any other brace
in a template stays as written. Templates use `{name}`; the lab's own pack uses `{{name}}` (braces=2).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Mapping


def fill(template: str, values: Mapping[str, Any], braces: int = 1) -> str:
    """`template` with `{name}` (or `{{name}}` for braces=2) replaced by str(values[name]) for each given name."""
    if not values:
        return template
    names = "|".join(re.escape(k) for k in sorted(values, key=len, reverse=True))
    pattern = re.compile(re.escape("{" * braces) + f"({names})" + re.escape("}" * braces))
    return pattern.sub(lambda m: str(values[m.group(1)]), template)


def load_prompt_file(folder: Path, version: str, what: str = "prompt") -> dict[str, str]:
    """{'system', 'user', 'repair', 'sha256'} of prompt version `version` (the file VERSION.md in `folder`;
    sha256 of the whole file). `what` names the prompt in the error for an unknown version."""
    path = folder / f"{version}.md"
    if not re.fullmatch(r"[\w.-]+", version or "") or not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.md"))
        raise ValueError(f"{what} prompt version {version!r} not found; available: {', '.join(known)}")
    text = path.read_text(encoding="utf-8")
    system, _, rest = text.partition("\n=== user ===\n")
    user, _, repair = rest.partition("\n=== repair ===\n")
    if not user or not repair:
        raise ValueError(f"{path} must hold a system part, '=== user ===' and '=== repair ===' sections")
    return {"system": system.strip(), "user": user.strip(), "repair": repair.strip(),
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
