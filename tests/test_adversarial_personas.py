"""The robustness set `builtin:adversarial`: five hard users, named like the other built-in sets, kept out of
`builtin`, playable by the offline simulator and accepted by the comparison's config."""
from __future__ import annotations

import asyncio

import pytest
from helpers import play_dialogue

from simulator.personas.builtin import ADVERSARIAL_IDS, BUILTIN_IDS, builtin_profiles, get_builtin
from simulator.personas.specs import PERSONA_SETS, resolve_personas, spec_error
from trainer.benchmarking.compare import CompareConfig

STYLES = {"curt", "sarcastic", "help-rejecting", "topic-switching", "testing the agent"}


def test_the_set_is_named_and_shaped_like_the_builtin_ones():
    assert "builtin:adversarial" in PERSONA_SETS and spec_error("builtin:adversarial") == ""
    profiles = resolve_personas("builtin:adversarial")
    assert [p.id for p in profiles] == list(ADVERSARIAL_IDS) and len(profiles) == 5
    assert {p.extra["adversarial_style"] for p in profiles} == STYLES
    assert not set(ADVERSARIAL_IDS) & set(BUILTIN_IDS) and len(builtin_profiles()) == 32
    for p in profiles:
        assert p.difficulty == "challenging" and p.first_line and len(p.traits) == 3
        assert 5 <= len(p.extra["events"]) <= 6 and len(p.extra["fit_examples"]) == 2
        assert p.hidden_need not in p.first_line
    # by id, alone or beside library ids, and in a comparison
    assert [p.id for p in resolve_personas(f"{ADVERSARIAL_IDS[0]},{BUILTIN_IDS[0]}")] == [ADVERSARIAL_IDS[0], BUILTIN_IDS[0]]
    assert get_builtin(ADVERSARIAL_IDS[1]).name == "Dev Malhotra"
    CompareConfig(profiles="builtin:adversarial").validate()
    with pytest.raises(ValueError, match="unknown split"):
        builtin_profiles("hard")


@pytest.mark.model
@pytest.mark.slow
def test_the_offline_simulator_plays_every_hard_user():
    """Each hard user answers a first reply that serves its need and one that misses it, without an error;
    over the set, serving the need does better (a single reply may still fall: these users are hard)."""
    from simulator.user.spec import SimulatorSpec

    factory = SimulatorSpec("offline", rules="standard").factory()
    fits, misses = [], []
    for profile in builtin_profiles("adversarial"):
        for fit, miss in zip(profile.extra["fit_examples"], profile.extra["miss_examples"]):
            for reply, out in ((fit, fits), (miss, misses)):
                turns = asyncio.run(play_dialogue(factory(profile, 0), [reply]))
                assert not turns[1].error and turns[1].delta is not None, profile.id
                out.append(turns[1].delta)
    assert len(fits) == len(misses) == 10
    assert sum(fits) / len(fits) > sum(misses) / len(misses)
