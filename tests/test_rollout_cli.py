"""`python -m trainer rollout` end to end (its main() in this process, real store, tiny policy, offline simulator)."""
from __future__ import annotations

import json

import pytest
from helpers import run_in_process

from simulator.personas.profile import Profile
from storage.dialogues import load_dialogue
from trainer import __main__ as trainer_main


def _profile(pid: str) -> Profile:
    return Profile(id=pid, name="Mia", persona="A 29-year-old teacher who loves running.",
                   background="Her best friend stopped replying to her messages after an argument.",
                   hidden_need="She wants someone to listen.", need_category="just_listen",
                   personality="passive", first_line="I think my best friend is ignoring me.")


@pytest.fixture
def store_with_persona(store):
    from simulator.personas.store import save_profile

    save_profile(store, _profile("mia"), create=True)
    return store


@pytest.mark.model
def test_rollout_command_json(store_with_persona, db_url, tiny_model_dir):
    proc = run_in_process("trainer", "rollout", "--persona", "mia", "--group", "2", "--policy", str(tiny_model_dir),
                          "--simulator", "offline", "--max-turns", "2", "--max-new-tokens", "8", "--db", db_url,
                          "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2
    for row in rows:
        assert set(row) >= {"id", "persona", "turns", "final_emotion", "outcome", "error"}
        assert row["persona"] == "mia" and 1 <= row["turns"] <= 2 and row["outcome"]
        stored = load_dialogue(store_with_persona, row["id"])
        assert stored["status"] in ("finished", "failed") and stored["n_turns"] == row["turns"]
        assert stored["final_emotion"] == row["final_emotion"]
        assert stored["turns"][0]["text"] == "I think my best friend is ignoring me."
        # the one default rule set of every entry point, recorded with the dialogue
        assert row["rules"] == "standard" and stored["simulator_fingerprint"]["rules"]["name"] == "standard"
    assert "dialogues" in proc.stderr  # the progress bar


def test_every_entry_point_plays_the_same_default_rules():
    import argparse
    import inspect

    from app.services import play
    from simulator.user.rules import DEFAULT_RULES
    from trainer.cli import rollout

    parser = argparse.ArgumentParser()
    rollout.add_arguments(parser)
    assert parser.parse_args(["--persona", "x"]).rules == DEFAULT_RULES == "standard"
    assert inspect.signature(play.start_play).parameters["rules"].default == DEFAULT_RULES


def test_missing_persona_and_bad_policy_are_named(store_with_persona, db_url, tmp_path, capsys):
    code = trainer_main.main(["rollout", "--persona", "nobody", "--db", db_url])
    assert code == 2 and "nobody" in capsys.readouterr().err
    missing = tmp_path / "no_such_model"
    code = trainer_main.main(["rollout", "--persona", "mia", "--policy", str(missing), "--db", db_url])
    err = capsys.readouterr().err
    assert code == 2 and "not found" in err and str(missing) in err
    not_lm = tmp_path / "not_lm"
    not_lm.mkdir()
    (not_lm / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    code = trainer_main.main(["rollout", "--persona", "mia", "--policy", str(not_lm), "--db", db_url])
    assert code == 2 and "not a causal LM" in capsys.readouterr().err


def test_missing_command_module_disables_only_that_command(monkeypatch, capsys):
    monkeypatch.setitem(trainer_main.COMMANDS, "train", ("trainer.no_such_module", "train"))
    assert trainer_main.main(["train", "--help"]) == 2
    assert "trainer.no_such_module could not be imported" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        trainer_main.main(["rollout", "--help"])
    assert exc.value.code == 0 and "--persona" in capsys.readouterr().out
    assert trainer_main.main([]) == 2


def test_rollout_exits_non_zero_when_every_dialogue_failed(store_with_persona, db_url, tiny_model_dir):
    """A simulator that refuses every call (wrong API key): the dialogues are stored as failed and the
    command says so with exit status 1, so a script sees the outage."""
    from testkit.scripted_server import start_server

    with start_server(api_key="right-key", models=["sim"]) as server:
        proc = run_in_process("trainer", "rollout", "--persona", "mia", "--group", "2", "--policy",
                              str(tiny_model_dir), "--simulator", "openai:sim", "--simulator-base-url",
                              server.base_url, "--max-turns", "2", "--max-new-tokens", "8", "--db", db_url, "--json",
                              env={"OPENAI_API_KEY": "wrong-key"})
    assert proc.returncode == 1, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2 and all(r["status"] == "failed" and r["error"] for r in rows)
    assert "all 2 dialogue(s) failed" in proc.stderr


@pytest.mark.model
def test_built_in_persona_on_a_fresh_store(db_url, tiny_model_dir):
    """A store no command has opened yet: the built-in personas are seeded first, as the app does, so a
    built-in id works and the dialogue's persona is in the store."""
    from simulator.personas.builtin import BUILTIN_IDS, get_builtin
    from simulator.personas.store import get_profile, list_profiles
    from storage import make_store

    proc = run_in_process("trainer", "rollout", "--persona", "en-20-ahmed-yilmaz", "--policy", str(tiny_model_dir),
                          "--simulator", "offline:v2", "--max-turns", "1", "--max-new-tokens", "8", "--db", db_url,
                          "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    store = make_store(db_url)
    assert sorted(p.id for p in list_profiles(store)) == sorted(BUILTIN_IDS)
    assert get_profile(store, "en-20-ahmed-yilmaz") == get_builtin("en-20-ahmed-yilmaz")
    stored = load_dialogue(store, row["id"])
    assert stored["persona_id"] == "en-20-ahmed-yilmaz"
    assert stored["turns"][0]["text"] == get_builtin("en-20-ahmed-yilmaz").first_line
    store.dispose()
