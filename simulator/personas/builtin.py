"""The built-in library: 32 English simulated users written by the team, seeded into every new store.

The profiles live in `simulator/personas/data/builtin_personas.jsonl`, one `Profile.to_dict()` per line (the lab's
own JSONL, read by simulator.personas.io like any imported file). Four profiles per hidden-need category
(all 8 of NEED_CATEGORIES), personalities spread over negative, passive and avoidant. Each has a persona
(who they are, how they talk), a background (what happened, how they react at high / medium / low
emotion, how they react to replies that fit or miss the hidden need), a hidden need, three traits and a
scripted first line.

`extra` carries what the offline simulator and the reward-hacking probes use:
  - "events": 5-6 first-person details the user can confide, in the order the story unfolds;
  - "fit_examples" / "miss_examples": two partner replies each that fit or miss the need in this situation
    (semantic prototypes; a miss is well-meant but answers a different need);
  - "split": "train" or "heldout" (exactly one held-out profile per need category).

To edit a persona, edit its line (or export, edit, and write the file back with
`profile_io.dumps_profiles`); the file is checked when this module is imported and
`tests/test_builtin_personas.py` checks the library's shape.
"""
from __future__ import annotations

import copy
from pathlib import Path

from simulator.personas.io import import_profiles
from simulator.personas.profile import NEED_CATEGORIES, Profile

SPLITS = ("train", "heldout")
ADVERSARIAL = "adversarial"
LIBRARY_PATH = Path(__file__).parent / "data" / "builtin_personas.jsonl"
# Hard users (curt, sarcastic, help-rejecting, topic-switching, testing the agent): `builtin:adversarial`,
# a robustness set kept apart from the 32 (not seeded, not in `builtin`), written by the team like them.
ADVERSARIAL_PATH = Path(__file__).parent / "data" / "adversarial_personas.jsonl"


def load_library(path: Path = LIBRARY_PATH, splits: tuple[str, ...] = SPLITS, all_needs: bool = True
                 ) -> list[Profile]:
    """The profiles of a library file, checked: every line a valid built-in profile with a split, every
    need category present. ValueError naming the file and each problem otherwise."""
    report = import_profiles(path)
    problems = [str(e) for e in report.errors]
    for p in report.profiles:
        if p.extra.get("split") not in splits:
            problems.append(f"line {report.line_of[p.id]}: extra.split: must be one of {', '.join(splits)}")
    missing = set(NEED_CATEGORIES) - {p.need_category for p in report.profiles} if all_needs else set()
    if missing:
        problems.append(f"the library lacks need categories: {', '.join(sorted(missing))}")
    if problems:
        raise ValueError(f"built-in personas {path}: " + "; ".join(problems))
    return report.profiles


BUILTIN_PROFILES: list[Profile] = load_library()
BUILTIN_IDS: tuple[str, ...] = tuple(p.id for p in BUILTIN_PROFILES)
ADVERSARIAL_PROFILES: list[Profile] = load_library(ADVERSARIAL_PATH, (ADVERSARIAL,), all_needs=False)
ADVERSARIAL_IDS: tuple[str, ...] = tuple(p.id for p in ADVERSARIAL_PROFILES)


def builtin_profiles(split: str | None = None) -> list[Profile]:
    """Fresh copies of the built-in profiles (all 32, or only those of `split`: "train", "heldout", or
    "adversarial", the robustness set)."""
    if split == ADVERSARIAL:
        return copy.deepcopy(ADVERSARIAL_PROFILES)
    if split is not None and split not in SPLITS:
        raise ValueError(f"split: unknown split {split!r}; one of {', '.join(SPLITS + (ADVERSARIAL,))}")
    return [copy.deepcopy(p) for p in BUILTIN_PROFILES if split is None or p.extra["split"] == split]


def is_builtin_id(profile_id: str) -> bool:
    """Whether `profile_id` names a built-in profile (the library or the adversarial set)."""
    return profile_id in BUILTIN_IDS or profile_id in ADVERSARIAL_IDS


def get_builtin(profile_id: str) -> Profile:
    """A fresh copy of one built-in profile by id (KeyError naming the id when unknown)."""
    for p in BUILTIN_PROFILES + ADVERSARIAL_PROFILES:
        if p.id == profile_id:
            return copy.deepcopy(p)
    raise KeyError(f"no built-in profile with id {profile_id!r}")
