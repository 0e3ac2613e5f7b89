"""Running a comparison (trainer/benchmarking/compare.py) as a job: every input checked first, then A and B at
each seed played as eval runs by one "compare" job that owns them, resumable after any interruption.

    cid = run_comparison(store, config)                  # the command line: a job run in this process
    cid, job_id = start_comparison_job(store, url, cfg)  # the Compare view: a job in its own process
    cid = resume_comparison(store, cid)                  # refused while the job's process lives (its pid named)

The comparison row is written first (status running) with its job (kind "compare", config
{"comparison_id": N}); the job's eval runs carry its id. Each side's eval run is linked to the comparison
(`eval_runs`) as soon as it finishes and the pairs of a seed as soon as both sides have finished, so a
resume plays only what is missing: a linked run is never played again, an eval run cut off mid-way is
continued (found by its job and name), never replaced, so no eval run is ever left orphaned. Dialogue seeds
come from the persona (trainer.rollout.types.dialogue_seed), so a resumed comparison equals an
uninterrupted one.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional

from sqlalchemy import Engine, select

from storage import Comparison, ComparisonPair, EvalRun, code_version, read_scope, session_scope
from storage.models import utcnow
from trainer.benchmarking.benchmark import BenchmarkInputError, load_profiles, run_benchmark
from trainer.benchmarking.checks import benchmark_problems, problems_text
from trainer.benchmarking.compare import (
    COMPARE_JOB_KIND,
    CompareConfig,
    comparison_job,
    comparison_pairs,
    dialogues_by_persona,
    get_comparison,
    model_ref,
    paired_summary,
    shown_status,
)
from trainer.jobs.foreground import resume_foreground, run_foreground
from trainer.jobs.queue import create_job, launch

SIDES = ("a", "b")


def comparison_problems(store: Optional[Engine], config: CompareConfig) -> dict[str, str]:
    """Every problem of both sides (policies `a` and `b`, the simulated user, the personas, the pack), each
    under its field; empty when the comparison can run."""
    problems = config.errors()
    for side in SIDES:
        if side in problems:
            continue
        side_problems = benchmark_problems(store, config.benchmark_config(side, 0), policy_field=side)
        problems.update({k: v for k, v in side_problems.items() if k not in problems})
    return problems


def check_comparison(store: Optional[Engine], config: CompareConfig) -> CompareConfig:
    """Every input checked before anything is played; BenchmarkInputError naming every problem at once."""
    if problems := comparison_problems(store, config):
        raise BenchmarkInputError(problems_text("comparison", problems))
    return config


def create_comparison(store: Engine, config: CompareConfig) -> tuple[int, int]:
    """Check, then record the comparison and its (queued) job; (comparison id, job id)."""
    check_comparison(store, config)
    with session_scope(store) as s:
        row = Comparison(name=config.name, config=asdict(config), code_version=code_version(), status="running",
                         eval_runs={"a": [], "b": []})
        s.add(row)
        s.flush()
        comparison_id = row.id
    job_config = {"comparison_id": comparison_id, **({"gpus": config.gpus} if config.gpus else {})}
    job_id = create_job(store, COMPARE_JOB_KIND, job_config, seed=config.seed,
                        name=config.name or f"compare {config.a} vs {config.b}")
    return comparison_id, job_id


def start_comparison_job(store: Engine, store_url: str, config: CompareConfig) -> tuple[int, int]:
    """Record a comparison and launch its job in the background (the Compare view's Start)."""
    comparison_id, job_id = create_comparison(store, config)
    launch(store_url, job_id)
    return comparison_id, job_id


def run_comparison(store: Engine, config: CompareConfig, log: Callable[[str], None] = print,
                   clean_stdout: bool = False) -> int:
    """Record a comparison and play it here as its job's owner (the command line); its id. The comparison's
    status says how it ended (succeeded, cancelled, failed)."""
    comparison_id, job_id = create_comparison(store, config)
    run_foreground(store, job_id, lambda ctx: play_comparison(store, comparison_id, ctx, log), clean_stdout)
    return comparison_id


def resume_comparison(store: Engine, comparison_id: int, log: Callable[[str], None] = print,
                      stop_owner: bool = False, clean_stdout: bool = False) -> int:
    """Continue a comparison here: only the eval runs and pairs it lacks are played. JobError while another
    process owns it (naming its pid); BenchmarkInputError when it does not exist or is finished."""
    job = _resumable_job(store, comparison_id)
    resume_foreground(store, job["id"], lambda ctx: play_comparison(store, comparison_id, ctx, log),
                      stop_owner=stop_owner, clean_stdout=clean_stdout)
    return comparison_id


def resume_comparison_job(store: Engine, store_url: str, comparison_id: int) -> int:
    """Resume the comparison's job in the background (the Compare view's Resume); the job id."""
    from trainer.jobs.control import resume

    job = _resumable_job(store, comparison_id)
    resume(store, store_url, job["id"])
    return job["id"]


def _resumable_job(store: Engine, comparison_id: int) -> dict[str, Any]:
    row = get_comparison(store, comparison_id)
    if row is None:
        raise BenchmarkInputError(f"resume: comparison {comparison_id} does not exist")
    if row["status"] == "succeeded":
        raise BenchmarkInputError(f"resume: comparison {comparison_id} already finished")
    job = comparison_job(store, comparison_id)
    if job is None:
        raise BenchmarkInputError(f"resume: comparison {comparison_id} was recorded before comparisons were jobs "
                                  "and cannot be continued; start it again")
    return job


def run_comparison_job(store: Engine, ctx: Any) -> dict[str, Any]:
    """Entry of a "compare" job (trainer.job_runner)."""
    return {"comparison_status": play_comparison(store, int(ctx.config["comparison_id"]), ctx, print)}


class _SideJob:
    """What run_benchmark sees of the comparison's job while one side plays: the job's id and Cancel, its
    progress over the whole comparison, the side's score as metrics named by side and seed."""

    def __init__(self, job: Any, offset: int, grand_total: int, prefix: str):
        self.job, self.job_id = job, job.job_id
        self.offset, self.grand_total, self.prefix = offset, grand_total, prefix

    @property
    def cancelled(self) -> bool:
        return self.job.cancelled

    def progress(self, step: int, total: int) -> None:
        self.job.progress(self.offset + step, self.grand_total)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.job.log_metrics(step, {f"{self.prefix}{k}": v for k, v in metrics.items()})


def _set(store: Engine, comparison_id: int, **values: Any) -> None:
    with session_scope(store) as s:
        row = s.get(Comparison, comparison_id)
        for k, v in values.items():
            setattr(row, k, v)


def _side_run(store: Engine, job_id: int, name: str) -> tuple[Optional[int], bool]:
    """The job's eval run of that name (id, finished) — one cut off is continued, not replaced."""
    with read_scope(store) as s:
        run = s.scalars(select(EvalRun).where(EvalRun.job_id == job_id, EvalRun.name == name)
                        .order_by(EvalRun.id.desc())).first()
        return (run.id, run.status == "succeeded") if run is not None else (None, False)


def play_comparison(store: Engine, comparison_id: int, job: Any, log: Callable[[str], None] = print) -> str:
    """Play what the comparison lacks, as `job` (a JobContext), link it and store the summary; its status."""
    stored = get_comparison(store, comparison_id)
    config = CompareConfig.from_dict(stored["config"])
    runs = {side: list((stored["eval_runs"] or {}).get(side, [])) for side in SIDES}
    _set(store, comparison_id, status="running", error="", finished_at=None)
    n_profiles = len(load_profiles(config.profiles, config.limit, store))
    grand_total = config.seeds * len(SIDES) * n_profiles
    try:
        for k in range(config.seeds):
            for i, side in enumerate(SIDES):
                if len(runs[side]) > k:
                    continue  # linked: finished
                bc = config.benchmark_config(side, k)
                existing, finished = _side_run(store, job.job_id, bc.name)
                if not finished:
                    log(f"comparison {comparison_id}: {side.upper()} = {getattr(config, side)}, seed {bc.seed}"
                        + (f" (continuing eval run {existing})" if existing else ""))
                    side_job = _SideJob(job, (k * len(SIDES) + i) * n_profiles, grand_total, f"{side}_seed{bc.seed}_")
                    result = run_benchmark(store, None if existing else bc, eval_run_id=existing, job=side_job, log=log)
                    if result.status == "cancelled":
                        _set(store, comparison_id, status="cancelled", error="cancelled", finished_at=utcnow())
                        return "cancelled"
                    if result.status != "succeeded":
                        raise RuntimeError(f"the eval run of {side.upper()} at seed {bc.seed} {result.status}")
                    existing = result.eval_run_id
                runs[side].append(existing)
                _set(store, comparison_id, eval_runs={s_: list(v) for s_, v in runs.items()})
            _link_pairs(store, comparison_id, config.seed + k, runs["a"][k], runs["b"][k])
    except Exception as exc:
        _set(store, comparison_id, status="failed", error=f"{type(exc).__name__}: {exc}", finished_at=utcnow())
        raise
    pairs = comparison_pairs(store, comparison_id)
    with session_scope(store) as s:
        row = s.get(Comparison, comparison_id)
        row.status, row.finished_at = "succeeded", utcnow()
        row.a_ref, row.b_ref = model_ref(s, runs["a"]), model_ref(s, runs["b"])
        row.summary = paired_summary([p["diff"] for p in pairs if p["diff"] is not None], config.seed)
    return "succeeded"


def _link_pairs(store: Engine, comparison_id: int, seed: int, a_run: int, b_run: int) -> None:
    """Pair A's and B's dialogues of one seed persona by persona (pairs already linked are kept)."""
    a_d, b_d = dialogues_by_persona(store, a_run), dialogues_by_persona(store, b_run)
    with session_scope(store) as s:
        linked = set(s.scalars(select(ComparisonPair.persona_id).where(ComparisonPair.comparison_id == comparison_id,
                                                                        ComparisonPair.seed == seed)))
        for persona_id in [p for p in a_d if p in b_d and p not in linked]:
            s.add(ComparisonPair(comparison_id=comparison_id, persona_id=persona_id, seed=seed,
                                 a_dialogue_id=a_d[persona_id], b_dialogue_id=b_d[persona_id]))


# ------------------------------------------------------------------------------------------ what the view shows
def stored_policies(store: Engine, limit: int = 50) -> list[tuple[str, str]]:
    """(label, policy path) of the newest stored training checkpoints whose policy folder is on disk, for
    picking A or B: the path is what --a / --b take."""
    from storage import Checkpoint, Job
    from trainer.checkpoint_layout import policy_path

    with read_scope(store) as s:
        rows = s.execute(select(Checkpoint.job_id, Checkpoint.step, Checkpoint.path, Job.name)
                         .join(Job, Job.id == Checkpoint.job_id).order_by(Checkpoint.id.desc()).limit(limit)).all()
    out = []
    for job_id, step, path, name in rows:
        model = policy_path(path)
        if model and (Path(model) / "config.json").is_file():
            out.append((f"job #{job_id} {name} · step {step}", model))
    return out


def comparison_progress(store: Engine, comparison_id: int) -> dict[str, Any]:
    """status (as shown: a comparison whose process died shows its job's dead / interrupted), done and total
    dialogues, and the time left (s; None until a dialogue of this run of the job has finished), estimated
    from the dialogues finished since the job (re)started."""
    from storage import Dialogue

    row = get_comparison(store, comparison_id)
    if row is None:
        return {}
    job = comparison_job(store, comparison_id)
    out = {"status": shown_status(row, job), "done": 0, "total": 0, "left_s": None, "job_id": None, "error": ""}
    if job is None:
        return out
    out.update(job_id=job["id"], done=job["step"] or 0, total=job["total_steps"] or 0,
               error=job["error"] if out["status"] != row["status"] else row["error"])
    if job["status"] == "running" and job["started_at"] is not None and out["total"]:
        with read_scope(store) as s:
            since = len(list(s.scalars(select(Dialogue.id).where(
                Dialogue.job_id == job["id"], Dialogue.finished_at >= job["started_at"],
                Dialogue.status.in_(("finished", "failed"))))))
        if since:
            elapsed = (utcnow() - job["started_at"]).total_seconds()
            out["left_s"] = elapsed / since * max(0, out["total"] - out["done"])
    return out
