"""Collections of stored dialogues (storage.queries) and the one function that scores a set of them
(simulator.evaluation.transcripts.dialogues_summary), on a real SQLite file."""
from __future__ import annotations

import pytest

from simulator.evaluation import transcripts
from simulator.evaluation.scoring import sentient_summary
from storage import Dialogue, EvalRun, session_scope
from storage.dialogues import finish_dialogue, start_dialogue
from storage.queries import collection_dialogues, collection_filter, collection_key, scored_finals, store_collections
from trainer.benchmarking import eval_runs
from trainer.jobs import queue as job_queue


def _dialogue(store, status: str, final, **fields) -> int:
    did = start_dialogue(store, persona_id=fields.pop("persona_id", "p"), policy_ref="default", **fields)
    if status != "running":
        finish_dialogue(store, did, status, final, outcome="error" if status == "failed" else "max_turns",
                        error="simulator timeout" if status == "failed" else "")
    return did


@pytest.fixture
def filled(store):
    """Two live dialogues, one of them failed; a training job's dialogue; a benchmark run of three
    dialogues (one still running)."""
    job = job_queue.create_job(store, "train", {}, name="t")
    with session_scope(store) as s:
        run = EvalRun(name="bench")
        s.add(run)
        s.flush()
        run_id = run.id
    ids = {"live": [_dialogue(store, "finished", 80.0, source="rollout"),
                    _dialogue(store, "failed", 30.0, source="rollout")],
           "job": [_dialogue(store, "finished", 55.0, source="train", job_id=job, step=1)],
           "eval": [_dialogue(store, "finished", 100.0, source="benchmark", eval_run_id=run_id),
                    _dialogue(store, "finished", 5.0, source="benchmark", eval_run_id=run_id),
                    _dialogue(store, "running", None, source="benchmark", eval_run_id=run_id)]}
    return store, job, run_id, ids


def test_store_collections_and_their_dialogues(filled):
    store, job, run_id, ids = filled
    assert store_collections(store) == [("source:rollout", 2), (f"eval:{run_id}", 3), (f"job:{job}", 1)]
    assert [d["id"] for d in collection_dialogues(store, "source:rollout", 10)] == ids["live"]
    assert [d["id"] for d in collection_dialogues(store, f"eval:{run_id}", 2)] == ids["eval"][1:]  # newest 2
    row = collection_dialogues(store, f"job:{job}", 10)[0]
    assert (row["name"], row["final_emotion"], row["outcome"], row["status"]) == ("p", 55.0, "max_turns", "finished")
    assert collection_key({"source": "train", "job_id": job, "eval_run_id": None}) == f"job:{job}"
    assert collection_key({"source": "benchmark", "job_id": job, "eval_run_id": run_id}) == f"eval:{run_id}"
    assert collection_key({"source": "import", "collection": "x_result.jsonl"}) == "import:x_result.jsonl"


def test_scored_finals_mark_failed_dialogues_and_skip_running_ones(filled):
    store, _, run_id, _ = filled
    assert scored_finals(store, collection_filter("source:rollout")) == [80.0, None]
    assert scored_finals(store, collection_filter(f"eval:{run_id}")) == [100.0, 5.0]


def test_one_summary_for_collections_and_eval_runs(filled):
    store, job, run_id, _ = filled
    live = transcripts.dialogues_summary(store, collection_filter("source:rollout"))
    assert live == sentient_summary([80.0, None]) and live.n_errors == 1
    run = transcripts.dialogues_summary(store, (Dialogue.eval_run_id == run_id,))
    assert run == eval_runs.summarize_run(store, run_id) == sentient_summary([100.0, 5.0])
    assert transcripts.dialogues_summary(store, collection_filter("source:chat")) is None
    with pytest.raises(ValueError, match="no finished dialogues"):
        transcripts.collection_summary(store, "nothing_result.jsonl")


@pytest.mark.parametrize("key,problem", [("bogus:1", "unknown kind 'bogus'"), ("eval:x", "eval needs a numeric id"),
                                         ("job:", "job needs a numeric id")])
def test_bad_collection_key_is_named(key, problem):
    with pytest.raises(ValueError, match=f"collection key: {problem}"):
        collection_filter(key)
