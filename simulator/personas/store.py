"""Profiles in the store: list / get / save / duplicate / delete, file import and export, built-in seeding.

The app's persona view and the command line call these; they take the store and return Profiles.

Re-importing: an imported id that is already in the store is a per-line error on field "id" ("already in
the store") unless the caller asks to replace existing profiles (`replace=True`, CLI `--replace`). So
importing the same file twice gives a clear message and never a duplicate or a silent overwrite.

Seeding inserts the built-in profiles whose id is missing and never overwrites an edited one; a deleted
built-in profile therefore comes back the next time the store is seeded (at app start). The command line
opens stores with `open_store`, which seeds a store that holds no profiles yet (a fresh one).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

from sqlalchemy import Engine, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from simulator.personas.io import ImportReport, LineError, Source, export_profiles, import_profiles
from simulator.personas.profile import Profile, ProfileError
from storage import Persona, make_store, read_scope, session_scope
from storage.models import utcnow

PROFILE_COLUMNS = ("id", "name", "persona", "background", "hidden_need", "need_category", "personality", "traits",
                   "first_line", "explicit_goal", "language", "difficulty", "source", "extra")
INSERT_BATCH = 5_000  # rows per INSERT / UPDATE statement of an import
ID_CHUNK = 500  # ids per "id IN (...)" query
_SEARCHED = ("id", "name", "persona", "background", "hidden_need", "explicit_goal", "first_line")


def to_profile(row: Persona) -> Profile:
    return Profile(**{c: getattr(row, c) for c in PROFILE_COLUMNS})


def _values(profile: Profile) -> dict[str, Any]:
    """The Persona column values of a profile."""
    return {c: list(v) if c == "traits" else dict(v) if c == "extra" else v
            for c, v in ((c, getattr(profile, c)) for c in PROFILE_COLUMNS)}


def _fill(row: Persona, profile: Profile) -> Persona:
    for c, value in _values(profile).items():
        setattr(row, c, value)
    return row


def _like(text: str) -> str:
    return "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"


def list_profiles(store: Engine, search: str = "", need: Optional[str] = None, personality: Optional[str] = None,
                  language: Optional[str] = None) -> list[Profile]:
    """Profiles sorted by name; `search` matches any text field (case-insensitive), filters match exactly."""
    query = select(Persona).order_by(Persona.name, Persona.id)
    if search.strip():
        pattern = _like(search.strip())
        query = query.where(or_(*(getattr(Persona, c).ilike(pattern, escape="\\") for c in _SEARCHED)))
    for column, value in (("need_category", need), ("personality", personality), ("language", language)):
        if value:
            query = query.where(getattr(Persona, column) == value)
    with read_scope(store) as s:
        return [to_profile(row) for row in s.scalars(query)]


def get_profile(store: Engine, profile_id: str) -> Optional[Profile]:
    with read_scope(store) as s:
        row = s.get(Persona, profile_id)
        return to_profile(row) if row is not None else None


def count_profiles(store: Engine) -> int:
    with read_scope(store) as s:
        return s.scalar(select(func.count(Persona.id))) or 0


def save_profile(store: Engine, profile: Profile, create: bool) -> Profile:
    """Validate and store. create=True: a new id (an existing one is an error on "id"); create=False:
    update the profile with this id (a missing one is an error on "id"). Raises ProfileError."""
    profile.validate()
    with session_scope(store) as s:
        row = s.get(Persona, profile.id)
        if create and row is not None:
            raise ProfileError({"id": f"a profile with id {profile.id!r} already exists; choose another id"})
        if not create and row is None:
            raise ProfileError({"id": f"no profile with id {profile.id!r} to update"})
        s.add(_fill(row if row is not None else Persona(), profile))
    return profile


def delete_profile(store: Engine, profile_id: str) -> bool:
    """Delete; True when a profile was deleted."""
    with session_scope(store) as s:
        row = s.get(Persona, profile_id)
        if row is None:
            return False
        s.delete(row)
        return True


def fresh_id(store: Engine, base: str) -> str:
    """`base` made into a slug, with -2, -3, ... appended until no profile has it (at most 64 chars)."""
    slug = re.sub(r"[^\w-]+", "-", base.strip().lower(), flags=re.UNICODE).strip("-")[:56] or "profile"
    with read_scope(store) as s:
        taken = set(s.scalars(select(Persona.id).where(Persona.id.like(_like(slug)[1:], escape="\\"))))
    candidate, n = slug, 1
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    return candidate


def duplicate_profile(store: Engine, profile_id: str) -> Profile:
    """Store a copy under a fresh id ("<id>-copy", "<id>-copy-2", ...) and return it."""
    original = get_profile(store, profile_id)
    if original is None:
        raise ProfileError({"id": f"no profile with id {profile_id!r} to duplicate"})
    data = original.to_dict()
    data.update(id=fresh_id(store, f"{profile_id[:50]}-copy"), name=f"{original.name} (copy)", source="user")
    return save_profile(store, Profile.from_dict(data), create=True)


def import_file(store: Engine, source: Source, keep_valid: bool = False, replace: bool = False) -> ImportReport:
    """Import a profile file (path or bytes). Any bad line -> nothing stored, unless keep_valid, which
    stores the valid lines. Ids already in the store are per-line errors unless replace=True."""
    report = import_profiles(source)
    if not replace and report.profiles:
        ids = [p.id for p in report.profiles]
        with read_scope(store) as s:
            existing = _existing_ids(s, ids)
        if existing:
            report.errors.extend(
                LineError(report.line_of[i], "id", f"{i!r} is already in the store (delete it, change the id, "
                                                   "or import with replace)") for i in ids if i in existing)
            report.errors.sort(key=lambda e: e.line)
            report.profiles = [p for p in report.profiles if p.id not in existing]
    if report.errors and not keep_valid:
        return report
    with session_scope(store) as s:  # one transaction: every valid profile or none
        existing = _existing_ids(s, [p.id for p in report.profiles])
        rows = [_values(p) for p in report.profiles]
        new = [r for r in rows if r["id"] not in existing]
        old = [dict(r, updated_at=utcnow()) for r in rows if r["id"] in existing]
        for i in range(0, len(new), INSERT_BATCH):
            s.execute(insert(Persona), new[i:i + INSERT_BATCH])
        for i in range(0, len(old), INSERT_BATCH):
            s.execute(update(Persona), old[i:i + INSERT_BATCH])
    report.replaced = len(old)
    report.stored = len(report.profiles)
    return report


def _existing_ids(session: Any, ids: Sequence[str]) -> set[str]:
    """Which of `ids` are stored (queried in chunks: SQLite limits the parameters of one statement)."""
    found: set[str] = set()
    for i in range(0, len(ids), ID_CHUNK):
        found.update(session.scalars(select(Persona.id).where(Persona.id.in_(ids[i:i + ID_CHUNK]))))
    return found


def export_file(store: Engine, path: Union[str, Path], fmt: str = "lab", ids: Optional[Sequence[str]] = None) -> int:
    """Write the stored profiles (all, or those in `ids`) to a JSONL file; returns how many."""
    profiles = list_profiles(store)
    if ids is not None:
        wanted = set(ids)
        profiles = [p for p in profiles if p.id in wanted]
    return export_profiles(profiles, path, fmt)


def seed_builtin(store: Engine, profiles: Optional[Iterable[Profile]] = None) -> int:
    """Insert the built-in library (simulator.personas.builtin.BUILTIN_PROFILES) profiles whose id is not
    in the store; never overwrites. Idempotent. Returns how many were inserted."""
    if profiles is None:
        from simulator.personas.builtin import BUILTIN_PROFILES

        profiles = BUILTIN_PROFILES
    profiles = [p.validate() for p in profiles]
    with session_scope(store) as s:
        existing = set(s.scalars(select(Persona.id)))
        new = [p for p in profiles if p.id not in existing]
        s.add_all(_fill(Persona(), p) for p in new)
    return len(new)


SUMMARY_FIELDS = ("id", "name", "need_category", "personality", "language", "split")


def summary_row(profile: Profile) -> dict[str, str]:
    """What a persona listing shows: SUMMARY_FIELDS ("split" from extra; "" when it has none)."""
    split = profile.extra.get("split", "") if isinstance(profile.extra, dict) else ""
    return {**{k: getattr(profile, k) for k in SUMMARY_FIELDS[:-1]}, "split": split if isinstance(split, str) else ""}


def open_store(url: Optional[str] = None) -> Engine:
    """The store at `url` (default: the lab's), with the built-in profiles seeded when it holds none, so a
    command on a fresh store sees the same personas as the app."""
    store = make_store(url)
    if count_profiles(store) == 0:
        try:
            seed_builtin(store)
        except IntegrityError:  # another process seeded it at the same moment
            pass
    return store
