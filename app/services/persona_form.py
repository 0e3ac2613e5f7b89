"""The persona form as plain data: its fields in display order, and Profile <-> form values (no widgets)."""
from __future__ import annotations

import re
from typing import Any, Optional

from simulator.personas.profile import NEED_CATEGORIES, PERSONALITIES, Profile

# Form fields in display order: (field, label, kind, lines)
FORM = [("id", "Id", "text", 1), ("name", "Name", "text", 1), ("language", "Language", "lang", 1),
        ("difficulty", "Difficulty", "difficulty", 1), ("need_category", "Hidden-need category", "need", 1),
        ("personality", "Personality type", "personality", 1), ("traits", "Traits (comma separated, at most 3)", "text", 1),
        ("persona", "Persona: who they are, how they speak", "text", 4),
        ("background", "Background: what happened; reactions to replies that fit or miss the need", "text", 6),
        ("hidden_need", "Hidden need (never said outright)", "text", 2),
        ("explicit_goal", "Explicit goal (empty: the default heart-to-heart goal)", "text", 2),
        ("first_line", "First line (empty: generated)", "text", 2)]
FIELDS = [f for f, *_ in FORM]
NEED_CHOICES = [(f"{label} ({key})", key) for key, (label, _zh) in NEED_CATEGORIES.items()]
PERSONALITY_CHOICES = [(key, key) for key in PERSONALITIES]


def split_traits(value: str) -> list[str]:
    return [t.strip() for t in re.split(r"[,，;\n]", value or "") if t.strip()]


def form_profile(values: dict[str, Any], original: Optional[Profile]) -> Profile:
    """The Profile the form describes; keeps what the form does not show (source, extra) from the original."""
    data = {f: (values.get(f) or "") for f in FIELDS}
    data["traits"] = split_traits(data["traits"])
    data["source"] = original.source if original else "user"
    data["extra"] = dict(original.extra) if original else {}
    return Profile.from_dict(data)


def form_values(p: Optional[Profile]) -> list:
    """The form's values for a profile (its defaults for None), in FORM order."""
    if p is None:
        return ["", "", "en", "standard", None, None, "", "", "", "", "", ""]
    return [p.id, p.name, p.language, p.difficulty, p.need_category or None, p.personality or None,
            ", ".join(p.traits), p.persona, p.background, p.hidden_need, p.explicit_goal, p.first_line]


def early_problems(values: dict[str, Any], fields: tuple[str, ...] = ("id", "name")) -> dict[str, str]:
    """The problems of `fields` as the form stands (the import's rules: Profile.errors), shown under each field
    as soon as it is left, before any Save; an empty field is not yet a problem here (Save says it is required)."""
    data = {f: (values.get(f) or "") for f in FIELDS}
    data["traits"] = split_traits(data["traits"])
    errors = Profile.from_dict(data).errors()
    return {f: errors[f] for f in fields if f in errors and str(values.get(f) or "").strip()}
