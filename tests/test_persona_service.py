"""Profiles in a real SQLite store: CRUD, search and filters, import/export files, built-in seeding."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.personas import store as persona_store
from simulator.personas.io import import_profiles
from simulator.personas.profile import Profile, ProfileError
from storage import Persona, make_store, read_scope


def make(pid: str, **kw) -> Profile:
    base = dict(id=pid, name=f"Person {pid}", persona=f"{pid}: a 30-year-old teacher who speaks softly.",
                background="Her best friend forgot her birthday; fitting replies help, lectures hurt.",
                hidden_need="Wants her hurt taken seriously.", need_category="deep_empathy",
                personality="passive", traits=["quiet", "loyal", "sensitive"], first_line="Hey. Got a minute?",
                language="en", source="builtin")
    base.update(kw)
    return Profile(**base)


def lab_file(path: Path, *profiles: Profile) -> Path:
    path.write_text("".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in profiles), encoding="utf-8")
    return path


def test_create_get_update_delete(store):
    p = make("ana", extra={"k": [1, 2]})
    persona_store.save_profile(store, p, create=True)
    assert persona_store.get_profile(store, "ana") == p
    with pytest.raises(ProfileError) as e:
        persona_store.save_profile(store, make("ana", name="Other"), create=True)
    assert set(e.value.errors) == {"id"} and "already exists" in e.value.errors["id"]
    p.background = "Updated background."
    persona_store.save_profile(store, p, create=False)
    assert persona_store.get_profile(store, "ana").background == "Updated background."
    with pytest.raises(ProfileError) as e:
        persona_store.save_profile(store, make("ghost"), create=False)
    assert set(e.value.errors) == {"id"}
    assert persona_store.delete_profile(store, "ana") is True
    assert persona_store.delete_profile(store, "ana") is False
    assert persona_store.get_profile(store, "ana") is None


def test_invalid_profile_names_fields_and_stores_nothing(store):
    bad = make("bad", persona="", need_category="cheer_up", personality="cheerful", traits=["a", "b", "c", "d"])
    with pytest.raises(ProfileError) as e:
        persona_store.save_profile(store, bad, create=True)
    assert set(e.value.errors) == {"persona", "need_category", "personality", "traits"}
    assert persona_store.count_profiles(store) == 0


def test_search_and_filters(store):
    persona_store.save_profile(store, make("a", name="Alice", need_category="just_listen"), create=True)
    persona_store.save_profile(store, make("b", name="Bob", personality="negative",
                                           background="Lost 100% of savings_x"), create=True)
    persona_store.save_profile(store, make("c", name="王小云", language="zh", persona="时尚博主"), create=True)
    ids = lambda **kw: [p.id for p in persona_store.list_profiles(store, **kw)]  # noqa: E731
    assert ids() == ["a", "b", "c"]
    assert ids(search="alice") == ["a"]  # case-insensitive
    assert ids(search="博主") == ["c"]
    assert ids(search="100%") == ["b"] and ids(search="%") == ["b"]  # wildcards are literal
    assert ids(search="s_x") == ["b"] and ids(search="_") == ["b"]
    assert ids(need="just_listen") == ["a"]
    assert ids(personality="negative") == ["b"]
    assert ids(language="zh") == ["c"]
    assert ids(language="en", personality="passive") == ["a"]
    assert ids(search="nobody") == []


def test_duplicate_gets_fresh_id(store):
    persona_store.save_profile(store, make("ana"), create=True)
    copy = persona_store.duplicate_profile(store, "ana")
    copy2 = persona_store.duplicate_profile(store, "ana")
    assert (copy.id, copy2.id) == ("ana-copy", "ana-copy-2")
    assert copy.name == "Person ana (copy)" and copy.source == "user"
    assert copy.background == make("ana").background
    assert persona_store.get_profile(store, "ana-copy-2") == copy2
    with pytest.raises(ProfileError):
        persona_store.duplicate_profile(store, "nobody")


def test_import_all_or_nothing_then_keep_valid(store, tmp_path: Path):
    path = lab_file(tmp_path / "p.jsonl", make("a"), make("b", personality="sunny"), make("c"))
    report = persona_store.import_file(store, path)
    assert [(e.line, e.field) for e in report.errors] == [(2, "personality")]
    assert report.stored == 0 and persona_store.count_profiles(store) == 0
    report = persona_store.import_file(store, path, keep_valid=True)
    assert report.stored == 2 and [p.id for p in persona_store.list_profiles(store)] == ["a", "c"]


def test_reimport_reports_existing_ids_and_stores_nothing(store, tmp_path: Path):
    path = lab_file(tmp_path / "p.jsonl", make("a"), make("b"))
    assert persona_store.import_file(store, path).stored == 2
    persona_store.save_profile(store, make("a", name="Edited"), create=False)
    again = persona_store.import_file(store, path)
    assert again.stored == 0
    assert [(e.line, e.field) for e in again.errors] == [(1, "id"), (2, "id")]
    assert "already in the store" in again.errors[0].reason
    assert persona_store.count_profiles(store) == 2 and persona_store.get_profile(store, "a").name == "Edited"
    replaced = persona_store.import_file(store, path, replace=True)
    assert (replaced.stored, replaced.replaced) == (2, 2) and persona_store.get_profile(store, "a").name == "Person a"


@pytest.mark.parametrize("data", [b"", b"\xff\xfe{}\n", b"{not json\n"])
def test_bad_files_store_nothing(store, data: bytes):
    report = persona_store.import_file(store, data, keep_valid=True)
    assert report.errors and report.stored == 0 and persona_store.count_profiles(store) == 0


@pytest.mark.parametrize("fmt", ["lab", "rlver"])
def test_export_then_import_into_new_store_is_lossless(store, tmp_path: Path, fmt: str):
    profiles = [make("a", extra={"topic": "friends", "lab": "collides"}), make("b", language="zh", first_line="")]
    for p in profiles:
        persona_store.save_profile(store, p, create=True)
    out = tmp_path / f"out.{fmt}.jsonl"
    assert persona_store.export_file(store, out, fmt) == 2
    other = make_store(f"sqlite:///{tmp_path / 'other.db'}")
    report = persona_store.import_file(other, out)
    assert report.ok and report.stored == 2
    assert persona_store.list_profiles(other) == profiles
    assert persona_store.export_file(store, tmp_path / "one.jsonl", fmt, ids=["b"]) == 1
    other.dispose()


def test_seed_is_idempotent_and_never_overwrites(store):
    lib = [make("b1", need_category="sincere_praise"), make("b2", personality="avoidant")]
    assert persona_store.seed_builtin(store, lib) == 2
    assert persona_store.seed_builtin(store, lib) == 0
    persona_store.save_profile(store, make("b1", name="Edited"), create=False)
    persona_store.delete_profile(store, "b2")
    assert persona_store.seed_builtin(store, lib) == 1  # the deleted one comes back
    assert persona_store.get_profile(store, "b1").name == "Edited"
    with read_scope(store) as s:
        assert s.get(Persona, "b2").source == "builtin"


def test_seed_rejects_an_invalid_library_without_storing(store):
    with pytest.raises(ProfileError):
        persona_store.seed_builtin(store, [make("ok"), make("bad", hidden_need="")])
    assert persona_store.count_profiles(store) == 0


def test_seed_builtin_library(store):
    lib = pytest.importorskip("simulator.personas.builtin").BUILTIN_PROFILES
    assert persona_store.seed_builtin(store) == len(lib) >= 24
    assert persona_store.seed_builtin(store) == 0
    assert persona_store.list_profiles(store, language="en")


def test_open_store_seeds_only_a_store_without_profiles(tmp_path: Path):
    from simulator.personas.builtin import BUILTIN_IDS

    fresh = persona_store.open_store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert sorted(p.id for p in persona_store.list_profiles(fresh)) == sorted(BUILTIN_IDS)
    persona_store.delete_profile(fresh, BUILTIN_IDS[0])
    fresh.dispose()
    again = persona_store.open_store(f"sqlite:///{tmp_path / 'fresh.db'}")  # not fresh: a deleted profile stays deleted
    assert persona_store.count_profiles(again) == len(BUILTIN_IDS) - 1
    assert persona_store.get_profile(again, BUILTIN_IDS[0]) is None
    again.dispose()
    own = make_store(f"sqlite:///{tmp_path / 'own.db'}")
    persona_store.save_profile(own, make("mine"), create=True)
    own.dispose()
    mine = persona_store.open_store(f"sqlite:///{tmp_path / 'own.db'}")
    assert [p.id for p in persona_store.list_profiles(mine)] == ["mine"]
    assert persona_store.summary_row(persona_store.get_profile(mine, "mine")) == {
        "id": "mine", "name": "Person mine", "need_category": "deep_empathy", "personality": "passive",
        "language": "en", "split": ""}
    mine.dispose()


def test_released_test_profiles_import(store, shared_data: Path):
    report = persona_store.import_file(store, shared_data / "rlver" / "test_profile.jsonl")
    assert report.ok and report.stored == 100
    assert len(persona_store.list_profiles(store, language="zh", need="just_listen")) == sum(
        p.need_category == "just_listen" for p in import_profiles(shared_data / "rlver" / "test_profile.jsonl").profiles)
