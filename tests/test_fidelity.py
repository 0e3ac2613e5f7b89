"""Fidelity report: emotion-change histograms vs the published DeepSeek-V3 one, from files and from the store.

Measured bounds (simulator/evaluation/fidelity.py explains the two distances):
- the published GPT-4.1 and Qwen2.5-72B transcripts (two of the ten files behind the published histogram)
  are within 0.1 of it within sign (0.067 and 0.084) and 100% +-5 / +-10; their plain total variation
  (0.203 and 0.243) is almost all sign balance: GPT-4.1's replies earn rises 73% of the time, Qwen's 29%,
  the ten files 53%, and TV <= sign-share distance + within-sign distance;
- the offline simulator (its changes are any integer in [-10, +10]) is above 0.5 on both distances.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from helpers import run_in_process

from simulator.evaluation import fidelity, transcripts
from simulator.evaluation.published import PUBLISHED_CHANGES
from storage import Dialogue
from storage.dialogues import add_turn, finish_dialogue, start_dialogue

SAGE = ("gpt-4.1", "qwen2.5-72b")


def test_distances_on_small_histograms():
    assert fidelity.histogram([5, 5.0, -10, 2.5, 5.0000001]) == {-10: 1, 2.5: 1, 5: 3}
    assert fidelity.total_variation({5: 1}, {5: 3}) == 0.0
    assert fidelity.total_variation({5: 1}, {-5: 1}) == 1.0
    assert fidelity.total_variation({5: 1, -5: 1}, {5: 1}) == pytest.approx(0.5)
    assert fidelity.total_variation({}, {5: 1}) is None
    # the same sizes of rise and fall in another balance: far in TV, identical within sign
    lab, ref = {-5: 1, 5: 9}, {-5: 5, 5: 5}
    assert fidelity.total_variation(lab, ref) == pytest.approx(0.4) and fidelity.within_sign_distance(lab, ref) == 0.0
    # rises of +3 where the reference rises by +5: half the reference's mass is rises, all of it differs
    assert fidelity.within_sign_distance({-5: 5, 3: 5}, {-5: 5, 5: 5}) == pytest.approx(0.5)
    assert fidelity.exact_share({3: 1, -10: 1, 5: 2}) == 0.75
    assert [fidelity.value_label(v) for v in (-10, 0, 2.5, 5)] == ["-10", "0", "+2.5", "+5"]


def test_history_changes_skip_the_opening_and_fall_back_to_emotion_differences():
    turns = [("user", 40, 0.0), ("assistant", None, None), ("user", 45, 5), ("assistant", None, None),
             ("user", 35, None), ("assistant", None, None), ("user", None, None), ("assistant", None, None),
             ("user", 30, None)]
    # the opening's 0 is not a judgement; the 4th user turn has neither change nor emotion
    assert fidelity.history_changes(turns) == [5.0, -10.0, -5.0]


def test_published_histogram_is_the_reference_one():
    report = fidelity.FidelityReport("published", dict(PUBLISHED_CHANGES), 1000)
    assert report.n == 7936 and report.tv == 0.0 and report.within_sign == 0.0
    assert round(report.share_5_10, 4) == 0.9992


@pytest.mark.parametrize("model,n,tv,within", [("gpt-4.1", 848, 0.203, 0.067), ("qwen2.5-72b", 641, 0.243, 0.084)])
def test_published_transcripts_judge_like_the_published_histogram(shared_data, store, model, n, tv, within):
    f = shared_data / "sage" / f"{model}_result.jsonl"
    report = fidelity.file_report(f)
    assert (report.n, report.n_dialogues, report.share_5_10) == (n, 100, 1.0)
    assert (round(report.tv, 3), round(report.within_sign, 3)) == (tv, within)
    assert report.within_sign < 0.1 and report.tv < 0.25
    rises = sum(c for v, c in report.counts.items() if v > 0) / report.n
    published_rises = sum(c for v, c in PUBLISHED_CHANGES.items() if v > 0) / 7936
    assert report.tv <= abs(rises - published_rises) + report.within_sign + 1e-9
    # imported into the store, the collection gives the same histogram from the stored turns
    transcripts.import_file(store, f)
    stored = fidelity.store_report(store, (Dialogue.collection == f.name,), f.name)
    assert (stored.counts, stored.n_dialogues) == (report.counts, 100)


@pytest.fixture(scope="module")
def offline_dialogues():
    """Eight dialogues with the offline simulator (standard rules): four built-in personas, each once with
    replies tailored to it and once with one generic sentence repeated; the user turns after the opening."""
    from simulator.evaluation.probes import GENERIC, tailored_reply
    from simulator.personas.builtin import BUILTIN_PROFILES
    from simulator.user.agent import SentientAgent
    from simulator.user.backends import make_backend
    from simulator.user.rules import get_rules

    backend = make_backend("offline")

    async def play(profile, tailored: bool):
        agent = SentientAgent(profile, backend, get_rules("standard"), seed=0)
        first = await agent.opening()
        history, turns = [{"role": "user", "content": first.text}], [first]
        for t in range(5):
            reply = tailored_reply(profile, t, history[-1]["content"]) if tailored else GENERIC
            turns.append(await agent.respond(history, reply))
            history += [{"role": "assistant", "content": reply}, {"role": "user", "content": turns[-1].text}]
            if turns[-1].done:
                break
        return profile, history, turns

    async def all_dialogues():
        return [await play(p, tailored) for p in BUILTIN_PROFILES[:4] for tailored in (True, False)]

    return asyncio.run(all_dialogues())


def test_offline_simulator_dialogues_are_far_from_the_published_histogram(store, offline_dialogues):
    for profile, history, turns in offline_dialogues:
        d = start_dialogue(store, persona_id=profile.id, source="rollout", policy_ref="scripted")
        users = iter(turns)
        for i, m in enumerate(history):
            t = next(users) if m["role"] == "user" else None
            add_turn(store, d, i, m["role"], m["content"], **({"emotion": t.emotion, "delta": t.delta} if t else {}))
        finish_dialogue(store, d, "finished", turns[-1].emotion, outcome=turns[-1].outcome or "max_turns")
    report = fidelity.store_report(store, (Dialogue.source == "rollout",), "offline")
    assert report.n_dialogues == 8 and report.n == sum(len(t) - 1 for _, _, t in offline_dialogues)
    assert len(report.counts) > 6  # the offline user's changes take many integer values, not only +-5 / +-10
    assert report.tv > 0.5 and report.within_sign > 0.5 and report.share_5_10 < 0.9


def test_cli_reads_a_file(shared_data):
    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    r = run_in_process("simulator", "fidelity", str(f))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split() == ["value", "count", "share", "published"]
    assert lines[2].split() == ["-10", "42", "5.0%", "13.1%"]
    assert "distance (TV) 0.203 · within sign 0.067 · exactly ±5 or ±10: 100.0% (published 99.9%)" in lines[-1]
    out = json.loads(run_in_process("simulator", "fidelity", str(f), "--json").stdout)
    assert (out["n"], out["n_dialogues"], round(out["tv"], 3), out["published_n"]) == (848, 100, 0.203, 7936)
    assert [(row["value"], row["count"]) for row in out["rows"]] == [(-10, 42), (-5, 186), (0, 0), (2, 0), (5, 407),
                                                                    (10, 213)]


def test_cli_reads_an_eval_run_and_a_training_step(shared_data, tmp_path, db_url, store):
    """A replay of the first 12 published GPT-4.1 dialogues through the benchmark runner stores the
    recorded changes as turn deltas: the eval run's histogram is the file's."""
    from trainer.benchmarking import benchmark
    from trainer.jobs.queue import create_job

    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    head = tmp_path / "head_result.jsonl"
    head.write_text("".join(f.read_text(encoding="utf-8").splitlines(keepends=True)[:12]), encoding="utf-8")
    cfg = benchmark.BenchmarkConfig(policy=f"replay:{f}", simulator=f"replay:{f}", profiles=str(f), limit=12)
    run_id = benchmark.run_benchmark(store, cfg, log=lambda _m: None).eval_run_id
    r = run_in_process("simulator", "fidelity", "--eval-run", str(run_id), "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    expected = fidelity.file_report(head)
    assert out["source"] == f"eval run {run_id}" and out["n_dialogues"] == 12 and out["n"] == expected.n > 50
    assert {row["value"]: row["count"] for row in out["rows"] if row["count"]} == expected.counts
    missing = run_in_process("simulator", "fidelity", "--eval-run", "999", "--db", db_url)
    assert missing.returncode == 1 and "eval run 999 does not exist" in missing.stderr
    assert run_in_process("simulator", "fidelity").returncode == 2
    # a training job's dialogues, one step at a time
    job = create_job(store, "train", {})
    for step, deltas in ((1, [5, 10]), (2, [-3])):
        d = start_dialogue(store, persona_id="p", source="train", job_id=job, step=step)
        add_turn(store, d, 0, "user", "hi", emotion=30.0, delta=0.0)
        for i, delta in enumerate(deltas):
            add_turn(store, d, 2 * i + 1, "assistant", "reply")
            add_turn(store, d, 2 * i + 2, "user", "more", emotion=30.0 + delta, delta=float(delta))
        finish_dialogue(store, d, "finished", 40.0, outcome="max_turns")
    assert fidelity.training_report(store, job, 1).counts == {5: 1, 10: 1}
    assert fidelity.training_report(store, job).counts == {-3: 1, 5: 1, 10: 1}
    r = run_in_process("simulator", "fidelity", "--job", str(job), "--step", "2", "--db", db_url)
    assert r.returncode == 0 and f"training job {job} step 2" in r.stdout and "1 judged changes" in r.stdout
