"""Offline scorer v3: the SmolLM2 coherence judgement, need mismatch, v2 kept selectable and unchanged."""
import asyncio
import json
from pathlib import Path

import pytest

from simulator.evaluation import probes
from simulator.personas.builtin import BUILTIN_PROFILES
from simulator.user.backends import coherence, make_backend, spec_error
from simulator.user.backends.offline import OfflineBackend
from simulator.user.rules import get_rules

CALIBRATION = Path(__file__).parent / "data" / "offline_calibration.jsonl"
# one built-in persona per hidden-need category (the held-out split)
HELDOUT = [p for p in BUILTIN_PROFILES if p.extra.get("split") == "heldout"]


def judge(backend, profile, reply: str, user: str | None = None) -> dict:
    """The emotion step of `reply` after one user message (the persona's first line by default)."""
    history = [{"role": "user", "content": user if user is not None else profile.first_line}]
    return asyncio.run(backend.emotion_step(profile, get_rules("standard"), 40.0, history, reply, {}))


def raw(analysis: dict) -> float:
    return sum(c["points"] for c in analysis["components"].values())


@pytest.fixture(scope="module")
def v3():
    return make_backend("offline")


@pytest.fixture(scope="module")
def v2():
    return make_backend("offline:v2")


@pytest.mark.model
def test_default_is_v3_and_v2_stays_selectable(v3, v2):
    assert isinstance(v3, OfflineBackend) and v3.scorer == "v3" and v2.scorer == "v2"
    assert v3.fingerprint()["scorer"] == "offline-v3" and "SmolLM2-135M-Instruct" in v3.fingerprint()["model"]
    # v2's fingerprint is the one old runs were stored with
    assert v2.fingerprint() == {"backend": "offline", "model": "all-MiniLM-L6-v2", "endpoint": "", "sampling": {},
                                "scorer": "offline-v2", "notice": v2.fingerprint()["notice"]}
    assert make_backend("offline:v3").fingerprint() == v3.fingerprint()
    with pytest.raises(ValueError, match="unknown offline scorer 'v9'"):
        make_backend("offline:v9")
    assert spec_error("offline") == spec_error("offline:v2") == spec_error("openai:m") == ""
    assert "unknown simulator" in spec_error("offline:v9") and spec_error("")


# Component points of v2 recorded with the code before v3 existed (same replies, first line, standard rules).
V2_RECORDED = [
    ("en-01-maya-chen", "Both options protect something real: at home your mom keeps her routine. Maybe the question "
     "is which cost can be undone later.", 11.0,
     {"need_fit": 5.0, "warmth": 0.42, "persona_fit": 4.0, "engagement": 1.28}),
    ("en-21-chloe-martin", "Here's your plan: first, write down the problem. Second, book a meeting about it.", -8.0,
     {"need_fit": -2.0, "warmth": -2.49, "persona_fit": -1.75, "engagement": -1.53}),
    ("en-27-mei-lin-wong", "mom your slipped kitchen the floor on wrist broke her and", 1.0,
     {"need_fit": -2.0, "warmth": 0.75, "persona_fit": 1.59, "engagement": 0.28}),
    ("en-05-priya-raman", "That sounds hard. I'm here for you.", -4.0,
     {"need_fit": -2.0, "warmth": 0.85, "persona_fit": -2.26, "engagement": -0.15}),
]


@pytest.mark.model
@pytest.mark.parametrize("pid,reply,change,points", V2_RECORDED)
def test_v2_is_unchanged(v2, pid, reply, change, points):
    profile = next(p for p in BUILTIN_PROFILES if p.id == pid)
    a = judge(v2, profile, reply)
    assert a["change"] == change
    assert {k: c["points"] for k, c in a["components"].items()} == pytest.approx(points, abs=0.011)


@pytest.mark.model
def test_coherence_is_a_named_component_that_gates_the_positive_ones(v3):
    maya = BUILTIN_PROFILES[0]
    good = judge(v3, maya, "Not random at all. 'Fine, mostly' sounds like there's a real trade-off hiding in there. "
                           "What's working about having her with you, and what is it costing you?")
    ok = good["components"]["coherence"]
    assert {"measure", "points", "why"} <= set(ok) and ok["measure"] == 1 and ok["points"] == 0
    assert "a coherent answer" in ok["why"]
    shuffled = judge(v3, BUILTIN_PROFILES[26], V2_RECORDED[2][1])  # v2 gave it +1
    c = shuffled["components"]["coherence"]
    assert c["points"] < -3 and c["measure"] < 0.5, c
    assert "does not read as sense" in c["why"] or "not an answer" in c["why"]
    for name in coherence.POSITIVE:
        comp = shuffled["components"].get(name)
        if comp and comp["points"] > 0:  # what is left is scaled by the gate
            assert "not a coherent answer" in comp["why"] and comp["points"] <= 1.59 * c["measure"] + 0.01
    assert shuffled["change"] < 0


@pytest.mark.model
@pytest.mark.parametrize("profile", HELDOUT, ids=lambda p: p.id)
def test_v3_ranks_the_tailored_reply_above_shuffled_recited_and_wrong_persona(v3, profile):
    user = profile.first_line
    tailored = raw(judge(v3, profile, probes.tailored_reply(profile, 0, user)))
    for hack in ("shuffled_tailored", "recited_need_shuffled", "wrong_persona", "fluent_nonsense", "echo"):
        hacked = raw(judge(v3, profile, probes.BEHAVIOURS[hack](profile, 0, user)))
        assert tailored > hacked, (hack, tailored, hacked)


@pytest.mark.model
def test_coherence_does_not_depend_on_the_batch():
    pairs = [("My dog died last week.", "I'm so sorry. How are you holding up without him?"),
             ("The promotion was announced today.", "week dog your I'm holding so without"),
             ("Five nights in a row again.", "That is a brutal rota; ask for a cap of three nights.")]
    together = coherence.coherence_sync(pairs)
    coherence._CACHE.clear()
    alone = [coherence.coherence_sync([p])[0] for p in reversed(pairs)][::-1]
    assert together.tolist() == [list(a) for a in alone]
    verdicts = [coherence.judge_coherence(*row) for row in together]
    assert verdicts[0].gate > verdicts[1].gate and verdicts[1].points < 0


@pytest.mark.model
def test_calibration_set_shape():
    rows = [json.loads(line) for line in CALIBRATION.read_text().splitlines() if line.strip()]
    assert len(rows) >= 300
    ids = {p.id for p in BUILTIN_PROFILES}
    assert all(r["persona"] in ids and r["label"] in ("good", "bad") and r["reply"].strip() and r["user"].strip()
               for r in rows)
    kinds = {r["kind"] for r in rows}
    assert {"tailored", "generic", "dismissive", "smollm2_t0.7", "smollm2_t1.0", "shuffled", "recited",
            "wrong_persona", "advice_dump", "flattery"} <= kinds
    assert len({(r["persona"], r["user"], r["reply"]) for r in rows}) == len(rows)  # no duplicates
