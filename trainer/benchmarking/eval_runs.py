"""Eval runs in the store: reading, resuming and closing them, and what the app shows of them (the
breakdown by need and personality, the leaderboard grouped by simulator fingerprint and profile set).
The runner that fills them is trainer/benchmarking/benchmark.py."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Optional

from sqlalchemy import Engine, select

from simulator.evaluation.published import PUBLISHED_FINGERPRINT, published_rows
from simulator.evaluation.scoring import BenchmarkSummary, sentient_summary
from simulator.evaluation.transcripts import dialogues_summary
from simulator.personas.profile import NEED_CATEGORIES, PERSONALITIES
from storage import Comparison, Dialogue, EvalRun, Job, Turn, as_dict, read_scope, session_scope
from storage.models import utcnow
from storage.queries import SCORED_STATUSES
from trainer.jobs.liveness import shown_status

LIVE_SHOWN = ("running", "queued", "stalled")  # a job's shown statuses while its process plays


# ---------------------------------------------------------------------------------------- eval run rows
def get_eval_run(store: Engine, eval_run_id: int) -> Optional[dict[str, Any]]:
    with read_scope(store) as s:
        r = s.get(EvalRun, eval_run_id)
        return None if r is None else as_dict(r)


def running_eval_run_ids(store: Engine) -> list[int]:
    """Eval runs being played now: stored running and their job's process alive (a run whose job shows dead
    or interrupted is not running, whoever started it; trainer.jobs.liveness)."""
    with read_scope(store) as s:
        rows = s.execute(select(EvalRun.id, Job).outerjoin(Job, Job.id == EvalRun.job_id)
                         .where(EvalRun.status == "running").order_by(EvalRun.id)).all()
        return [run_id for run_id, job in rows if job is None or shown_status(job)[0] in LIVE_SHOWN]


def done_profile_ids(store: Engine, eval_run_id: int) -> set[str]:
    """Profiles of the eval run whose dialogue is finished or failed (skipped on resume)."""
    with read_scope(store) as s:
        return set(s.scalars(select(Dialogue.persona_id).where(Dialogue.eval_run_id == eval_run_id,
                                                               Dialogue.status.in_(SCORED_STATUSES))))


def close_cut_off_dialogues(store: Engine, eval_run_id: int) -> int:
    """Dialogues left "running" by a killed process: marked cancelled (kept, never scored). Returns how many."""
    with session_scope(store) as s:
        rows = list(s.scalars(select(Dialogue).where(Dialogue.eval_run_id == eval_run_id,
                                                     Dialogue.status == "running")))
        for d in rows:
            d.status, d.outcome, d.finished_at = "cancelled", "cancelled", utcnow()
            d.error = "cut off (the benchmark process ended); played again on resume"
        return len(rows)


def scored_dialogues(store: Engine, eval_run_id: int) -> list[dict[str, Any]]:
    """One row per scored dialogue of the run: id, profile, need, personality, final emotion (None =
    error), status, outcome, error, turns."""
    with read_scope(store) as s:
        rows = s.scalars(select(Dialogue).where(Dialogue.eval_run_id == eval_run_id,
                                                Dialogue.status.in_(SCORED_STATUSES)).order_by(Dialogue.id))
        out = []
        for d in rows:
            snap = d.persona_snapshot or {}
            out.append({"id": d.id, "persona_id": d.persona_id, "name": snap.get("name", ""),
                        "need_category": snap.get("need_category", ""), "personality": snap.get("personality", ""),
                        "final_emotion": None if d.status == "failed" else d.final_emotion, "status": d.status,
                        "outcome": d.outcome, "error": d.error, "n_turns": d.n_turns})
        return out


def summarize_run(store: Engine, eval_run_id: int) -> Optional[BenchmarkSummary]:
    """The run's summary in dialogue order with the scorer's default bootstrap (seed 0), so the exported
    SAGE file scores to the same numbers with `python -m simulator score`."""
    return dialogues_summary(store, (Dialogue.eval_run_id == eval_run_id,))


def finish_eval_run(store: Engine, eval_run_id: int, status: str) -> Optional[BenchmarkSummary]:
    """Score the run's dialogues and record the summary with the final status."""
    summary = summarize_run(store, eval_run_id)
    with session_scope(store) as s:
        r = s.get(EvalRun, eval_run_id)
        r.status, r.finished_at = status, utcnow()
        if summary is not None:
            r.score, r.success, r.failure, r.n = summary.score, summary.success, summary.failure, summary.n
            r.n_errors, r.ci_low, r.ci_high = summary.n_errors, summary.ci_low, summary.ci_high
    return summary



def check_replay(store: Engine, eval_run_id: int, spec: str, log: Any = print) -> int:
    """A replay run: every dialogue must be its record, message for message (simulator.user.backends.replay). One that
    the lab's rules ended earlier or later than the record is marked failed, the message naming the
    dialogue and the turn. Returns how many differed."""
    from simulator.user.backends.replay import load_records, replay_mismatch

    records = load_records(spec)
    bad = 0
    with session_scope(store) as s:
        for d in s.scalars(select(Dialogue).where(Dialogue.eval_run_id == eval_run_id,
                                                  Dialogue.status == "finished")):
            record = records.get(d.persona_id)
            messages = [{"role": t.role, "content": t.text} for t in sorted(d.turns, key=lambda t: t.index)]
            problem = f"replay: no record {d.persona_id!r}" if record is None else replay_mismatch(record, messages)
            if problem:
                d.status, d.outcome, d.error = "failed", "error", problem
                bad += 1
                log(f"dialogue {d.id}: {problem}")
    return bad


def truncations(store: Engine, eval_run_id: int) -> dict[str, int]:
    """Replies cut at a token cap and dialogues ended by the context budget, counted over the run."""
    with read_scope(store) as s:
        ids = select(Dialogue.id).where(Dialogue.eval_run_id == eval_run_id)
        cut = len(list(s.scalars(select(Turn.id).where(Turn.dialogue_id.in_(ids), Turn.role == "assistant",
                                                        Turn.error.like("%reply cut at%")))))
        ended = len(list(s.scalars(select(Dialogue.id).where(Dialogue.eval_run_id == eval_run_id,
                                                             Dialogue.outcome == "max_tokens"))))
    return {"replies_cut": cut, "dialogues_out_of_context": ended}


# ------------------------------------------------------------------------------------ for the app
def eval_run_dialogues(store: Engine, eval_run_id: int) -> list[dict[str, Any]]:
    """The run's scored dialogues (see scored_dialogues), for a table that opens them in Transcripts."""
    return scored_dialogues(store, eval_run_id)


def breakdown(store: Engine, eval_run_id: int) -> dict[str, list[dict[str, Any]]]:
    """Score / success / failure / n / errors per hidden-need category and per personality type."""
    rows = scored_dialogues(store, eval_run_id)
    labels = {"need_category": {k: v[0] for k, v in NEED_CATEGORIES.items()},
              "personality": {k: k.capitalize() for k in PERSONALITIES}}
    out: dict[str, list[dict[str, Any]]] = {}
    for key, name in (("need_category", "need"), ("personality", "personality")):
        groups: dict[str, list[Optional[float]]] = defaultdict(list)
        for d in rows:
            groups[d[key] or "unknown"].append(d["final_emotion"])
        out[name] = [{"key": k, "label": labels[key].get(k, k), **_summary_fields(sentient_summary(v, n_boot=500))}
                     for k, v in sorted(groups.items())]
    return out


def _summary_fields(s: BenchmarkSummary) -> dict[str, Any]:
    return {"score": s.score, "success": s.success, "failure": s.failure, "n": s.n, "n_errors": s.n_errors,
            "ci_low": s.ci_low, "ci_high": s.ci_high}


def protocol_key(protocol: Optional[dict[str, Any]]) -> str:
    """The protocol a run followed, as a group key (runs from before protocols were hashed: 'unversioned')."""
    return (protocol or {}).get("protocol_hash") or "unversioned"


def leaderboard(store: Engine, include_published: bool = True) -> list[dict[str, Any]]:
    """Finished eval runs grouped by simulator fingerprint hash and profile set: each group is ranked on
    its own, never mixed with another fingerprint. Group: fingerprint_hash, profile_set_hash, simulator
    (the fingerprint dict), published (bool), rows (rank, eval run columns), newest group first. The
    published reference rows (their own simulator, DeepSeek-V3) come last as a group of their own. A
    comparison's sides are not benchmark runs (they are the Compare view's) and stay off it; runs with the same
    score share a rank (1, 1, 3)."""
    with read_scope(store) as s:
        sides = {int(i) for c in s.scalars(select(Comparison)) for ids in (c.eval_runs or {}).values()
                 for i in (ids or [])}
        runs = [as_dict(r) for r in s.scalars(select(EvalRun).where(EvalRun.status == "succeeded",
                                                                    EvalRun.n > 0)) if r.id not in sides]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        groups[(r["fingerprint_hash"], r["profile_set_hash"], protocol_key(r["protocol"]))].append(r)
    out = []
    for (fp_hash, ps_hash, proto), rows in groups.items():
        rows.sort(key=lambda r: (-(r["score"] or 0.0), r["id"]))
        out.append({"fingerprint_hash": fp_hash, "profile_set_hash": ps_hash, "published": False,
                    "protocol_hash": proto, "protocol": rows[0]["protocol"],
                    "replay": rows[0]["simulator_fingerprint"].get("backend") == "replay",
                    "simulator": rows[0]["simulator_fingerprint"],
                    "rows": [dict(r, rank=rank, published=False) for r, rank in zip(rows, shared_ranks(rows))],
                    "_latest": max(r["finished_at"] or r["created_at"] for r in rows)})
    out.sort(key=lambda g: g.pop("_latest"), reverse=True)
    if include_published:
        pub = published_rows()
        out.append({"fingerprint_hash": PUBLISHED_FINGERPRINT, "profile_set_hash": "published", "published": True,
                    "simulator": {"backend": "openai", "model": pub[0]["simulator"]},
                    "rows": [dict(r, rank=rank) for r, rank in zip(pub, shared_ranks(pub))]})
    return out


def shared_ranks(rows: list[dict[str, Any]]) -> list[int]:
    """Competition ranks of rows sorted by score, best first: equal scores share a rank, the next rank skips
    (8.0, 8.0, 7.5 -> 1, 1, 3)."""
    ranks: list[int] = []
    for i, row in enumerate(rows):
        tied = i and (row.get("score") or 0.0) == (rows[i - 1].get("score") or 0.0)
        ranks.append(ranks[-1] if tied else i + 1)
    return ranks
