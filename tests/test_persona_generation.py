"""LLM persona generation against the scripted OpenAI-compatible server: the spec and its plan, the call with
its JSON schema and one repair, the invalid / leak / duplicate paths, the stored generation and its review
(accept, edit then accept, reject, regenerate, accept all valid), cancel, and the command line."""
from __future__ import annotations

import json
import threading

import pytest
import yaml

from simulator.__main__ import main
from simulator.llm.prompting import load_prompt_file
from simulator.personas import generation_store
from simulator.personas import store as persona_store
from simulator.personas.builtin import BUILTIN_PROFILES
from simulator.personas.generation import PROMPT_DIR, SpecError, plan_slots, read_answer, share_counts, spec_from_dict
from simulator.personas.profile import ProfileError
from testkit.scripted_server import start_server

# one slot per path: valid, repaired, always invalid, duplicate of a built-in persona, leaking first line, valid
MIXED = {"count": 6, "seed": 3, "needs": ["just_listen", "sincere_praise"], "personalities": ["negative", "passive"],
         "topics": ["a lost job", "gen-mode:invalid_once a move", "gen-mode:invalid a debt",
                    "gen-mode:duplicate a fight", "gen-mode:leak an exam", "a quiet house"]}


def _generate(capsys, server, spec_path, db_url, *extra: str) -> tuple[int, dict, str]:
    code = main(["personas", "generate", "--spec", str(spec_path), "--base-url", server.base_url, "--model",
                 "scripted", "--db", db_url, "--json", *extra])
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    return code, json.loads(lines[-1]) if lines else {}, err


def _spec_file(tmp_path, data: dict) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _by_topic(cands: list[dict]) -> dict[str, dict]:
    """Candidates by their slot's scripted mode, or the last word of its topic for the valid ones."""
    keyed = {}
    for c in cands:
        topic = c["plan"]["topic"]
        keyed[topic.split()[0][9:] if topic.startswith("gen-mode:") else topic.split()[-1]] = c
    return keyed


# ------------------------------------------------------------------------------------------------ spec and plan
def test_shares_become_counts_and_the_plan_is_deterministic():
    items = [("just_listen", 0.5), ("sincere_praise", 0.3), ("deep_empathy", 0.2)]
    import random

    assert share_counts(items, 10, random.Random(0)) == [5, 3, 2]
    assert sum(share_counts([("a", None), ("b", None), ("c", None)], 10, random.Random(0))) == 10
    spec = spec_from_dict({"count": 10, "seed": 7, "needs": {"just_listen": 0.5, "sincere_praise": 0.3,
                                                             "deep_empathy": 0.2},
                           "personalities": [{"value": "negative", "share": 0.6}, "passive"], "ages": ["20s", "60s"]})
    plan = plan_slots(spec)
    assert plan == plan_slots(spec_from_dict(spec.to_dict()))  # stored form plans the same
    needs = [s["need_category"] for s in plan]
    assert (needs.count("just_listen"), needs.count("sincere_praise"), needs.count("deep_empathy")) == (5, 3, 2)
    assert [s["personality"] for s in plan].count("negative") == 6
    assert {s["language"] for s in plan} == {"en"} and {s["age"] for s in plan} == {"20s", "60s"}
    assert all(s["topic"] is None for s in plan)
    other = plan_slots(spec_from_dict({**spec.to_dict(), "seed": 8}))
    assert [s["need_category"] for s in other] != needs and sorted(s["need_category"] for s in other) == sorted(needs)


@pytest.mark.parametrize("data, field, problem", [
    ({"count": 0}, "count", "from 1 to 500"),
    ({"count": 3, "needs": ["just_listen", "be_hugged"]}, "needs[1]", "unknown value 'be_hugged'"),
    ({"count": 3, "needs": {"just_listen": 0.5, "sincere_praise": 0.2}}, "needs", "the shares sum to 0.7"),
    ({"count": 3, "personalities": {"negative": 1.5}}, "personalities.negative", "share must be a number in (0, 1]"),
    ({"count": 3, "languages": ["en", "en"]}, "languages[1]", "listed twice"),
    ({"count": 3, "topics": "   "}, "topics[0]", "non-empty text"),
    ({"count": 3, "colour": "red"}, "spec", "unknown field(s) colour"),
])
def test_a_bad_spec_names_the_field(data, field, problem):
    with pytest.raises(SpecError) as e:
        spec_from_dict(data)
    assert problem in e.value.errors[field]


def test_an_answer_is_validated_like_an_imported_profile():
    slot = {"slot": 0, "need_category": "just_listen", "personality": "passive", "language": "en"}
    good = {"name": "Ana", "persona": "Ana, 30.", "background": "Lost her job.", "hidden_need": "To be heard.",
            "need_category": "just_listen", "personality": "passive", "language": "en", "traits": ["shy"],
            "first_line": "Hi."}
    p = read_answer("Here you go:\n```json\n" + json.dumps(good) + "\n```", slot, "gen1-0")
    assert (p.id, p.name, p.source) == ("gen1-0", "Ana", "generated")
    with pytest.raises(ValueError, match="personality: is 'negative' but this persona was asked for 'passive'"):
        read_answer(json.dumps({**good, "personality": "negative"}), slot, "gen1-0")
    with pytest.raises(ValueError, match="traits: has 4 traits; at most 3"):
        read_answer(json.dumps({**good, "traits": ["a", "b", "c", "d"]}), slot, "gen1-0")
    with pytest.raises(ValueError, match="no JSON object found"):
        read_answer("Ana is a nice person.", slot, "gen1-0")
    with pytest.raises(ValueError, match="the JSON object is incomplete or malformed .*cut off at max_tokens"):
        read_answer(json.dumps(good)[:80], slot, "gen1-0")


# ------------------------------------------------------------------------------------------------ generation
@pytest.mark.model
def test_generate_covers_repair_invalid_duplicate_and_leak_and_records_what_produced_it(tmp_path, db_url, capsys):
    spec = _spec_file(tmp_path, MIXED)
    with start_server() as server:
        code, out, err = _generate(capsys, server, spec, db_url)
        bodies = [b for b in server.requests if "response_format" in b]
    assert code == 0, err
    assert out["counts"] == {"pending": 3, "accepted": 0, "rejected": 0, "invalid": 2, "duplicate": 1}
    assert "dedupe threshold 0.90" in err and "[6/6]" in err
    schema = bodies[0]["response_format"]["json_schema"]
    assert schema["name"] == "persona_profile" and len(schema["schema"]["properties"]["need_category"]["enum"]) == 1

    store = persona_store.open_store(db_url)
    cands = _by_topic(generation_store.list_candidates(store, out["generation_id"]))
    assert set(cands) == {"job", "invalid_once", "invalid", "duplicate", "leak", "house"}
    assert cands["job"]["status"] == "pending" and cands["job"]["attempts"] == 1 and cands["job"]["similarity"] < 0.9
    assert cands["invalid_once"]["status"] == "pending" and cands["invalid_once"]["attempts"] == 2  # repaired
    assert cands["invalid"]["status"] == "invalid" and cands["invalid"]["attempts"] == 2
    assert cands["invalid"]["validation_error"] == "hidden_need: is required (missing) (after the repair request)"
    dup = cands["duplicate"]
    assert dup["status"] == "duplicate" and dup["nearest_id"] == BUILTIN_PROFILES[0].id and dup["similarity"] > 0.99
    leak = cands["leak"]
    assert leak["status"] == "invalid" and leak["validation_error"].startswith("first_line: may reveal the hidden need")
    assert leak["lint_warnings"] >= 1
    for c in cands.values():  # every candidate names the slot it was asked for
        assert c["profile"].get("need_category", c["plan"]["need_category"]) == c["plan"]["need_category"]

    g = generation_store.get_generation(store, out["generation_id"])
    assert (g["status"], g["n_planned"], g["n_done"], g["model"]) == ("finished", 6, 6, "scripted")
    assert g["endpoint"] == server.base_url.split("/")[2] and g["finished_at"] is not None
    assert (g["prompt_version"], g["prompt_sha256"]) == ("v1", load_prompt_file(PROMPT_DIR, "v1")["sha256"])
    assert g["spec"]["count"] == 6 and g["settings"]["threshold"] == 0.9 and g["code_version"]
    assert "api_key" not in json.dumps(g["settings"]).replace("api_key_env", "")


@pytest.mark.model
def test_review_accept_edit_reject_regenerate(tmp_path, db_url, capsys):
    spec = _spec_file(tmp_path, MIXED)
    with start_server() as server:
        code, out, _ = _generate(capsys, server, spec, db_url)
        store = persona_store.open_store(db_url)
        gid = out["generation_id"]
        cands = _by_topic(generation_store.list_candidates(store, gid))

        accepted = generation_store.accept_candidate(store, cands["job"]["id"])
        stored = persona_store.get_profile(store, accepted.id)
        assert stored.extra == {"generation_id": gid, "candidate_id": cands["job"]["id"]}
        assert stored.source == "generated"
        with pytest.raises(ProfileError, match="already accepted"):
            generation_store.accept_candidate(store, cands["job"]["id"])

        with pytest.raises(ProfileError, match="is invalid .*edit it first"):
            generation_store.accept_candidate(store, cands["invalid"]["id"])
        edited = generation_store.candidate_profile(generation_store.get_candidate(store, cands["invalid"]["id"]))
        edited.hidden_need = ""
        with pytest.raises(ProfileError) as e:  # still invalid: nothing stored
            generation_store.accept_candidate(store, cands["invalid"]["id"], edited)
        assert "hidden_need" in e.value.errors
        assert generation_store.get_candidate(store, cands["invalid"]["id"])["status"] == "invalid"
        edited.hidden_need = "They want someone to just listen."
        fixed = generation_store.accept_candidate(store, cands["invalid"]["id"], edited)
        assert persona_store.get_profile(store, fixed.id).hidden_need == "They want someone to just listen."

        generation_store.reject_candidate(store, cands["duplicate"]["id"])
        before = generation_store.get_candidate(store, cands["house"]["id"])
        # the generator is rebuilt from the recorded settings
        again = generation_store.regenerate_candidate(store, before["id"])
        assert again["regenerated"] == 1 and again["status"] == "pending"
        assert again["profile"]["name"] != before["profile"]["name"]
        assert "Variation 2" in server.requests[-1]["messages"][1]["content"]

    taken = generation_store.accept_all_valid(store, gid)
    assert {p.extra["candidate_id"] for p in taken} == {cands["invalid_once"]["id"], cands["house"]["id"]}
    g = generation_store.get_generation(store, gid)
    assert g["counts"] == {"pending": 0, "accepted": 4, "rejected": 1, "invalid": 1, "duplicate": 0}


@pytest.mark.model
def test_accept_flag_stores_the_valid_candidates_and_a_second_batch_dedupes_against_them(tmp_path, db_url, capsys):
    spec = _spec_file(tmp_path, {"count": 3, "seed": 1, "needs": ["just_listen"]})
    with start_server() as server:
        code, first, _ = _generate(capsys, server, spec, db_url, "--accept")
        assert code == 0 and len(first["accepted"]) == 3
        server.persona_writer = type(server.persona_writer)()  # the same three stories again
        code, second, err = _generate(capsys, server, spec, db_url)
    assert second["counts"]["duplicate"] == 3, err
    nearest = {c["nearest_id"] for c in second["candidates"]}
    assert nearest == set(first["accepted"])
    assert all(c["similarity"] > 0.99 for c in second["candidates"])
    listed = {p.id: p for p in persona_store.list_profiles(persona_store.open_store(db_url))}
    assert all(listed[i].extra["generation_id"] == first["generation_id"] for i in first["accepted"])


@pytest.mark.model
def test_a_lower_threshold_marks_more_duplicates(tmp_path, db_url, capsys):
    spec = _spec_file(tmp_path, {"count": 3, "seed": 1})
    with start_server() as server:
        _, out, err = _generate(capsys, server, spec, db_url, "--dedupe-threshold", "0.05")
    assert out["counts"]["duplicate"] == 3 and out["dedupe_threshold"] == 0.05
    assert "dedupe threshold 0.05" in err


@pytest.mark.model
def test_cancel_stops_further_calls_and_keeps_what_was_made(tmp_path, db_url):
    store = persona_store.open_store(db_url)
    spec = spec_from_dict({"count": 5, "seed": 0})
    cancel = threading.Event()
    with start_server(latency_s=0.2) as server:
        gen = generation_store.make_generator(server.base_url, "scripted", max_in_flight=1)
        gid = generation_store.run_generation(store, spec, gen, on_result=lambda *_: cancel.set(),
                                              cancelled=cancel.is_set)
        calls = server.calls
    g = generation_store.get_generation(store, gid)
    assert g["status"] == "cancelled" and g["n_done"] == 1 and calls == 1
    assert len(generation_store.list_candidates(store, gid)) == 1


@pytest.mark.model
def test_a_stopped_generation_continues_with_only_the_slots_not_made(db_url):
    store = persona_store.open_store(db_url)
    spec = spec_from_dict({"count": 5, "seed": 0})
    cancel = threading.Event()
    with start_server() as server:
        gen = generation_store.make_generator(server.base_url, "scripted", max_in_flight=1)
        gid = generation_store.run_generation(store, spec, gen,
                                              on_result=lambda _c, done, _n: done >= 2 and cancel.set(),
                                              cancelled=cancel.is_set)
        first = [c["slot"] for c in generation_store.list_candidates(store, gid)]
        assert generation_store.get_generation(store, gid)["status"] == "cancelled" and len(first) == 2
        seen = []
        generation_store.run_generation(store, spec, gen,
                                        on_result=lambda c, done, n: seen.append((c.slot["slot"], done, n)),
                                        generation_id=gid)
        calls = server.calls
    g = generation_store.get_generation(store, gid)
    assert g["status"] == "finished" and g["n_done"] == 5 and calls == 5
    assert [c["slot"] for c in generation_store.list_candidates(store, gid)] == [0, 1, 2, 3, 4]
    assert sorted(s for s, _, _ in seen) == sorted(set(range(5)) - set(first))
    assert [d for _, d, _ in seen] == [3, 4, 5]


@pytest.mark.model
def test_an_endpoint_that_fails_leaves_an_error_on_every_candidate(tmp_path, db_url, capsys):
    spec = _spec_file(tmp_path, {"count": 2})
    with start_server(models=["another"]) as server:
        code, out, err = _generate(capsys, server, spec, db_url)
    assert code == 1 and out["counts"]["invalid"] == 2
    assert all("does not know model 'scripted'" in c["validation_error"] for c in out["candidates"])


@pytest.mark.parametrize("args, message", [
    (["--base-url", "localhost:8000"], "--base-url: 'localhost:8000' is not an http(s) URL"),
    (["--dedupe-threshold", "1.5"], "--dedupe-threshold: must be in (0, 1], got 1.5"),
    (["--api-key-env", "RLVER_TEST_NO_SUCH_KEY"], "--api-key-env: the environment variable RLVER_TEST_NO_SUCH_KEY"),
    (["--max-in-flight", "0"], "--max-in-flight: must be at least 1"),
])
def test_bad_options_are_named(tmp_path, db_url, capsys, args, message):
    spec = _spec_file(tmp_path, {"count": 1})
    base = {"--base-url": "http://127.0.0.1:9/v1"}
    opts = dict(base, **dict(zip(args[::2], args[1::2])))
    code = main(["personas", "generate", "--spec", spec, "--model", "m", "--db", db_url,
                 *[x for kv in opts.items() for x in kv]])
    assert code == 2 and message in capsys.readouterr().err


def test_a_bad_spec_file_is_named_with_its_field(tmp_path, db_url, capsys):
    spec = _spec_file(tmp_path, {"count": 2, "needs": ["hugs"]})
    code = main(["personas", "generate", "--spec", spec, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--db", db_url])
    err = capsys.readouterr().err
    assert code == 2 and f"--spec: {spec}: needs[0]: unknown value 'hugs'" in err
    code = main(["personas", "generate", "--spec", str(tmp_path / "none.yaml"), "--base-url", "http://x/v1",
                 "--model", "m", "--db", db_url])
    assert code == 2 and "--spec: " in capsys.readouterr().err


def test_an_existing_store_gets_the_generation_tables_when_opened(db_url):
    from sqlalchemy import inspect, text

    from storage import make_store

    old = make_store(db_url)
    with old.begin() as conn:  # a store made before persona generation (and schema migrations) existed
        conn.execute(text("DROP TABLE persona_candidate"))
        conn.execute(text("DROP TABLE persona_generation"))
        conn.execute(text("DROP TABLE alembic_version"))
    persona_store.seed_builtin(old)
    old.dispose()
    store = make_store(db_url)
    assert {"persona_generation", "persona_candidate"} <= set(inspect(store).get_table_names())
    assert persona_store.count_profiles(store) == len(BUILTIN_PROFILES)
