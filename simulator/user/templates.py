"""Versioned prompt templates of the Sentient Agent (one folder per version, one per language).

Each step file has a system part and a user part separated by a line `=== user ===`. Placeholders are
`{name}`; only known names are replaced, so braces elsewhere in profile text are safe. `strings.txt` holds
short phrases (key=value). `prompt_hash(version)` covers every file of the version: it goes into the
simulator fingerprint, so any wording change is visible in stored results.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
DEFAULT_VERSION = "v1"
STEPS = ("persona", "emotion", "reply", "opening", "repair")
USER_SPLIT = "=== user ==="


@lru_cache(maxsize=16)
def load_templates(language: str, version: str = DEFAULT_VERSION) -> dict[str, str]:
    """Step name -> template text, plus 'strings' parsed into 'str:<key>' entries."""
    folder = PROMPTS_DIR / version / language
    if not folder.is_dir():
        known = sorted(p.name for p in (PROMPTS_DIR / version).iterdir()) if (PROMPTS_DIR / version).is_dir() else []
        raise ValueError(f"no prompt templates for language {language!r} in version {version!r}; "
                         f"available: {', '.join(known) or 'none'}")
    out = {step: (folder / f"{step}.txt").read_text(encoding="utf-8") for step in STEPS}
    for line in (folder / "strings.txt").read_text(encoding="utf-8").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out["str:" + key.strip()] = value.strip()
    return out


def split_messages(text: str) -> list[dict[str, str]]:
    """A rendered step template -> [system, user] chat messages."""
    system, _, user = text.partition(USER_SPLIT)
    msgs = [{"role": "system", "content": system.strip()}]
    if user.strip():
        msgs.append({"role": "user", "content": user.strip()})
    return msgs


@lru_cache(maxsize=8)
def prompt_hash(version: str = DEFAULT_VERSION) -> str:
    """sha256 (16 hex) over every template file of the version, in path order."""
    h = hashlib.sha256()
    for path in sorted((PROMPTS_DIR / version).rglob("*.txt")):
        h.update(str(path.relative_to(PROMPTS_DIR / version)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
