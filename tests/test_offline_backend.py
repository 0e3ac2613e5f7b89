"""The offline backend: deterministic, explained, English only, batched across dialogues."""
import asyncio

import pytest
from conftest import make_sim_profile
from helpers import play_dialogue

from simulator.user.agent import SentientAgent
from simulator.user.backends import make_backend
from simulator.user.backends.offline import NOTICE, OfflineBackend, garbled_ratio, parroted_share
from simulator.user.rules import EmotionRules, get_rules

TAILORED = ["Covering forty extra shifts while training the person who then got promoted over you is a huge contribution.",
            "Rewriting the handover checklist the whole ward uses is real leadership; that's yours.",
            "You kept that ward running through the worst year. That's skilled, generous work.",
            "Training Jenna well, knowing it might cost you, says a lot about you.",
            "'Too valuable on the floor' means they know exactly how good you are."]


async def play(agent: SentientAgent, replies: list[str]):
    """The user turns after each reply (the opening left out)."""
    return (await play_dialogue(agent, replies))[1:]


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def backend():
    """Scorer v2: the components these tests pin are shared by v2 and v3, and TAILORED is written against the
    whole story (its first reply answers details the user has not told yet), which v3's coherence judgement
    rightly calls no answer to the message. v3 is covered in test_offline_v3.py and test_probes.py; the
    determinism, batching and threading tests below use the default (v3)."""
    return OfflineBackend(scorer="v2")


@pytest.mark.model
def test_deterministic_for_a_seed_and_varied_across_seeds(backend, sim_profile):
    a = run(play(SentientAgent(sim_profile, backend, seed=3), TAILORED))
    b = run(play(SentientAgent(sim_profile, make_backend("offline:v2"), seed=3), TAILORED))
    assert [t.to_dict() | {"latency_s": 0} for t in a] == [t.to_dict() | {"latency_s": 0} for t in b]
    texts = {tuple(t.text for t in run(play(SentientAgent(sim_profile, backend, seed=s), TAILORED))) for s in range(4)}
    assert len(texts) > 1
    # the emotion does not depend on the seed: only the wording does
    emos = {tuple(t.emotion for t in run(play(SentientAgent(sim_profile, backend, seed=s), TAILORED))) for s in range(3)}
    assert len(emos) == 1
    # the default scorer (v3, with the language model) is deterministic too
    v3 = [run(play(SentientAgent(sim_profile, make_backend("offline"), seed=3), TAILORED[:3])) for _ in range(2)]
    assert [(t.text, t.emotion, t.inner["components"]) for t in v3[0]] == \
        [(t.text, t.emotion, t.inner["components"]) for t in v3[1]]


@pytest.mark.model
def test_chinese_profile_is_refused(backend):
    with pytest.raises(ValueError, match="English profiles only"):
        SentientAgent(make_sim_profile(language="zh"), backend)


@pytest.mark.model
def test_every_change_is_explained(backend, sim_profile):
    turns = run(play(SentientAgent(sim_profile, backend), TAILORED[:2] + ["Just get over it, it's not a big deal."]))
    for t in turns:
        comps = t.inner["components"]
        assert comps and all({"measure", "points", "why"} <= set(c) for c in comps.values())
        assert round(sum(c["points"] for c in comps.values())) == t.inner["raw_change"]
        assert t.inner["activity"] and t.inner["TargetCompletion"] and t.inner["planning"]
    assert turns[-1].delta < 0 and turns[0].delta > 0


@pytest.mark.model
@pytest.mark.parametrize("reply,component", [
    ("", "empty"), ("#$%^ &*(( ))!! @@@ ~~~ ^^^ |||", "garbled"), ("xkcd qwrtp zzzvb mnbvc", "garbled"),
    ("What happened? Who got it? Why? When? How do you feel?", "questions"),
    ("As an AI language model I cannot feel emotions, but that sounds hard.", "disclaimer"),
    ("Okay, I have to go now. Bye!", "goodbye"),
    ("Everything happens for a reason, stay positive.", "cliche"),
    ("Why not just get over it? It's not a big deal.", "dismissal"),
    (" ".join(["I think you should consider many perspectives on this matter."] * 20), "length"),
])
def test_penalties(backend, sim_profile, reply, component):
    turn = run(play(SentientAgent(sim_profile, backend), [reply]))[0]
    assert component in turn.inner["components"], turn.inner["components"]
    assert turn.inner["components"][component]["points"] < 0 and turn.delta < 0
    if component in ("empty", "garbled"):
        assert turn.delta == -10  # very negative, clamped by the benchmark rules
        assert get_rules("training").apply(40, turn.inner["raw_change"])[1] < -10


@pytest.mark.model
def test_repeating_oneself_is_penalised(backend, sim_profile):
    turns = run(play(SentientAgent(sim_profile, backend), [TAILORED[0]] * 3))
    assert "repetition" not in turns[0].inner["components"]
    assert turns[1].inner["components"]["repetition"]["points"] < 0
    assert turns[1].delta < turns[0].delta


@pytest.mark.model
def test_parroting_the_user_is_penalised_and_earns_no_engagement(backend, sim_profile):
    agent = SentientAgent(sim_profile, backend)
    opening = run(agent.opening())
    swapped = opening.text.replace("I ", "you ").replace("my ", "your ").replace("I'm", "you're")
    turn = run(agent.respond([{"role": "user", "content": opening.text}], swapped))
    comps = turn.inner["components"]
    assert comps["parroting"]["points"] <= -1 and comps["engagement"]["points"] <= 0, comps
    assert "my own words" in comps["parroting"]["why"]
    # a short quote inside a reply of one's own is listening, not parroting
    quote = " ".join(opening.text.split()[:6])
    own = run(SentientAgent(sim_profile, backend).respond(
        [{"role": "user", "content": opening.text}],
        f'"{quote}" - that stays with me. ' + TAILORED[0]))
    assert "parroting" not in own.inner["components"]


def test_parroted_share_folds_pronouns():
    said = ["My sister took the car again and I had to walk to work in the rain."]
    assert parroted_share("Your sister took the car again and you had to walk to work in the rain.", said) == 1.0
    assert parroted_share("That is so unfair, after everything you do for her.", said) == 0.0
    assert parroted_share("", said) == 0.0 and parroted_share("walk to work", []) == 0.0


@pytest.mark.model
def test_engagement_credits_only_what_the_user_has_told(backend, sim_profile):
    """A reply about a detail the user has not told yet gets no credit for it: the policy cannot know it."""
    agent = SentientAgent(sim_profile, backend)
    opening = run(agent.opening())
    untold = [e for e in sim_profile.extra["events"] if e not in opening.text][-1]
    history = [{"role": "user", "content": opening.text}]
    about_untold = run(agent.respond(history, untold.replace("I ", "you ").replace("my ", "your ")))
    told_history = history + [{"role": "assistant", "content": "Tell me more."}, {"role": "user", "content": untold},
                              {"role": "assistant", "content": "I'm listening."}, {"role": "user", "content": "Yeah."}]
    about_told = run(SentientAgent(sim_profile, backend).respond(told_history,
                                                                 untold.replace("I ", "you ").replace("my ", "your ")))
    assert about_told.inner["components"]["engagement"]["measure"] > about_untold.inner["components"]["engagement"]["measure"]


@pytest.mark.model
def test_user_speaks_from_the_persona_material_and_says_goodbye(backend, sim_profile):
    turns = run(play(SentientAgent(sim_profile, backend, rules=EmotionRules(start=60, max_turns=30)), TAILORED * 3))
    events = sim_profile.extra["events"]
    told = [e for e in events if any(e in t.text for t in turns)]
    assert len(told) >= 3
    assert all(sum(e in t.text for t in turns) <= 1 for e in events)  # never the same detail twice
    assert turns[-1].outcome == "success" and turns[-1].emotion == 100
    assert any(w in turns[-1].text.lower() for w in ("bye", "goodbye"))
    bad = run(play(SentientAgent(sim_profile, backend), ["Whatever."] * 10 + ["#$%^&*"] * 5))
    assert bad[-1].outcome == "failure" and any(w in bad[-1].text.lower() for w in ("bye", "goodbye"))


@pytest.mark.model
def test_background_sentences_when_no_events(backend):
    profile = make_sim_profile(extra={})
    turns = run(play(SentientAgent(profile, backend), TAILORED))
    assert any("I trained the person who got it." in t.text for t in turns)


@pytest.mark.model
def test_challenging_is_stricter(backend, sim_profile):
    mild = "That sounds like a really tough year, and it makes sense you feel hurt."
    std = run(play(SentientAgent(sim_profile, backend), [mild] * 3))
    hard = run(play(SentientAgent(sim_profile, backend, rules=get_rules("challenging")), [mild] * 3))
    assert hard[-1].emotion < std[-1].emotion


@pytest.mark.model
def test_concurrent_dialogues_are_batched_and_match_sequential(sim_profile):
    backend = OfflineBackend()
    seq = [run(play(SentientAgent(sim_profile, backend, seed=s), TAILORED[:3])) for s in range(4)]

    async def together():
        return await asyncio.gather(*[play(SentientAgent(sim_profile, backend, seed=s), TAILORED[:3])
                                      for s in range(4)])

    before = backend.batcher.batches
    par = run(together())
    assert [[(t.text, t.emotion) for t in d] for d in par] == [[(t.text, t.emotion) for t in d] for d in seq]
    assert backend.batcher.batches - before <= 3 + 1  # one encode per turn for all four dialogues


@pytest.mark.model
def test_fingerprint_names_the_environment(backend, sim_profile):
    fp = SentientAgent(sim_profile, backend).fingerprint()
    assert fp["backend"] == "offline" and fp["notice"] == NOTICE and "not comparable" in NOTICE
    assert fp["rules"]["start"] == 40 and fp["prompt_hash"]


def test_garbled_ratio():
    assert garbled_ratio("That sounds hard, honestly.") < 0.1
    assert garbled_ratio("$$$ ### @@@") > 0.9


@pytest.mark.model
def test_one_backend_shared_by_event_loops_in_threads(sim_profile):
    """The app runs dialogues from several threads, each with its own event loop, on one backend."""
    from concurrent.futures import ThreadPoolExecutor

    backend = OfflineBackend()
    expected = [t.emotion for t in run(play(SentientAgent(sim_profile, backend, seed=1), TAILORED[:3]))]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: [t.emotion for t in run(play(SentientAgent(sim_profile, backend, seed=s),
                                                                    TAILORED[:3]))], [1, 1, 1, 1]))
    assert got == [expected] * 4
