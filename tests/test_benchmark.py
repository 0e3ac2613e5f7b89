"""Benchmark runner: profile input, eval-run bookkeeping, leaderboard grouping and breakdowns."""
from __future__ import annotations

import json

import pytest

from simulator.evaluation.published import PUBLISHED, PUBLISHED_FINGERPRINT
from storage import EvalRun, session_scope
from storage.dialogues import finish_dialogue, start_dialogue
from trainer.benchmarking import benchmark, eval_runs, protocol
from trainer.benchmarking.benchmark import BenchmarkConfig, BenchmarkInputError


# ------------------------------------------------------------------------------------------ profiles
def test_builtin_profiles_and_limit():
    every = benchmark.load_profiles("builtin")
    assert len(every) >= 24 and all(p.first_line for p in every)
    assert [p.id for p in benchmark.load_profiles("builtin", limit=3)] == [p.id for p in every[:3]]
    heldout = benchmark.load_profiles("builtin:heldout")
    assert heldout and all(p.extra["split"] == "heldout" for p in heldout)


def test_profile_set_hash_depends_on_content_not_order():
    ps = benchmark.load_profiles("builtin", limit=4)
    assert benchmark.profile_set_hash(ps) == benchmark.profile_set_hash(list(reversed(ps)))
    assert benchmark.profile_set_hash(ps) != benchmark.profile_set_hash(ps[:3])


@pytest.mark.parametrize("content, expected", [
    (b"", "is empty"),
    (b"\n\n", "is empty"),
    (b'{"id": "a", "persona": "x"\n', "malformed JSON"),
    (b'[1, 2]\n', "expected a JSON object"),
    (b'{"hello": "world"}\n', "not a profile"),
    (b'{"id": "a", "name": "A", "persona": "p", "background": "b", "hidden_need": "h", '
     b'"need_category": "nonsense", "personality": "passive"}\n', "need_category"),
])
def test_bad_profile_files_give_clear_messages(tmp_path, content, expected):
    path = tmp_path / "profiles.jsonl"
    path.write_bytes(content)
    with pytest.raises(BenchmarkInputError) as e:
        benchmark.load_profiles(str(path))
    assert str(e.value).startswith("profiles: ") and expected in str(e.value)


def test_missing_profile_file(tmp_path):
    with pytest.raises(BenchmarkInputError, match="not found"):
        benchmark.load_profiles(str(tmp_path / "nope.jsonl"))


def test_profiles_file_in_rlver_format(shared_data):
    ps = benchmark.load_profiles(str(shared_data / "rlver" / "test_profile.jsonl"), limit=5)
    assert len(ps) == 5 and all(p.first_line for p in ps)


# -------------------------------------------------------------------------------------------- config
def test_config_validation_names_the_field():
    with pytest.raises(BenchmarkInputError, match="simulator"):
        BenchmarkConfig(simulator="gpt").validate()
    with pytest.raises(BenchmarkInputError, match="limit"):
        BenchmarkConfig(limit=-1).validate()
    with pytest.raises(BenchmarkInputError, match="unknown setting.*colour"):
        BenchmarkConfig.from_dict({"colour": "red"})
    cfg = BenchmarkConfig.from_dict({"policy": "openai:gpt-4.1", "limit": 3})
    assert BenchmarkConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_protocol_is_the_sentient_benchmark():
    r = protocol.protocol_rules()
    assert (r.start, r.max_delta, r.max_turns, r.success_at, r.failure_below) == (40.0, 10.0, 10, 100.0, 10.0)


# ------------------------------------------------------------------------------ leaderboard, breakdown
def _eval_run(store, fp_hash, ps_hash, finals, model="m", status="succeeded", profiles=None):
    """An eval run with scored dialogues, written as the runner writes them."""
    with session_scope(store) as s:
        r = EvalRun(model_ref=model, fingerprint_hash=fp_hash, simulator_fingerprint={"backend": fp_hash},
                    profile_set_hash=ps_hash, status="running")
        s.add(r)
        s.flush()
        run_id = r.id
    profiles = profiles or benchmark.load_profiles("builtin", limit=len(finals))
    for p, final in zip(profiles, finals):
        d = start_dialogue(store, persona_id=p.id, persona_snapshot=p.to_dict(), source="benchmark",
                           eval_run_id=run_id, fingerprint_hash=fp_hash)
        if final is None:
            finish_dialogue(store, d, "failed", None, outcome="error", error="simulator: timeout")
        else:
            finish_dialogue(store, d, "finished", final, outcome="max_turns")
    eval_runs.finish_eval_run(store, run_id, status)
    return run_id


def test_finish_eval_run_counts_errors_in_n(store):
    run_id = _eval_run(store, "fpA", "ps1", [100, 50, None, 5])
    r = eval_runs.get_eval_run(store, run_id)
    assert (r["n"], r["n_errors"], r["success"], r["failure"]) == (4, 1, 1, 2)
    assert r["score"] == pytest.approx(38.8)  # (100 + 50 + 0 + 5) / 4 = 38.75 -> 38.8 (half up)
    assert r["ci_low"] <= r["score"] <= r["ci_high"]
    rows = eval_runs.eval_run_dialogues(store, run_id)
    assert [d["final_emotion"] for d in rows] == [100, 50, None, 5]
    assert rows[2]["error"] == "simulator: timeout" and rows[2]["status"] == "failed"


def test_leaderboard_never_ranks_different_fingerprints_together(store):
    a1 = _eval_run(store, "fpA", "ps1", [80, 60], model="a1")
    a2 = _eval_run(store, "fpA", "ps1", [90, 90], model="a2")
    b1 = _eval_run(store, "fpB", "ps1", [100, 100], model="b1")
    _eval_run(store, "fpA", "ps1", [10, 10], model="cut", status="interrupted")  # unfinished: not ranked
    groups = eval_runs.leaderboard(store)
    lab = [g for g in groups if not g["published"]]
    assert sorted(g["fingerprint_hash"] for g in lab) == ["fpA", "fpB"]
    for g in lab:
        assert {r["fingerprint_hash"] for r in g["rows"]} == {g["fingerprint_hash"]}
    group_a = next(g for g in lab if g["fingerprint_hash"] == "fpA")
    assert [(r["id"], r["rank"]) for r in group_a["rows"]] == [(a2, 1), (a1, 2)]
    group_b = next(g for g in lab if g["fingerprint_hash"] == "fpB")
    assert [(r["id"], r["rank"]) for r in group_b["rows"]] == [(b1, 1)]
    pub = groups[-1]
    assert pub["published"] and pub["fingerprint_hash"] == PUBLISHED_FINGERPRINT
    assert len(pub["rows"]) == len(PUBLISHED) and all(r["published"] for r in pub["rows"])
    assert pub["rows"][0]["score"] == 79.9 and "DeepSeek-V3" in pub["rows"][0]["simulator"]
    assert eval_runs.leaderboard(store, include_published=False) == lab


def test_leaderboard_separates_profile_sets(store):
    _eval_run(store, "fpA", "ps1", [80])
    _eval_run(store, "fpA", "ps2", [20])
    lab = eval_runs.leaderboard(store, include_published=False)
    assert sorted(g["profile_set_hash"] for g in lab) == ["ps1", "ps2"]
    assert all(len(g["rows"]) == 1 for g in lab)


def test_breakdown_by_need_and_personality(store):
    profiles = benchmark.load_profiles("builtin")
    by_need = {}
    for p in profiles:
        by_need.setdefault(p.need_category, p)
    chosen = list(by_need.values())[:3]
    run_id = _eval_run(store, "fpA", "ps1", [100, 40, None], profiles=chosen)
    b = eval_runs.breakdown(store, run_id)
    need = {row["key"]: row for row in b["need"]}
    assert set(need) == {p.need_category for p in chosen}
    assert need[chosen[0].need_category]["score"] == 100 and need[chosen[0].need_category]["success"] == 1
    assert need[chosen[2].need_category]["n_errors"] == 1 and need[chosen[2].need_category]["failure"] == 1
    assert all(row["label"] for row in b["need"])
    assert sum(row["n"] for row in b["personality"]) == 3
    assert {row["key"] for row in b["personality"]} == {p.personality for p in chosen}


def test_cut_off_dialogues_are_closed_and_not_scored(store):
    run_id = _eval_run(store, "fpA", "ps1", [70])
    p = benchmark.load_profiles("builtin")[5]
    d = start_dialogue(store, persona_id=p.id, persona_snapshot=p.to_dict(), source="benchmark", eval_run_id=run_id)
    assert eval_runs.done_profile_ids(store, run_id) == {benchmark.load_profiles("builtin")[0].id}
    assert eval_runs.close_cut_off_dialogues(store, run_id) == 1
    from storage.dialogues import load_dialogue
    assert load_dialogue(store, d)["status"] == "cancelled"
    assert len(eval_runs.scored_dialogues(store, run_id)) == 1
