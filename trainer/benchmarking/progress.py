"""How far an eval run has got and how long it has left, read from the store (so the CLI, a job and the
Benchmark view all say the same).

Progress counts a finished dialogue as 1 and one still playing as its policy replies so far over the
protocol's turn cap (a dialogue may end sooner, so the estimate errs long). The time left is the time spent
so far scaled by what is left: elapsed * (1 - f) / f for the fraction f done.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from sqlalchemy import Engine, func, select

from storage import Dialogue, EvalRun, Turn, read_scope
from storage.models import utcnow
from storage.queries import SCORED_STATUSES


def fraction_done(done: int, total: int, replies_in_flight: int, max_turns: int) -> float:
    """Finished dialogues plus the playing ones' replies over the turn cap, as a share of the total."""
    if total <= 0:
        return 1.0
    return min(1.0, (done + replies_in_flight / max(1, max_turns)) / total)


def eta_seconds(fraction: float, elapsed_s: float) -> Optional[float]:
    """Seconds left at the pace so far; None before anything is done."""
    if fraction <= 0 or elapsed_s <= 0:
        return None
    return elapsed_s * (1.0 - fraction) / fraction


def run_progress(store: Engine, eval_run_id: int, max_turns: int = 10,
                 now: Optional[datetime] = None) -> Optional[dict[str, Any]]:
    """done / total dialogues, policy replies and their tokens, tokens per second, elapsed and ETA seconds of
    an eval run (elapsed from the run's start; a resumed run counts its pause too)."""
    with read_scope(store) as s:
        run = s.get(EvalRun, eval_run_id)
        if run is None:
            return None
        total = int(((run.config or {}).get("personas") or {}).get("n") or 0)
        rows = s.execute(select(Dialogue.id, Dialogue.status).where(Dialogue.eval_run_id == eval_run_id)).all()
        done_ids = {i for i, st in rows if st in SCORED_STATUSES}
        playing = [i for i, st in rows if st == "running"]
        replies, tokens = s.execute(select(func.count(Turn.id), func.coalesce(func.sum(Turn.n_tokens), 0)).where(
            Turn.dialogue_id.in_([i for i, _ in rows]), Turn.role == "assistant")).one()
        in_flight = s.scalar(select(func.count(Turn.id)).where(Turn.dialogue_id.in_(playing),
                                                              Turn.role == "assistant")) if playing else 0
        end = run.finished_at if run.status != "running" and run.finished_at else (now or utcnow())
        elapsed = max(0.0, (end - run.created_at).total_seconds())
        status = run.status
    f = fraction_done(len(done_ids), total, int(in_flight or 0), max_turns)
    return {"done": len(done_ids), "total": total, "replies": int(replies), "tokens": int(tokens),
            "elapsed_s": elapsed, "tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
            "eta_s": None if status != "running" else eta_seconds(f, elapsed), "status": status}


def duration_text(seconds: Optional[float]) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def progress_text(p: Optional[dict[str, Any]]) -> str:
    """One line: '3/8 dialogues, 27 replies, 41.2 tok/s, about 4 min left'."""
    if not p:
        return ""
    line = f"{p['done']}/{p['total']} dialogues, {p['replies']} replies, {p['tokens_per_s']:.1f} tok/s"
    if p.get("status") == "running":
        return line + f", about {duration_text(p['eta_s'])} left"
    return line + f", {p.get('status')} after {duration_text(p['elapsed_s'])}"


# The default policy's pace when the store has no run of it yet: `python -m trainer benchmark --profiles
# builtin:heldout --limit 1 --max-new-tokens 16` on the 2-core CPU machine (docs/results.md): 7.8 tokens a
# second over the eval run (policy and simulated user together), 7 s to load both before the run opened.
DEFAULT_PACE = {"tokens_per_s": 7.8, "startup_s": 7.0, "source": "measured for the default policy on 2 CPU cores"}


def last_pace(store: Engine, policy: str) -> Optional[dict[str, Any]]:
    """The pace of the newest finished eval run of `policy` (its spec as given): tokens per second, mean
    tokens a reply and its id; None when there is none."""
    with read_scope(store) as s:
        runs = s.execute(select(EvalRun.id, EvalRun.config).where(EvalRun.status == "succeeded")
                         .order_by(EvalRun.id.desc()).limit(50)).all()
    run_id = next((i for i, cfg in runs if (cfg or {}).get("policy") == policy), None)
    p = run_progress(store, run_id) if run_id is not None else None
    if not p or not p["replies"] or not p["tokens_per_s"]:
        return None
    return {"tokens_per_s": p["tokens_per_s"], "reply_tokens": p["tokens"] / p["replies"], "startup_s": 10.0,
            "source": f"at the pace of eval run {run_id}"}


def expected_seconds(dialogues: int, max_turns: int, cap: int, pace: dict[str, Any]) -> float:
    """A benchmark's time, erring long: every dialogue plays all its `max_turns` replies, each `cap` tokens
    long (or the pace's mean reply when that is shorter), at the pace's tokens per second, after its start-up.
    Dialogues that end early make the real run shorter; a machine busier than when the pace was taken, longer."""
    per_reply = min(cap, pace.get("reply_tokens") or cap)
    return pace.get("startup_s", 0.0) + dialogues * max_turns * per_reply / pace["tokens_per_s"]
