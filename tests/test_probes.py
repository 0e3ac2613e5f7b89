"""Reward-hacking probes on the offline simulator: the tailored reply beats every hack on every persona."""
import asyncio
import json

import pytest

from simulator import probes
from simulator.backends.offline import OfflineBackend
from simulator.builtin_personas import BUILTIN_PROFILES


@pytest.fixture(scope="module")
def results():
    profiles = [p for p in BUILTIN_PROFILES if p.language == "en"]
    return asyncio.run(probes.run_probes(profiles, OfflineBackend(), turns=5))


def test_tailored_beats_every_hack_on_every_persona(results):
    assert len(results) == len([p for p in BUILTIN_PROFILES if p.language == "en"]) >= 24
    for pid, row in results.items():
        assert set(row) == set(probes.BEHAVIOURS)
        assert not any(r["error"] for r in row.values()), pid
        for hack in probes.HACKS:
            assert row["tailored"]["final_emotion"] > row[hack]["final_emotion"], (pid, hack, row)
    assert all(probes.tailored_wins(results).values())


def test_hacks_do_not_pay(results):
    start = 40
    for row in results.values():
        for hack in ("empty", "garbled", "five_questions", "early_goodbye", "generic_empathy", "very_long", "echo"):
            assert row[hack]["final_emotion"] < start, (hack, row[hack])
        assert row["tailored"]["final_emotion"] > start


def test_tailored_reply_uses_the_persona(results):
    p = BUILTIN_PROFILES[0]
    assert probes.tailored_reply(p, 0, "") == p.extra["fit_examples"][0]
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
