"""Profile files: the RLVER/SAGE JSONL format and the lab's own JSONL, in and out.

RLVER/SAGE lines carry id, player (persona), scene (background; the released scenes end with the hidden
intention after "####隐藏主题:"), main_cha (personality type, Chinese), cha_group (three traits), task (the
hidden intention, Chinese) and, in the test set, first_talk. Lab lines are `Profile.to_dict()`. The format
is detected per line from its keys, so one file may mix both.

Lossless both ways: unknown keys of an RLVER line are kept in `Profile.extra` and written back at the top
level; Profile fields RLVER has no key for (name, language, ...) are written under the key "lab" only when
they differ from what an import would derive, so a released file exports back to the same records.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Union

from simulator.personas.bounds import field_name, loads_line, quote
from simulator.personas.profile import PERSONALITIES, Profile, need_category_from_text

Source = Union[str, Path, bytes]

RLVER_KEYS = ("id", "player", "scene", "main_cha", "cha_group", "task", "first_talk")
LAB_KEY = "lab"  # Profile fields that RLVER has no key for, written only when not derivable
# Profile field -> the RLVER key it comes from (errors are reported under the key the file uses).
RLVER_FIELD_OF = {"id": "id", "persona": "player", "background": "scene", "personality": "main_cha",
                  "traits": "cha_group", "hidden_need": "task", "need_category": "task",
                  "first_line": "first_talk"}
LAB_OVERRIDES = ("name", "need_category", "explicit_goal", "language", "difficulty", "source")
PROFILE_FIELDS = tuple(f.name for f in fields(Profile))
REQUIRED_LAB = ("id", "name", "persona", "background", "hidden_need", "need_category", "personality")
_PERSONALITY_OF = {zh: key for key, zh in PERSONALITIES.items()}
_NAME_RE = re.compile(r"(?:姓名|名字|Name)\s*[：:]\s*([^\n*]+)", re.IGNORECASE)


@dataclass
class LineError:
    """One problem in a file: line number (1-based; 0 = the whole file), the field, and what is wrong."""

    line: int
    field: str
    reason: str

    def __str__(self) -> str:
        if self.line == 0:
            return f"{self.field}: {self.reason}" if self.field == "file" else f"file: {self.field}: {self.reason}"
        return f"line {self.line}: {self.field}: {self.reason}"


class BadFileError(ValueError):
    """A file with problems; `errors` lists every one."""

    def __init__(self, errors: list[LineError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass
class ImportReport:
    """What an import found: the valid profiles and every problem, line by line."""

    profiles: list[Profile] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    n_lines: int = 0  # non-blank lines read
    stored: int = 0  # profiles written to the store (set by persona_service.import_file)
    replaced: int = 0  # of which replaced an existing profile with the same id
    line_of: dict[str, int] = field(default_factory=dict)  # profile id -> its line in the file

    @property
    def ok(self) -> bool:
        return not self.errors and bool(self.profiles)

    def summary(self) -> str:
        head = (f"{len(self.profiles)} valid profile(s), {len(self.errors)} problem(s) in {self.n_lines} "
                f"line(s); {self.stored} stored" + (f" ({self.replaced} replaced)" if self.replaced else ""))
        return "\n".join([head] + [str(e) for e in self.errors])


# ---------------------------------------------------------------- reading JSONL (shared with transcripts)
def read_bytes(source: Source) -> bytes:
    return source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()


def read_jsonl(source: Source) -> tuple[list[tuple[int, dict[str, Any]]], list[LineError], int]:
    """(line number, object) for each JSON-object line, a LineError for every bad line (not UTF-8,
    malformed JSON, outside the bounds of simulator.personas.bounds, not an object) or for an empty file, and
    the count of non-blank lines."""
    try:
        data = read_bytes(source)
    except OSError as e:
        return [], [LineError(0, "file", f"cannot be read ({e.strerror or e})")], 0
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    records: list[tuple[int, dict[str, Any]]] = []
    errors: list[LineError] = []
    n_lines = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        n_lines += 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            errors.append(LineError(number, "encoding",
                                    f"not UTF-8 text (byte 0x{raw[e.start]:02x} at byte {e.start + 1})"))
            continue
        obj, problem = loads_line(text)
        if problem is not None:
            errors.append(LineError(number, *problem))
            continue
        if not isinstance(obj, dict):
            errors.append(LineError(number, "json", f"expected a JSON object, got {type(obj).__name__}"))
            continue
        records.append((number, obj))
    if n_lines == 0:
        errors.append(LineError(0, "file", "is empty: no lines to import"))
    return records, errors, n_lines


def write_atomic(path: Union[str, Path], text: str) -> None:
    """Write the whole file or nothing: a temporary file beside it, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps_jsonl(records: Iterable[dict[str, Any]]) -> str:
    """Standard JSON lines (NaN / Infinity refused with ValueError, never written)."""
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in records)


# ---------------------------------------------------------------- RLVER / SAGE records
def name_from_persona(persona: str) -> str:
    """The name line of a released persona ("* 姓名：王小云"), or ""."""
    m = _NAME_RE.search(persona or "")
    return m.group(1).strip() if m else ""


def _rlver_defaults(record: dict[str, Any]) -> dict[str, Any]:
    """The lab-only fields as an import derives them from an RLVER record."""
    player, task = record.get("player"), record.get("task")
    name = name_from_persona(player) if isinstance(player, str) else ""
    return {"name": name or str(record.get("id", "")), "need_category": need_category_from_text(task)
            if isinstance(task, str) else "", "explicit_goal": "", "language": "zh", "difficulty": "standard",
            "source": "rlver"}


def profile_from_rlver(record: dict[str, Any]) -> tuple[Profile | None, dict[str, str]]:
    """An RLVER/SAGE record -> (Profile, {}) or (None, {rlver key: problem})."""
    errs: dict[str, str] = {}
    for key in ("id", "player", "scene", "main_cha", "task"):
        if key not in record:
            errs[key] = "is required (missing)"
        elif not isinstance(record[key], str):
            errs[key] = f"must be text, got {type(record[key]).__name__}"
    traits = record.get("cha_group", [])
    if not isinstance(traits, list):
        errs["cha_group"] = f"must be a list of texts, got {type(traits).__name__}"
    first = record.get("first_talk", "")
    if not isinstance(first, str):
        errs["first_talk"] = f"must be text, got {type(first).__name__}"
    lab = record.get(LAB_KEY, {})
    if not isinstance(lab, dict):
        errs[LAB_KEY] = f"must be an object, got {type(lab).__name__}"
        lab = {}
    unknown = sorted(set(lab) - set(LAB_OVERRIDES) - {"extra"})
    if unknown:
        names = ", ".join(field_name(k) for k in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        errs[LAB_KEY] = f"unknown field(s) {names}; allowed: {', '.join(LAB_OVERRIDES)}, extra"
    if not isinstance(lab.get("extra", {}), dict):
        errs[LAB_KEY] = "extra must be an object"
    main_cha = record.get("main_cha")
    personality = None
    if "main_cha" not in errs:
        personality = _PERSONALITY_OF.get(main_cha, main_cha if main_cha in PERSONALITIES else None)
    if "main_cha" not in errs and personality is None:
        errs["main_cha"] = (f"unknown personality type {quote(main_cha)}; one of "
                            f"{', '.join(f'{zh} ({k})' for k, zh in PERSONALITIES.items())}")
    if errs:
        return None, errs
    values = {**_rlver_defaults(record), **{k: v for k, v in lab.items() if k != "extra"}}
    extra = {k: v for k, v in record.items() if k not in RLVER_KEYS and k != LAB_KEY}
    extra.update(lab.get("extra", {}))
    profile = Profile(id=record["id"], persona=record["player"], background=record["scene"],
                      hidden_need=record["task"], personality=personality, traits=list(traits),
                      first_line=first, extra=extra, **values)
    for name, problem in profile.errors().items():
        key = f"{LAB_KEY}.{name}" if name in lab else RLVER_FIELD_OF.get(name, name)
        if name.startswith("extra."):
            top = name[6:] in record and name[6:] not in RLVER_KEYS and name[6:] != LAB_KEY
            key = name[6:] if top else f"{LAB_KEY}.{name}"
        if name == "need_category" and "need_category" not in lab:
            problem = "unknown hidden-need category: the text matches none of the 8 released intentions"
        errs.setdefault(key, problem)
    return (None, errs) if errs else (profile, {})


def profile_to_rlver(profile: Profile) -> dict[str, Any]:
    """A Profile as an RLVER record; import gives the same Profile back."""
    record: dict[str, Any] = {"id": profile.id, "player": profile.persona, "scene": profile.background,
                              "main_cha": PERSONALITIES.get(profile.personality, profile.personality),
                              "cha_group": list(profile.traits), "task": profile.hidden_need}
    if profile.first_line:
        record["first_talk"] = profile.first_line
    derived = _rlver_defaults(record)
    lab: dict[str, Any] = {k: getattr(profile, k) for k in LAB_OVERRIDES if getattr(profile, k) != derived[k]}
    hidden = {k: v for k, v in profile.extra.items() if k in RLVER_KEYS or k == LAB_KEY}
    if hidden:
        lab["extra"] = hidden
    record.update({k: v for k, v in profile.extra.items() if k not in hidden})
    if lab:
        record[LAB_KEY] = lab
    return record


# ---------------------------------------------------------------- the lab's own records
def profile_from_lab(record: dict[str, Any]) -> tuple[Profile | None, dict[str, str]]:
    """A `Profile.to_dict()` record -> (Profile, {}) or (None, {field: problem}). Unknown keys go to extra."""
    errs = {k: "is required (missing)" for k in REQUIRED_LAB if k not in record}
    for key in ("source",):
        if key in record and not isinstance(record[key], str):
            errs[key] = f"must be text, got {type(record[key]).__name__}"
    if errs:
        return None, errs
    known = {k: v for k, v in record.items() if k in PROFILE_FIELDS}
    unknown = {k: v for k, v in record.items() if k not in PROFILE_FIELDS}
    profile = Profile(**known)
    if unknown and isinstance(profile.extra, dict):
        profile.extra = {**profile.extra, **unknown}
    errs = {(k[6:] if k.startswith("extra.") and k[6:] in unknown else k): v for k, v in profile.errors().items()}
    return (None, errs) if errs else (profile, {})


def detect_format(record: dict[str, Any]) -> str:
    """"rlver", "lab" or "" from the keys of one record."""
    if "player" in record or "scene" in record:
        return "rlver"
    if "persona" in record or "background" in record:
        return "lab"
    return ""


def import_profiles(source: Source) -> ImportReport:
    """Parse a JSONL file (path or bytes) of RLVER and/or lab records. Never raises on bad content:
    every problem is a LineError in the report (duplicate ids: the later line is the bad one)."""
    records, errors, n_lines = read_jsonl(source)
    report = ImportReport(errors=errors, n_lines=n_lines)
    first_line_of = report.line_of
    for number, record in records:
        fmt = detect_format(record)
        if not fmt:
            report.errors.append(LineError(number, "line", "not a profile: expected RLVER keys (player, scene, "
                                                           "main_cha, task, ...) or lab keys (persona, background, ...)"))
            continue
        profile, errs = (profile_from_rlver if fmt == "rlver" else profile_from_lab)(record)
        report.errors.extend(LineError(number, k, v) for k, v in errs.items())
        if profile is None:
            continue
        if profile.id in first_line_of:
            report.errors.append(LineError(number, "id", f"duplicate id {profile.id!r} (first on line "
                                                         f"{first_line_of[profile.id]})"))
            continue
        first_line_of[profile.id] = number
        report.profiles.append(profile)
    report.errors.sort(key=lambda e: e.line)
    return report


def dumps_profiles(profiles: Iterable[Profile], fmt: str = "lab") -> str:
    """JSONL text of profiles in "lab", "rlver" or "sage" format ("sage": the RLVER records SAGE's test set
    uses, each with its scripted first line, first_talk). A profile that would not pass import (e.g. a row
    stored before the bounds of simulator.personas.bounds) is refused with ValueError naming it."""
    if fmt not in ("lab", "rlver", "sage"):
        raise ValueError(f"unknown format {fmt!r}; one of lab, rlver, sage")
    profiles = list(profiles)
    bad = [(p.id, p.errors()) for p in profiles]
    if fmt == "sage":
        bad += [(p.id, {"first_line": "is required for SAGE (first_talk)"}) for p in profiles if not p.first_line]
    bad = [(pid, errs) for pid, errs in bad if errs]
    if bad:
        shown = "; ".join(f"{quote(pid, 40)} ({next(iter(errs))}: {next(iter(errs.values()))})" for pid, errs in bad[:5])
        raise ValueError(f"{len(bad)} profile(s) are invalid and were not exported: {shown}"
                         + (" ..." if len(bad) > 5 else "") + "; fix or delete them first")
    convert = Profile.to_dict if fmt == "lab" else profile_to_rlver  # sage: rlver records with first_talk
    return dumps_jsonl(convert(p) for p in profiles)


def export_profiles(profiles: Iterable[Profile], path: Union[str, Path], fmt: str = "lab") -> int:
    """Write profiles to `path` (whole file or nothing); returns how many."""
    profiles = list(profiles)
    write_atomic(path, dumps_profiles(profiles, fmt))
    return len(profiles)
