"""Make the pre-migration store fixtures (tests/data/store_before_migrations.{sqlite,postgres}.sql) with the
code of the last version without migrations (main at d29f43a): a store made by its make_store, a few rows
in every table, dumped as SQL.

    git worktree add /tmp/before d29f43a
    PYTHONPATH=/tmp/before python tests/data/make_store_fixture.py sqlite:////tmp/s.db \
        tests/data/store_before_migrations.sqlite.sql
    PYTHONPATH=/tmp/before python tests/data/make_store_fixture.py postgresql+psycopg://.../DB /dev/null
    pg_dump --inserts --no-owner --no-privileges DB > tests/data/store_before_migrations.postgres.sql
"""
from __future__ import annotations

import sqlite3
import sys
from datetime import datetime

from storage import (
    Checkpoint,
    Comparison,
    ComparisonPair,
    Dialogue,
    EvalRun,
    Experiment,
    ExperimentCell,
    Job,
    JudgeScore,
    Metric,
    Persona,
    PersonaCandidate,
    PersonaGeneration,
    Turn,
    make_store,
    session_scope,
    store_id,
)
from storage.models import PersonaSet, PersonaSetMember

WHEN = datetime(2026, 11, 25, 12, 0, 0)


def fill(url: str) -> None:
    store = make_store(url)
    store_id(store)
    with session_scope(store) as s:
        for pid, name in (("maya", "Maya"), ("tom-ü", "Tomás ü")):
            s.add(Persona(id=pid, name=name, persona=f"{name}, a nurse", traits=["proud", "tired"],
                          extra={"events": ["e1", "e2"]}, created_at=WHEN, updated_at=WHEN))
        job = Job(kind="train", name="grpo demo", config={"algorithm": "grpo", "lr": 1e-5}, status="succeeded",
                  progress=1.0, step=2, total_steps=2, seed=7, code_version="d29f43a", created_at=WHEN)
        s.add(job)
        s.flush()
        s.add_all([Metric(job_id=job.id, step=st, name=n, value=v, created_at=WHEN)
                   for st, n, v in ((1, "reward", 0.25), (2, "reward", 0.5), (2, "kl", 0.012))])
        s.add(Checkpoint(job_id=job.id, step=2, path="/runs/1/step-2", metrics={"reward": 0.5}, created_at=WHEN))
        run = EvalRun(job_id=job.id, name="heldout", model_ref="default", simulator_fingerprint={"backend": "offline"},
                      fingerprint_hash="f" * 16, status="finished", score=61.5, success=1, failure=0, n=2,
                      ci_low=40.0, ci_high=80.0, created_at=WHEN, finished_at=WHEN)
        s.add(run)
        s.flush()
        dialogues = []
        for i, pid in enumerate(("maya", "tom-ü")):
            d = Dialogue(persona_id=pid, persona_snapshot={"id": pid}, source="benchmark", policy_ref="default",
                         fingerprint_hash="f" * 16, job_id=job.id, step=2, eval_run_id=run.id, status="finished",
                         final_emotion=55.0 + i * 13, outcome="max_turns", n_turns=2, seed=i, created_at=WHEN)
            d.turns = [Turn(index=0, role="user", text="Hi. Rough day.", emotion=40.0, delta=0.0,
                            inner={"analysis": "tired"}, created_at=WHEN),
                       Turn(index=1, role="assistant", text="That sounds hard — what happened?", n_tokens=9,
                            latency_s=0.25, policy_version=1, created_at=WHEN),
                       Turn(index=2, role="user", text="我被跳过了。", emotion=48.0, delta=8.0, created_at=WHEN)]
            s.add(d)
            dialogues.append(d)
        s.flush()
        s.add(JudgeScore(dialogue_id=dialogues[0].id, eval_run_id=run.id, judge_hash="j" * 16, scores={"empathy": 4},
                         reasons={"empathy": "named the feeling"}, mean=4.0, attempts=1, created_at=WHEN))
        pset = PersonaSet(name="pair", content_hash="c" * 16, source_kind="manual", created_at=WHEN)
        pset.members = [PersonaSetMember(position=0, persona_id="maya"),
                        PersonaSetMember(position=1, persona_id="tom-ü")]
        s.add(pset)
        gen = PersonaGeneration(endpoint="127.0.0.1:8000", model="m", status="finished", n_planned=1, n_done=1,
                                created_at=WHEN, finished_at=WHEN)
        s.add(gen)
        s.flush()
        s.add(PersonaCandidate(generation_id=gen.id, slot=0, profile={"id": "cand"}, status="accepted",
                               persona_id="maya", similarity=0.42, created_at=WHEN, updated_at=WHEN))
        xp = Experiment(name="lr grid", grid={"lr": [1e-5, 2e-5]}, status="succeeded", created_at=WHEN)
        xp.cells = [ExperimentCell(index=0, params={"lr": 1e-5}, status="succeeded", train_job_id=job.id,
                                   eval_run_id=run.id)]
        s.add(xp)
        cmp_ = Comparison(name="a vs b", a_ref="default", b_ref="/runs/1/step-2",
                          eval_runs={"a": [run.id], "b": [run.id]},
                          status="succeeded", created_at=WHEN)
        s.add(cmp_)
        s.flush()
        s.add(ComparisonPair(comparison_id=cmp_.id, persona_id="maya", seed=0, a_dialogue_id=dialogues[0].id,
                             b_dialogue_id=dialogues[1].id))
    store.dispose()


if __name__ == "__main__":
    url, out = sys.argv[1], sys.argv[2]
    fill(url)
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///"):]) as conn, open(out, "w", encoding="utf-8") as f:
            f.write("\n".join(conn.iterdump()) + "\n")
