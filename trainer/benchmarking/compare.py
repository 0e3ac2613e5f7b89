"""Paired evaluation: two policies, A and B, play the same personas with the same simulated user, seeds and
rules (the benchmark protocol of trainer/benchmarking/benchmark.py), and their dialogues are compared persona by
persona.

Each side at each seed is an ordinary eval run (so it also stands on the leaderboard); a `ComparisonPair` row
links A's and B's dialogue of one persona at one seed. Both sides use the "rounds" schedule, so the batches
the policy sees do not depend on timing: with a deterministic simulated user (offline, replay), a policy
compared with itself plays identical dialogues.

Per pair, with turn n = the policy's n-th reply and the user's reaction to it:
    first_reply_diff_turn    the first n where A's and B's replies differ (None: never)
    first_emotion_diff_turn  the first n where the user's emotion after it differs (None: never)
Summary over the pairs where both dialogues finished, d = B final - A final:
    wins / ties / losses     d > 0 / d == 0 / d < 0 (B against A)
    mean_diff, ci_low/high   mean d with a paired percentile bootstrap (resampling pairs, seeded)
    sign_test_p              two-sided exact binomial test of wins against losses (ties dropped)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterable, Optional, Sequence

from sqlalchemy import Engine, select

from simulator.access import config_errors, path_field
from simulator.evaluation.scoring import bootstrap_interval
from storage import Comparison, ComparisonPair, Dialogue, Turn, as_dict, code_version, read_scope, session_scope
from storage.models import utcnow
from trainer.benchmarking.benchmark import BenchmarkConfig, BenchmarkInputError

N_BOOT = 2000
COMPARE_JOB_KIND = "compare"  # the job that plays a comparison (trainer.benchmarking.compare_runs)


@dataclass
class CompareConfig:
    a: str = path_field("policy", "default")  # a policy spec as the benchmark takes it (default | PATH |
    b: str = path_field("policy", "default")  # checkpoint folder | vllm:PATH | openai:MODEL | replay:FILE)
    profiles: str = path_field("personas", "builtin:heldout")  # a persona spec
    simulator: str = path_field("simulator", "offline")  # the simulated user both policies talk with
    seeds: int = 1  # each persona is played at seeds seed, seed + 1, ... seed + seeds - 1
    seed: int = 0
    mode: str = "direct"
    temperature: float = 0.7
    max_new_tokens: int = 0  # per reply, as the benchmark's
    prompt_pack: str = path_field("pack", "own")
    simulator_base_url: str = path_field("endpoint")
    a_base_url: str = path_field("endpoint")  # endpoints of openai:MODEL policies
    b_base_url: str = path_field("endpoint")
    limit: int = 0  # first N personas of the spec (0 = all)
    name: str = ""
    gpus: int = 0  # GPUs its job asks a Ray node for (1: local policies on a GPU)

    def errors(self) -> dict[str, str]:
        e = {}
        for side in ("a", "b"):
            problems = self.benchmark_config(side, 0).errors()
            if "policy" in problems:
                e[side] = problems.pop("policy")
            if "policy_base_url" in problems:
                e[f"{side}_base_url"] = problems.pop("policy_base_url")
            e.update({k: v for k, v in problems.items() if k not in e})
        if not isinstance(self.seeds, int) or isinstance(self.seeds, bool) or self.seeds < 1:
            e["seeds"] = f"must be an integer >= 1, got {self.seeds!r}"
        if not isinstance(self.gpus, int) or isinstance(self.gpus, bool) or self.gpus < 0:
            e["gpus"] = f"must be an integer >= 0, got {self.gpus!r}"
        e.update(config_errors(self))  # every declared path and endpoint, refused before anything is opened
        return e

    def validate(self) -> "CompareConfig":
        errs = self.errors()
        if errs:
            raise BenchmarkInputError("invalid comparison: " + "; ".join(f"{k}: {v}" for k, v in errs.items()))
        return self

    def benchmark_config(self, side: str, k: int) -> BenchmarkConfig:
        """The eval run of one side at the k-th seed: everything but the policy is the same for A and B."""
        return BenchmarkConfig(policy=getattr(self, side), policy_base_url=getattr(self, f"{side}_base_url"),
                               simulator=self.simulator, simulator_base_url=self.simulator_base_url,
                               prompt_pack=self.prompt_pack, profiles=self.profiles, limit=self.limit,
                               mode=self.mode, temperature=self.temperature, max_new_tokens=self.max_new_tokens,
                               seed=self.seed + k, schedule="rounds",
                               name=f"{self.name or 'compare'} {side.upper()} seed {self.seed + k}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompareConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# ------------------------------------------------------------------------------------------ alignment
def policy_turns(turns: Sequence[dict]) -> list[dict]:
    """Turns grouped by the policy's reply number: [{"n", "reply", "think", "user", "emotion", "inner"}], where
    the user fields are the reaction to reply n (None when the dialogue ended before the user answered).
    `turns` are storage Turn rows as dicts, in index order; the opening is n = 0 (no reply)."""
    out = [{"n": 0, "reply": None, "think": "", "user": None, "emotion": None, "inner": {}}]
    for t in turns:
        if t["role"] == "assistant":
            out.append({"n": len(out), "reply": t["text"], "think": t.get("think_text", ""), "user": None,
                        "emotion": None, "inner": {}})
        elif out[-1]["user"] is None:
            out[-1].update(user=t["text"], emotion=t.get("emotion"), inner=t.get("inner") or {})
    return out


def first_difference(a: Sequence[dict], b: Sequence[dict], key: str) -> Optional[int]:
    """The first reply number n >= 1 where the aligned turns differ in `key` (one side missing it counts),
    None when they never do."""
    for n in range(1, max(len(a), len(b))):
        x = a[n][key] if n < len(a) else None
        y = b[n][key] if n < len(b) else None
        if x != y:
            return n
    return None


# ------------------------------------------------------------------------------------------ statistics
def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial test of wins vs losses under p = 1/2 (1.0 with no decided pair)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_summary(diffs: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """wins / ties / losses of B over A, the mean difference with its paired bootstrap 95% interval and the
    sign test, from d = B final - A final of every pair where both finished."""
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    mean = sum(diffs) / len(diffs) if diffs else None
    lo, hi = bootstrap_interval(list(diffs), N_BOOT, seed) if diffs else (None, None)
    return {"n": len(diffs), "wins": wins, "ties": len(diffs) - wins - losses, "losses": losses,
            "mean_diff": mean, "ci_low": lo, "ci_high": hi, "sign_test_p": sign_test_p(wins, losses)}


def breakdown(pairs: Iterable[dict], key: str, seed: int = 0) -> dict[str, dict[str, Any]]:
    """paired_summary per value of a pair field (need_category, personality)."""
    groups: dict[str, list[float]] = {}
    for p in pairs:
        if p["diff"] is not None:
            groups.setdefault(p.get(key) or "(none)", []).append(p["diff"])
    return {k: paired_summary(v, seed) for k, v in sorted(groups.items())}


# ------------------------------------------------------------------------------------------ running
def dialogues_by_persona(store: Engine, eval_run_id: int) -> dict[str, int]:
    """{persona id: its scored dialogue} of an eval run (cut-off dialogues left out)."""
    with read_scope(store) as s:
        rows = s.execute(select(Dialogue.persona_id, Dialogue.id).where(
            Dialogue.eval_run_id == eval_run_id, Dialogue.status != "cancelled").order_by(Dialogue.id)).all()
    return {pid: did for pid, did in rows}


def reproduce_config(store: Engine, eval_run_id: int) -> BenchmarkConfig:
    """The settings of a stored eval run, seed included, for playing it again ("reproduce this run")."""
    from trainer.benchmarking.benchmark import RECORDED_KEYS
    from trainer.benchmarking.eval_runs import get_eval_run

    run = get_eval_run(store, eval_run_id)
    if run is None:
        raise BenchmarkInputError(f"eval_run: {eval_run_id} does not exist")
    config = BenchmarkConfig.from_dict({k: v for k, v in (run["config"] or {}).items() if k not in RECORDED_KEYS})
    config.name = f"reproduce #{eval_run_id}"
    return config


def link_eval_runs(store: Engine, a_run: int, b_run: int, name: str = "") -> int:
    """A comparison of two stored eval runs (e.g. a run and its reproduction): their dialogues paired by
    persona; the comparison's id."""
    a_d, b_d = dialogues_by_persona(store, a_run), dialogues_by_persona(store, b_run)
    with session_scope(store) as s:
        row = Comparison(name=name or f"eval run {a_run} vs {b_run}", config={"a": f"eval run {a_run}",
                         "b": f"eval run {b_run}", "profiles": "as the runs"}, eval_runs={"a": [a_run], "b": [b_run]},
                         code_version=code_version(), status="succeeded", finished_at=utcnow())
        s.add(row)
        s.flush()
        comparison_id = row.id
        for persona_id in [p for p in a_d if p in b_d]:
            s.add(ComparisonPair(comparison_id=comparison_id, persona_id=persona_id, seed=0,
                                 a_dialogue_id=a_d[persona_id], b_dialogue_id=b_d[persona_id]))
    pairs = comparison_pairs(store, comparison_id)
    with session_scope(store) as s:
        row = s.get(Comparison, comparison_id)
        row.a_ref, row.b_ref = model_ref(s, [a_run]), model_ref(s, [b_run])
        row.summary = paired_summary([p["diff"] for p in pairs if p["diff"] is not None])
    return comparison_id


def model_ref(s: Any, eval_run_ids: list[int]) -> str:
    """The model reference of the first of the eval runs ('' when none), in session `s`."""
    from storage import EvalRun

    run = s.get(EvalRun, eval_run_ids[0]) if eval_run_ids else None
    return run.model_ref if run is not None else ""


# ------------------------------------------------------------------------------------------ reading
def _turn_dicts(s: Any, dialogue_id: int) -> list[dict]:
    rows = s.scalars(select(Turn).where(Turn.dialogue_id == dialogue_id).order_by(Turn.index))
    return [{"index": t.index, "role": t.role, "text": t.text, "think_text": t.think_text, "emotion": t.emotion,
             "delta": t.delta, "inner": t.inner or {}} for t in rows]


def _final(d: Dialogue) -> Optional[float]:
    return None if d.status == "failed" or d.final_emotion is None else float(d.final_emotion)


def comparison_pairs(store: Engine, comparison_id: int, with_turns: bool = False) -> list[dict[str, Any]]:
    """Every pair of a comparison: persona, seed, need, personality, both finals and dialogue ids, the diff
    (B - A, None when a side failed) and the first differing turns; `with_turns` adds both sides' aligned
    turns (policy_turns) and raw turns."""
    out = []
    with read_scope(store) as s:
        for p in s.scalars(select(ComparisonPair).where(ComparisonPair.comparison_id == comparison_id)
                           .order_by(ComparisonPair.seed, ComparisonPair.id)):
            da, db = s.get(Dialogue, p.a_dialogue_id), s.get(Dialogue, p.b_dialogue_id)
            ta, tb = _turn_dicts(s, da.id), _turn_dicts(s, db.id)
            aa, ab = policy_turns(ta), policy_turns(tb)
            snap = da.persona_snapshot or {}
            a_final, b_final = _final(da), _final(db)
            row = {"persona": p.persona_id, "name": snap.get("name", ""), "seed": p.seed,
                   "need_category": snap.get("need_category", ""), "personality": snap.get("personality", ""),
                   "a_dialogue_id": da.id, "b_dialogue_id": db.id, "a_final": a_final, "b_final": b_final,
                   "a_error": da.error, "b_error": db.error,
                   "diff": None if a_final is None or b_final is None else b_final - a_final,
                   "first_reply_diff_turn": first_difference(aa, ab, "reply"),
                   "first_emotion_diff_turn": first_difference(aa, ab, "emotion")}
            if with_turns:
                row.update(a_turns=ta, b_turns=tb, a_aligned=aa, b_aligned=ab)
            out.append(row)
    return out


def get_comparison(store: Engine, comparison_id: int) -> Optional[dict[str, Any]]:
    with read_scope(store) as s:
        row = s.get(Comparison, comparison_id)
        if row is None:
            return None
        return as_dict(row)


def comparison_job(store: Engine, comparison_id: int) -> Optional[dict[str, Any]]:
    """The job that plays the comparison (as trainer.jobs.queue.list_jobs gives it: status derived), None for
    one recorded before comparisons were jobs."""
    from trainer.jobs.queue import job_for

    return job_for(store, COMPARE_JOB_KIND, "comparison_id", comparison_id)


def shown_status(comparison: dict[str, Any], job: Optional[dict[str, Any]]) -> str:
    """The comparison's status as shown: stored running but its job's process is gone (or stalled) -> the
    job's derived status (dead, stalled, interrupted), as for every job."""
    if comparison["status"] == "running" and job is not None and job["status"] not in ("running", "queued"):
        return job["status"]
    return comparison["status"]


def list_comparisons(store: Engine, limit: int = 100) -> list[dict[str, Any]]:
    """Newest first; `status` is the shown one (shown_status)."""
    with read_scope(store) as s:
        rows = s.scalars(select(Comparison).order_by(Comparison.id.desc()).limit(limit)).all()
        out = [{"id": r.id, "name": r.name, "a": r.config.get("a", ""), "b": r.config.get("b", ""),
                "profiles": r.config.get("profiles", ""), "status": r.status, "summary": r.summary or {},
                "created_at": r.created_at} for r in rows]
    for c in out:
        if c["status"] == "running":
            c["status"] = shown_status(c, comparison_job(store, c["id"]))
    return out


def persona_line(pair: dict[str, Any]) -> dict[str, Any]:
    """The --json line of one pair."""
    return {k: pair[k] for k in ("persona", "seed", "a_final", "b_final", "first_reply_diff_turn",
                                 "first_emotion_diff_turn")}
