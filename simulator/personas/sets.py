"""Persona sets in the store: named, ordered lists of stored personas, made from filters, a generation, an
import, a stratified train / held-out split of another set, or a list of ids; listed, resolved, exported.

A set records how it was made (`source_kind` and `params`) and the content hash of its members when it was
made (simulator.personas.profile.members_hash); `set_summary` also gives the hash of the members as they are
now, so a set whose personas were edited since shows it. Runs name a set as `set:NAME` (resolve_personas).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from sqlalchemy import Engine, select

from simulator.personas.io import export_profiles
from simulator.personas.profile import Profile, members_hash
from simulator.personas.store import get_profile, list_profiles
from storage import code_version, read_scope, session_scope
from storage.models import PersonaSet, PersonaSetMember

SOURCE_KINDS = ("filter", "generation", "import", "split", "manual")
STRATA = ("need_category", "personality")
MAX_NAME = 200


class PersonaSpecError(ValueError):
    """A spec that names no profiles; the message names the spec and what is available."""


class SetError(ValueError):
    """Bad input for a persona set; `field` names the option or form field it concerns."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


@dataclass
class SetSummary:
    name: str
    size: int
    content_hash: str  # when the set was made
    current_hash: str  # of the members as they are now ("" when a member was deleted)
    source_kind: str
    params: dict[str, Any]
    created_at: str
    missing: list[str]  # member ids no longer in the store

    @property
    def changed(self) -> bool:
        return self.current_hash != self.content_hash

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "content_hash": self.content_hash,
                "current_hash": self.current_hash, "changed": self.changed, "source_kind": self.source_kind,
                "params": self.params, "created_at": self.created_at, "missing": self.missing}


# ------------------------------------------------------------------------------------------------- create
def create_set(store: Engine, name: str, profiles: Sequence[Profile], source_kind: str,
               params: Optional[dict[str, Any]] = None) -> SetSummary:
    """Store a set of the given (stored) profiles in order. SetError on a bad or taken name, no profiles,
    an unknown source kind or a profile that is not in the store."""
    return set_summary(store, _create_sets(store, [(name, profiles, params or {})], source_kind)[0])


def _create_sets(store: Engine, sets: Sequence[tuple[str, Sequence[Profile], dict[str, Any]]],
                 source_kind: str) -> list[str]:
    """Store every (name, profiles, params) in one transaction (all or none); their names."""
    if source_kind not in SOURCE_KINDS:
        raise SetError("source_kind", f"unknown source {source_kind!r}; one of {', '.join(SOURCE_KINDS)}")
    rows = []
    for name, profiles, params in sets:
        name = check_name(store, name)
        if not profiles:
            raise SetError("members", f"the set {name!r} would be empty: no stored persona matches")
        ids = [p.id for p in profiles]
        if len(set(ids)) != len(ids):
            raise SetError("ids", "a persona is listed twice")
        stored = [get_profile(store, pid) for pid in ids]
        missing = [pid for pid, p in zip(ids, stored) if p is None]
        if missing:
            raise SetError("ids", f"not in the store: {', '.join(missing[:10])}" + (" ..." if len(missing) > 10 else ""))
        row = PersonaSet(name=name, content_hash=members_hash(stored), source_kind=source_kind,
                         params=dict(params), code_version=code_version())
        row.members = [PersonaSetMember(position=i, persona_id=pid) for i, pid in enumerate(ids)]
        rows.append(row)
    with session_scope(store) as s:
        for row in rows:
            if s.scalars(select(PersonaSet.id).where(PersonaSet.name == row.name)).first() is not None:
                raise SetError("name", f"a set named {row.name!r} already exists; choose another name")
            s.add(row)
    return [row.name for row in rows]


def check_name(store: Engine, name: Any) -> str:
    """The name stripped; SetError("name", ...) when empty, too long, with a comma, or already taken."""
    if not isinstance(name, str) or not name.strip():
        raise SetError("name", "is required")
    name = name.strip()
    if len(name) > MAX_NAME or "," in name:
        raise SetError("name", f"must be at most {MAX_NAME} characters without commas")
    if name in set_names(store):
        raise SetError("name", f"a set named {name!r} already exists; choose another name")
    return name


def filtered_profiles(store: Engine, need: str = "", personality: str = "", language: str = "", split: str = "",
                      search: str = "", ids: Sequence[str] = ()) -> list[Profile]:
    """The stored profiles matching every filter given (the Personas view's filters plus the split tag in
    extra.split and a list of ids), in the store's listing order (by name), or in the order of `ids`."""
    profiles = list_profiles(store, search or "", need or None, personality or None, language or None)
    if split:
        profiles = [p for p in profiles if isinstance(p.extra, dict) and p.extra.get("split") == split]
    if ids:
        by_id = {p.id: p for p in profiles}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]
    return profiles


def create_from_filters(store: Engine, name: str, **filters: Any) -> SetSummary:
    """A set of the stored profiles matching the filters (see filtered_profiles); the filters are recorded."""
    filters = {k: v for k, v in filters.items() if v}
    if "ids" in filters:
        filters["ids"] = list(filters["ids"])
        unknown = [i for i in filters["ids"] if get_profile(store, i) is None]
        if unknown:
            raise SetError("ids", f"not in the store: {', '.join(unknown[:10])}")
    kind = "manual" if set(filters) == {"ids"} else "filter"
    return create_set(store, name, filtered_profiles(store, **filters), kind, {"filters": filters})


def create_from_generation(store: Engine, name: str, generation_id: Any) -> SetSummary:
    """A set of the stored personas a generation made (extra.generation_id == generation_id)."""
    if generation_id in (None, ""):
        raise SetError("generation", "is required")
    members = [p for p in list_profiles(store)
               if isinstance(p.extra, dict) and str(p.extra.get("generation_id", "")) == str(generation_id)]
    if not members:
        raise SetError("generation", f"no stored persona comes from generation {generation_id!r}")
    return create_set(store, name, members, "generation", {"generation_id": generation_id})


def create_from_import(store: Engine, name: str, file_name: Union[str, Path], ids: Sequence[str]) -> SetSummary:
    """A set of the personas an import stored (`ids`, e.g. ImportReport.profiles' ids), in file order."""
    members = [get_profile(store, i) for i in ids]
    return create_set(store, name, [p for p in members if p is not None], "import",
                      {"file": Path(file_name).name, "n_imported": len(ids)})


# -------------------------------------------------------------------------------------------------- split
def stratified_split(profiles: Sequence[Profile], fraction: float, seed: int) -> tuple[list[Profile], list[Profile]]:
    """(train, held-out): round(fraction x N) profiles go to train (at least one on each side), shared among
    the need x personality strata in proportion to their sizes: a stratum of n gets floor(fraction x n), and
    the strata with the largest remainders (seeded ties) one more each, so the split is the fraction asked
    for. Each stratum is shuffled with `seed` before it is cut; a stratum too small for both sides lands on
    one. Both sides keep the set's order. The same profiles, fraction and seed always give the same split."""
    strata: dict[tuple[str, ...], list[int]] = {}
    for i, p in enumerate(profiles):
        strata.setdefault(tuple(getattr(p, k) for k in STRATA), []).append(i)
    rng = random.Random(f"persona-split:{seed}")
    keys = sorted(strata)
    quota = {k: fraction * len(strata[k]) for k in keys}
    take = {k: math.floor(quota[k]) for k in keys}
    n_train = min(len(profiles) - 1, max(1, round(fraction * len(profiles))))
    tie = {k: rng.random() for k in keys}
    by_remainder = sorted(keys, key=lambda k: (take[k] - quota[k], tie[k]))
    for k in by_remainder[:max(0, n_train - sum(take.values()))]:
        take[k] = min(len(strata[k]), take[k] + 1)
    train: set[int] = set()
    for k in keys:
        members = strata[k][:]
        rng.shuffle(members)
        train.update(members[:take[k]])
    return ([p for i, p in enumerate(profiles) if i in train],
            [p for i, p in enumerate(profiles) if i not in train])


def split_set(store: Engine, name: str, fraction: float = 0.8, seed: int = 0) -> tuple[SetSummary, SetSummary]:
    """Store NAME-train and NAME-heldout: a stratified split of the set `name` (see stratified_split)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise SetError("fraction", f"must be between 0 and 1 (exclusive), got {fraction!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SetError("seed", f"must be a whole number, got {seed!r}")
    parent = set_profiles(store, name)
    train, heldout = stratified_split(parent, float(fraction), seed)
    for side, members in (("train", train), ("heldout", heldout)):
        if not members:
            raise SetError("fraction", f"{fraction} leaves the {side} side of {name!r} ({len(parent)} personas) empty")
    params = {"parent": name, "parent_hash": members_hash(parent), "seed": seed, "fraction": float(fraction),
              "strata": list(STRATA)}
    names = _create_sets(store, [(f"{name}-{side}", members, {**params, "side": side})
                                 for side, members in (("train", train), ("heldout", heldout))], "split")
    return set_summary(store, names[0]), set_summary(store, names[1])


# --------------------------------------------------------------------------------------------- read / use
def set_names(store: Engine) -> list[str]:
    with read_scope(store) as s:
        return list(s.scalars(select(PersonaSet.name).order_by(PersonaSet.name)))


def _members(store: Engine, name: str) -> tuple[dict[str, Any], list[str]]:
    """(the set's columns, its member ids in order); PersonaSpecError naming the stored sets when unknown."""
    with read_scope(store) as s:
        row = s.scalars(select(PersonaSet).where(PersonaSet.name == name)).first()
        if row is not None:
            cols = {c: getattr(row, c) for c in ("name", "content_hash", "source_kind", "params", "created_at")}
            return cols, [m.persona_id for m in row.members]
    names = set_names(store)
    raise PersonaSpecError(f"no stored persona set named {name!r}; "
                           + (f"stored sets: {', '.join(names)}" if names else "the store holds no sets")
                           + " (`python -m simulator personas sets list`)")


def set_profiles(store: Engine, name: str) -> list[Profile]:
    """The set's members as they are now, in order. PersonaSpecError for an unknown set or deleted members."""
    _, ids = _members(store, name)
    profiles = [get_profile(store, i) for i in ids]
    missing = [i for i, p in zip(ids, profiles) if p is None]
    if missing:
        raise PersonaSpecError(f"persona set {name!r}: member(s) deleted from the store since it was made: "
                               f"{', '.join(missing[:10])}")
    return profiles


def set_summary(store: Engine, name: str) -> SetSummary:
    row, ids = _members(store, name)
    profiles = [get_profile(store, i) for i in ids]
    missing = [i for i, p in zip(ids, profiles) if p is None]
    current = "" if missing else members_hash(profiles)
    return SetSummary(name=row["name"], size=len(ids), content_hash=row["content_hash"], current_hash=current,
                      source_kind=row["source_kind"], params=dict(row["params"] or {}),
                      created_at=row["created_at"].strftime("%Y-%m-%d %H:%M:%S"), missing=missing)


def list_sets(store: Engine) -> list[SetSummary]:
    return [set_summary(store, n) for n in set_names(store)]


def delete_set(store: Engine, name: str) -> bool:
    with session_scope(store) as s:
        row = s.scalars(select(PersonaSet).where(PersonaSet.name == name)).first()
        if row is None:
            return False
        s.delete(row)
        return True


EXPORT_FORMATS = ("lab", "rlver", "sage")


def export_set(store: Engine, name: str, path: Union[str, Path], fmt: str = "lab") -> int:
    """Write the set's profiles to a JSONL file in `fmt` (EXPORT_FORMATS); returns how many."""
    if fmt not in EXPORT_FORMATS:
        raise SetError("format", f"unknown format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}")
    return export_profiles(set_profiles(store, name), path, fmt)
