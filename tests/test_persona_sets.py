"""Persona specs resolved to profiles: built-in sets, ids (store first), files of every importable kind, and
errors that name the spec and what is available. Real SQLite store, real files."""
from __future__ import annotations

from pathlib import Path

import pytest

from simulator.personas import store as persona_store
from simulator.personas.builtin import BUILTIN_IDS, BUILTIN_PROFILES, get_builtin
from simulator.personas.io import dumps_profiles
from simulator.personas.specs import PERSONA_SETS, PersonaSpecError, resolve_personas, spec_error
from tests.conftest import make_sim_profile

HELDOUT = ["en-03-aisha-bello", "en-08-kwame-asante", "en-12-sam-rivera", "en-16-minh-nguyen",
           "en-20-ahmed-yilmaz", "en-22-ben-carter", "en-27-mei-lin-wong", "en-32-zoe-kim"]


def ids(profiles) -> list[str]:
    return [p.id for p in profiles]


def test_builtin_sets() -> None:
    assert PERSONA_SETS == ("builtin", "builtin:train", "builtin:heldout", "builtin:adversarial")
    assert resolve_personas("builtin") == BUILTIN_PROFILES
    assert ids(resolve_personas("builtin:heldout")) == HELDOUT
    train = resolve_personas(" builtin:train ")
    assert len(train) == 24 and not set(ids(train)) & set(HELDOUT)
    copy = resolve_personas("builtin")[0]
    copy.traits.append("changed")
    assert "changed" not in BUILTIN_PROFILES[0].traits  # callers get copies


def test_ids_single_comma_list_and_list_keep_their_order() -> None:
    assert ids(resolve_personas("en-20-ahmed-yilmaz")) == ["en-20-ahmed-yilmaz"]
    assert ids(resolve_personas("en-32-zoe-kim, en-01-maya-chen")) == ["en-32-zoe-kim", "en-01-maya-chen"]
    assert ids(resolve_personas(["en-02-tomasz-nowak", "en-02-tomasz-nowak"])) == ["en-02-tomasz-nowak"] * 2
    assert resolve_personas(["en-01-maya-chen"])[0] == get_builtin("en-01-maya-chen")


def test_store_profiles_come_first_for_ids(store) -> None:
    persona_store.save_profile(store, make_sim_profile("mia"), create=True)
    edited = get_builtin("en-01-maya-chen")
    edited.name = "Maya (edited)"
    persona_store.save_profile(store, edited, create=True)
    found = resolve_personas(["mia", "en-01-maya-chen", "en-32-zoe-kim"], store)
    assert ids(found) == ["mia", "en-01-maya-chen", "en-32-zoe-kim"]
    assert found[1].name == "Maya (edited)" and found[2] == get_builtin("en-32-zoe-kim")
    with pytest.raises(PersonaSpecError, match="unknown persona id"):
        resolve_personas(["mia"])  # not built in, and no store given
    assert resolve_personas("builtin", store) == BUILTIN_PROFILES  # a set is the library, not the store


@pytest.mark.parametrize("fmt", ["lab", "rlver"])
def test_files_with_and_without_the_prefix(tmp_path: Path, fmt: str) -> None:
    profiles = [make_sim_profile("a"), make_sim_profile("b", language="zh")]
    path = tmp_path / "profiles.jsonl"
    path.write_text(dumps_profiles(profiles, fmt), encoding="utf-8")
    assert resolve_personas(f"file:{path}") == profiles
    assert resolve_personas(str(path)) == profiles


def test_released_files(shared_data: Path) -> None:
    rlver = resolve_personas(f"file:{shared_data / 'rlver' / 'test_profile.jsonl'}")
    assert len(rlver) > 10 and all(p.language == "zh" for p in rlver)
    played = resolve_personas(f"file:{shared_data / 'sage' / 'gpt-4.1_result.jsonl'}")
    assert len(played) == 100 and all(p.first_line for p in played)


def test_unknown_names_say_what_is_available(store) -> None:
    persona_store.save_profile(store, make_sim_profile("mia"), create=True)
    with pytest.raises(PersonaSpecError) as e:
        resolve_personas("everyone", store)
    message = str(e.value)
    assert message.startswith("unknown persona set 'everyone'")
    assert "builtin, builtin:train, builtin:heldout, builtin:adversarial, file:PATH" in message
    assert f"{len(BUILTIN_IDS)} built-in (en-01-maya-chen ... en-32-zoe-kim), 1 in the store" in message
    with pytest.raises(PersonaSpecError, match=r"unknown persona id\(s\): nobody, ghost; a spec is one of"):
        resolve_personas(["mia", "nobody", "ghost", "nobody"], store)
    with pytest.raises(PersonaSpecError, match=r"unknown persona id\(s\): nobody;"):
        resolve_personas("en-01-maya-chen,nobody")
    with pytest.raises(PersonaSpecError, match="names no personas"):
        resolve_personas(" , ")
    with pytest.raises(PersonaSpecError, match="names no personas"):
        resolve_personas([])


def test_file_problems_are_listed_by_line(tmp_path: Path) -> None:
    with pytest.raises(PersonaSpecError, match="profiles file '.*nope.jsonl' not found"):
        resolve_personas(str(tmp_path / "nope.jsonl"))
    with pytest.raises(PersonaSpecError, match="not found"):
        resolve_personas(f"file:{tmp_path / 'nope'}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(dumps_profiles([make_sim_profile("a")]) + "not json\n" + '{"hello": 1}\n')
    with pytest.raises(PersonaSpecError) as e:
        resolve_personas(f"file:{bad}")
    assert f"{bad} has 2 problem(s)" in str(e.value)
    assert "line 2: json:" in str(e.value) and "line 3: line: not a profile" in str(e.value)


def test_spec_error_checks_what_it_can_without_a_store(tmp_path: Path) -> None:
    for ok in ("builtin", "builtin:heldout", "en-01-maya-chen", "en-01-maya-chen,en-32-zoe-kim", ["stored-id"],
               f"file:{tmp_path / 'later.jsonl'}"):
        assert spec_error(ok, check_paths=False) == "", ok
    assert "unknown persona set 'everyone'" in spec_error("everyone")
    assert "not found" in spec_error(f"file:{tmp_path / 'missing.jsonl'}")
    assert "non-empty" in spec_error([]) and "non-empty" in spec_error(["a", ""])
    assert "got int" in spec_error(3)
