"""Profile: the simulated user (persona, background, explicit goal, hidden need) and its validation.

Import/export of the RLVER/SAGE JSONL format and of the lab's own JSONL live in simulator.personas.io.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Sequence

from simulator.llm.hashing import canonical_json, fingerprint_hash
from simulator.personas.bounds import MAX_EXTRA_CHARS, MAX_EXTRA_DEPTH, field_name, problems, quote, valid_text

# The 8 hidden-need categories of the released RLVER/SAGE data: key -> (English label, Chinese text).
NEED_CATEGORIES: dict[str, tuple[str, str]] = {
    "dialectical_analysis": ("Analyse the problem dialectically", "你希望对方辩证地分析事件中的问题"),
    "useful_advice": ("Give genuinely useful advice", "你想获得能真实帮助你解决当下困境的建议"),
    "explain_others": ("Explain why the other people acted as they did", "你想分析事件中其他人物这么做的原因"),
    "self_reflection": ("Guide self-reflection", "你希望对方引导你针对事件进行自我反思，收获自我成长"),
    "sincere_praise": ("Sincere praise of concrete actions", "你希望对方真诚地夸奖你在事件中的具体行为"),
    "just_listen": ("Just listen to the venting", "你希望对方用心倾听你的情绪宣泄"),
    "deep_empathy": ("Deep empathy rather than simple comfort", "你希望对方深刻共情你的感受，而不是简单的安慰"),
    "not_at_fault": ("Agree that I am not at fault", "你认为自己在事件中没有任何责任和错误，你想要对方也认同你没有错"),
}
# Personality types: key -> Chinese label used in the released data (main_cha).
PERSONALITIES: dict[str, str] = {"negative": "负面型", "passive": "被动型", "avoidant": "回避型"}
LANGUAGES = ("en", "zh")
DIFFICULTIES = ("standard", "challenging")
MAX_FIELD_CHARS = 20_000
MAX_NAME_CHARS = 120  # a name is shown in tables, headers and file names
ID_PATTERN = re.compile(r"\w[\w.:-]*")  # letters (any script), digits, _ . : - ; what the import and the form accept
TEXT_FIELDS = ("id", "name", "persona", "background", "hidden_need", "first_line", "explicit_goal", "source")
REQUIRED_TEXT = ("id", "name", "persona", "background", "hidden_need")
# what each required text holds, said with "is required" so the message tells what to write
REQUIRED_WORDS = {"id": "a short unique id, e.g. en-40-sam-lee", "name": "the simulated user's name",
                  "persona": "who they are, in a sentence or two", "background": "what has happened to them",
                  "hidden_need": "what they want from the talk without saying it"}
# Keys of `extra` the offline simulator reads: each must be a list of texts when present.
EXTRA_TEXT_LISTS = ("events", "fit_examples", "miss_examples")
DEFAULT_GOAL = {
    "en": "Have a heart-to-heart talk: confide in the other person through concrete events from your life.",
    "zh": "与对方进行一次走心的交谈：通过具体的生活事件向对方倾诉。",
}


class FieldErrors(ValueError):
    """Bad input, every problem named: `errors` maps field (or key) -> problem."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


class ProfileError(FieldErrors):
    """Validation failure: `errors` maps field name -> problem."""


@dataclass
class Profile:
    id: str
    name: str
    persona: str  # who they are: age, job, hobbies, habits, speaking style
    background: str  # what happened; reactions at high/medium/low emotion and to replies fitting/missing the need
    hidden_need: str  # the hidden intention, never revealed outright
    need_category: str  # one of NEED_CATEGORIES
    personality: str  # one of PERSONALITIES
    traits: list[str] = field(default_factory=list)  # three traits
    first_line: str = ""  # scripted opening message ("" -> generated)
    explicit_goal: str = ""  # "" -> DEFAULT_GOAL[language]
    language: str = "en"
    difficulty: str = "standard"
    source: str = "user"
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys kept from imports

    @property
    def goal(self) -> str:
        return self.explicit_goal or DEFAULT_GOAL.get(self.language, DEFAULT_GOAL["en"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Profile":
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        return cls(**known)

    def errors(self) -> dict[str, str]:
        """Field -> problem for every invalid field (empty when valid); see simulator.personas.bounds for the
        bounds on text and on `extra`."""
        errs: dict[str, str] = {}
        for name in TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                errs[name] = f"must be text, got {type(value).__name__}"
            elif name in REQUIRED_TEXT and not value.strip():
                errs[name] = f"is required: {REQUIRED_WORDS[name]}"
            elif len(value) > MAX_FIELD_CHARS:
                errs[name] = f"is {len(value)} characters; the limit is {MAX_FIELD_CHARS}"
            elif not valid_text(value):
                errs[name] = "contains a lone surrogate (\\ud800-\\udfff): not valid Unicode text"
        if isinstance(self.id, str) and len(self.id) > 64 and "id" not in errs:
            errs["id"] = "is longer than 64 characters"
        if isinstance(self.id, str) and "id" not in errs and not ID_PATTERN.fullmatch(self.id):
            errs["id"] = (f"may hold only letters, digits and - _ . : (no spaces), got {quote(self.id)}; "
                          "e.g. en-40-sam-lee")
        if isinstance(self.name, str) and len(self.name) > MAX_NAME_CHARS and "name" not in errs:
            errs["name"] = f"is {len(self.name)} characters; a name is at most {MAX_NAME_CHARS}"
        for name, label, allowed in (("need_category", "category", NEED_CATEGORIES),
                                     ("personality", "personality", PERSONALITIES),
                                     ("language", "language", LANGUAGES), ("difficulty", "difficulty", DIFFICULTIES)):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed:
                what = f"unknown {label} {quote(value)}" if isinstance(value, str) else \
                    f"must be text, got {type(value).__name__}"
                errs[name] = f"{what}; one of {', '.join(allowed)}"
        problem = _text_list_problem(self.traits, MAX_FIELD_CHARS)
        if problem:
            errs["traits"] = problem
        elif len(self.traits) > 3:
            errs["traits"] = f"has {len(self.traits)} traits; at most 3"
        if not isinstance(self.extra, dict):
            errs["extra"] = f"must be an object, got {type(self.extra).__name__}"
        else:
            errs.update(extra_errors(self.extra))
        return errs

    def validate(self) -> "Profile":
        errs = self.errors()
        if errs:
            raise ProfileError(errs)
        return self


def need_category_from_text(text: str) -> str:
    """Map a hidden-intention text (Chinese as released, or an English label) to its category key."""
    t = (text or "").strip().lstrip("*").strip()
    for key, (en, zh) in NEED_CATEGORIES.items():
        if t == zh or t.lower() == en.lower() or t == key:
            return key
    for key, (en, zh) in NEED_CATEGORIES.items():
        if zh in t or t in zh and t:
            return key
    return ""


def _text_list_problem(value: Any, max_chars: int) -> str:
    """Why `value` is not a list of non-empty, valid texts of at most max_chars each ("" when it is)."""
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        return "must be a list of non-empty texts"
    if any(len(t) > max_chars for t in value):
        return f"an item is over the limit of {max_chars} characters"
    if not all(valid_text(t) for t in value):
        return "an item contains a lone surrogate (\\ud800-\\udfff): not valid Unicode text"
    return ""


def extra_errors(extra: dict[str, Any]) -> dict[str, str]:
    """"extra.KEY" -> problem for an `extra` outside the bounds (depth, size, numbers, text) or whose
    simulator keys (EXTRA_TEXT_LISTS) are not lists of texts."""
    errs: dict[str, str] = {}
    for key, problem in problems(extra, MAX_EXTRA_DEPTH, MAX_EXTRA_CHARS):
        errs.setdefault(f"extra.{field_name(key)}" if key is not None else "extra", problem)
    for key in EXTRA_TEXT_LISTS:
        if key in extra and f"extra.{key}" not in errs:
            problem = _text_list_problem(extra[key], MAX_FIELD_CHARS)
            if problem:
                errs[f"extra.{key}"] = problem
    return errs


def profile_fingerprint(profile: Profile) -> str:
    """Short hash of everything a profile holds (any edit changes it)."""
    return fingerprint_hash(profile.to_dict())


def members_hash(profiles: Sequence[Profile]) -> str:
    """Short sha256 over the profiles' fingerprints in order: a persona set's content hash."""
    text = canonical_json([profile_fingerprint(p) for p in profiles])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
