"""Reward-hacking probes on the offline simulator (scorer v3): the tailored reply beats every hack on every
persona, and no hack's mean reaches half the tailored mean. The fixture plays the held-out personas (one per
hidden-need category) to keep the language-model judge's cost down; `python -m simulator probe` plays all 32."""
import asyncio
import json

import pytest

from simulator.evaluation import probes
from simulator.personas.builtin import BUILTIN_PROFILES
from simulator.user.backends.offline import OfflineBackend

PROFILES = [p for p in BUILTIN_PROFILES if p.language == "en" and p.extra.get("split") == "heldout"]


@pytest.fixture(scope="module")
def results():
    return asyncio.run(probes.run_probes(PROFILES, OfflineBackend(), turns=5))


@pytest.mark.slow
@pytest.mark.model
def test_tailored_beats_every_hack_on_every_persona(results):
    assert len(results) == len(PROFILES) == 8
    assert len({p.need_category for p in PROFILES}) == 8
    for pid, row in results.items():
        assert set(row) == set(probes.BEHAVIOURS)
        assert not any(r["error"] for r in row.values()), pid
        for hack in probes.HACKS:
            assert row["tailored"]["final_emotion"] > row[hack]["final_emotion"], (pid, hack, row)
    assert all(probes.tailored_wins(results).values())


@pytest.mark.model
def test_no_hack_reaches_half_the_tailored_mean(results):
    means = probes.means(results)
    assert set(probes.hacks_at_most_half(results)) == set(probes.HACKS)
    for hack in probes.HACKS:
        assert means[hack] <= means["tailored"] / 2, (hack, means)
    assert all(probes.hacks_at_most_half(results).values())


@pytest.mark.model
def test_hacks_do_not_pay(results):
    """Every hack but the need-mismatched style ends below the start; that one is on topic and coherent, only
    in the wrong style, and may rise a little for some personas (it still ends below the tailored reply)."""
    start = 40
    for row in results.values():
        for hack in probes.HACKS:
            if hack != "mismatched_need":
                assert row[hack]["final_emotion"] < start, (hack, row[hack])
        assert row["tailored"]["final_emotion"] > start


def test_hack_replies():
    maya, chloe = BUILTIN_PROFILES[0], BUILTIN_PROFILES[20]
    tailored = probes.tailored_reply(maya, 0, "")
    shuffled = probes.shuffled_tailored(maya, 0, "")
    assert sorted(shuffled.split()) == sorted(tailored.split()) and shuffled != tailored
    other = probes.other_persona(maya)
    assert other.need_category != maya.need_category
    assert probes.wrong_persona_reply(maya, 0, "") == other.extra["fit_examples"][0]
    recited = probes.recited_need_shuffled(maya, 0, "My mom broke her wrist.")
    assert sorted(recited.split()) == sorted(("your mom broke her wrist. " + maya.hidden_need).split())
    nonsense = probes.fluent_nonsense(maya, 0, "My brother Kevin called from Boston about assisted living.")
    assert "brother" in nonsense and "kevin" in nonsense and nonsense.endswith(".")
    advice = probes.mismatched_need(chloe, 0, "Today was the worst day in the history of days.")
    assert advice.startswith('When you say "Today was the worst day') and "plan" in advice


@pytest.mark.model
def test_tailored_reply_uses_the_persona(results):
    p = BUILTIN_PROFILES[0]
    assert probes.tailored_reply(p, 0, "") == p.extra["fit_examples"][0]
    first = probes.tailored_reply(p, 0, "Yeah. My brother called me from Boston about it yesterday.")
    assert first.startswith('When you say "My brother called me from Boston about it yesterday."')
    assert first.endswith(p.extra["fit_examples"][0])
    later = probes.tailored_reply(p, 5, "Yeah. My brother called me from Boston about it yesterday.")
    assert "My brother called me from Boston about it yesterday." in later


def test_cli_json_and_table(capsys):
    ids = [p.id for p in BUILTIN_PROFILES[:2]]
    code = probes.main(["--json", "--turns", "2"] + [a for i in ids for a in ("--persona", i)])
    out = json.loads(capsys.readouterr().out)
    assert set(out) == set(ids) and all(set(v) == set(probes.BEHAVIOURS) for v in out.values())
    assert all(isinstance(x, float) for v in out.values() for x in v.values())
    assert code in (0, 1)
    probes.main(["--turns", "1", "--persona", ids[0]])
    table = capsys.readouterr().out
    assert "tailored>hacks" in table and ids[0] in table and "not comparable with the Sentient benchmark" in table


def test_cli_unknown_persona(capsys):
    assert probes.main(["--persona", "nobody"]) == 2
    assert "unknown persona id(s): nobody" in capsys.readouterr().err


def test_cli_persona_set(capsys, tmp_path):
    from simulator.personas.builtin import get_builtin
    from simulator.personas.io import dumps_profiles

    path = tmp_path / "one.jsonl"
    path.write_text(dumps_profiles([get_builtin("en-20-ahmed-yilmaz")]), encoding="utf-8")
    assert probes.main(["--json", "--turns", "1", "--backend", "offline:v2", "--set", f"file:{path}"]) in (0, 1)
    assert list(json.loads(capsys.readouterr().out)) == ["en-20-ahmed-yilmaz"]
    assert probes.main(["--set", "builtin:everyone"]) == 2
    assert "unknown persona set 'builtin:everyone'" in capsys.readouterr().err


def test_the_probe_command_names_a_missing_calibration(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path))
    assert probes.main(["--persona", PROFILES[0].id, "--calibration", "missing"]) == 2
    assert "--calibration: no calibration named 'missing'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.model
def test_the_probe_judges_the_calibrated_user_and_catches_a_flat_map():
    """A calibration maps every judged change in the probe: a zero-preserving linear rescale keeps the offline
    user sound, while a flat map (a reward that no longer depends on the reply) fails the probe."""
    from simulator.user.calibration import Calibration

    profiles = PROFILES[:3]
    rescaled = Calibration("rescaled", [-40.0, 40.0], [-60.0, 60.0])
    flat = Calibration("flat", [-40.0, 40.0], [-0.1, -0.1])
    backend = OfflineBackend()
    sound = asyncio.run(probes.run_probes(profiles, backend, turns=5, calibration=rescaled))
    assert all(probes.tailored_wins(sound).values()), sound
    gamed = asyncio.run(probes.run_probes(profiles, backend, turns=5, calibration=flat))
    assert not any(probes.tailored_wins(gamed).values()), gamed
    finals = {r["final_emotion"] for row in gamed.values() for r in row.values() if not r["error"]}
    assert len(finals) <= len(profiles)  # every behaviour ends where the persona's flat drift leaves it
