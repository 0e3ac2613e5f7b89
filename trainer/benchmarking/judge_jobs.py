"""Judge runs as jobs: `python -m trainer judge` records a "judge" job and runs it in its own process as the
job's owner (trainer.jobs.foreground: the owner lock, the heartbeat), so a run is listed with the other jobs,
shown dead when killed and stalled when its heartbeat is late, and resumed like any job.

    job_id, summary = run_judge_foreground(store, settings, selection)   # the command line: record, judge here
    summary = resume_judge(store, job_id)                        # refused while the owner lives (pid named)
    RUNNERS["judge"] -> run_judge_job(store, ctx)               # `trainer resume ID`, `trainer job ID`

The job's config holds the judge's settings (JUDGE_SETTINGS, with the endpoint as resolved when the run was
recorded, never the key: that comes from OPENAI_API_KEY each time), the set the dialogues were named by, the
ids of the dialogues it selected then, `force`, and the judge fingerprint's hash. A resume judges only the
dialogues of those ids not yet judged without error under that fingerprint (with `force`: not judged since the
job was created), so no dialogue is judged twice; it is refused when the judge's fingerprint has changed
(e.g. the prompt file was edited), which would store its ratings under another judge.
"""
from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import Engine

from simulator.evaluation.judge import DEFAULT_PROMPT_VERSION, DIMENSIONS, Judge
from simulator.evaluation.judge_store import dialogue_scores, judge_and_store, select_dialogues, summarize
from simulator.llm.hashing import fingerprint_hash
from trainer.jobs.foreground import job_to_resume, resume_foreground, run_foreground
from trainer.jobs.queue import create_job, get_job

JUDGE_JOB_KIND = "judge"
# the judge's settings as a job's config keeps them (the names of `python -m trainer judge`'s options)
JUDGE_SETTINGS = {"model": "", "base_url": None, "temperature": 0.0, "max_tokens": 1024, "timeout": 120.0,
                  "max_retries": 4, "max_in_flight": 8, "prompt_version": DEFAULT_PROMPT_VERSION, "json_schema": True}
SELECTION_KEYS = ("eval_run_id", "job_id", "step", "collection", "dialogue_ids")


def build_judge(settings: dict[str, Any]) -> Judge:
    """The judge of these settings (missing ones take JUDGE_SETTINGS' defaults); ValueError naming the
    option and the problem."""
    cfg = {**JUDGE_SETTINGS, **{k: v for k, v in settings.items() if k in JUDGE_SETTINGS}}
    if not str(cfg["model"] or "").strip():
        raise ValueError("--model: required (the judge model at the endpoint)")
    if cfg["temperature"] < 0:
        raise ValueError(f"--temperature: must be >= 0, got {cfg['temperature']}")
    for name in ("max_tokens", "max_in_flight"):
        if cfg[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')}: must be at least 1, got {cfg[name]}")
    from simulator.user.backends import make_backend

    backend = make_backend(f"openai:{cfg['model']}", base_url=cfg["base_url"], temperature=cfg["temperature"],
                           max_tokens=cfg["max_tokens"], timeout=cfg["timeout"], max_retries=cfg["max_retries"],
                           max_in_flight=cfg["max_in_flight"])
    return Judge(backend, prompt_version=cfg["prompt_version"], json_schema=bool(cfg["json_schema"]))


def create_judge_job(store: Engine, settings: dict[str, Any], selection: dict[str, Any], force: bool = False) -> int:
    """Check the settings and the set of dialogues (ValueError naming the option, nothing recorded), then
    record a queued "judge" job for them; its id."""
    judge = build_judge(settings)
    chosen = {k: v for k, v in selection.items() if k in SELECTION_KEYS and v not in (None, "", [])}
    items = select_dialogues(store, **chosen)
    config = {**JUDGE_SETTINGS, **{k: v for k, v in settings.items() if k in JUDGE_SETTINGS},
              "base_url": judge.backend.base_url, "selection": chosen, "force": bool(force),
              "dialogue_ids": [i.dialogue_id for i in items], "judge_hash": fingerprint_hash(judge.fingerprint())}
    named = ", ".join(f"{k} {v if k != 'dialogue_ids' else len(v)}" for k, v in chosen.items())
    return create_job(store, JUDGE_JOB_KIND, config, name=f"judge {config['model']} · {named}"[:200])


def run_judge_foreground(store: Engine, settings: dict[str, Any], selection: dict[str, Any], force: bool = False,
                         clean_stdout: bool = False) -> tuple[int, Optional[dict[str, Any]]]:
    """Record a judge job and judge its dialogues here as the job's owner; (job id, the run's summary:
    summarize_run; None when cancelled before it began)."""
    job_id = create_judge_job(store, settings, selection, force)
    return job_id, run_foreground(store, job_id, lambda ctx: judge_dialogues(store, ctx), clean_stdout)


def resume_judge(store: Engine, job_id: int, stop_owner: bool = False,
                 clean_stdout: bool = False) -> Optional[dict[str, Any]]:
    """Continue judge job `job_id` here: only its dialogues not yet judged. JobError when it is not a judge
    job or is finished, or while another process owns it (naming its pid; stop_owner kills it first)."""
    job = job_to_resume(store, job_id, JUDGE_JOB_KIND)
    recorded_judge(job_id, job["config"])
    return resume_foreground(store, job_id, lambda ctx: judge_dialogues(store, ctx), stop_owner=stop_owner,
                             clean_stdout=clean_stdout)


def recorded_judge(job_id: int, config: dict[str, Any]) -> Judge:
    """The judge a job's config records; ValueError when it is no longer the one the job started with (its
    fingerprint changed: the prompt file was edited, ...), whose ratings would be stored as another judge's."""
    judge = build_judge(config)
    now = fingerprint_hash(judge.fingerprint())
    if now != config["judge_hash"]:
        raise ValueError(f"judge job {job_id}: the judge is not the one the job started with (fingerprint "
                         f"{config['judge_hash']}, now {now}: its prompt file or settings changed); start a new "
                         "judge run")
    return judge


def judge_dialogues(store: Engine, ctx: Any) -> dict[str, Any]:
    """The work of a judge job (`ctx` a JobContext): judge what its dialogues lack, reporting progress and
    stopping when the job is cancelled; the means go to the job's metrics (step 0, `judge_<dimension>`).
    Returns the run's summary (see summarize_run)."""
    config = ctx.config
    judge = recorded_judge(ctx.job_id, config)
    ids = list(config["dialogue_ids"])
    items = select_dialogues(store, dialogue_ids=ids) if ids else []
    since = (get_job(store, ctx.job_id) or {}).get("created_at") if config.get("force") else None
    report = judge_and_store(store, judge, items, force=bool(config.get("force")), since=since,
                             progress=ctx.progress, stop=lambda: ctx.cancelled)
    summary = summarize_run(store, report, ids)
    if summary["means"]:
        ctx.log_metrics(0, {f"judge_{d}": summary["means"][d] for d in DIMENSIONS})
    return summary


def summarize_run(store: Engine, report: dict[str, Any], dialogue_ids: list[int]) -> dict[str, Any]:
    """What a judge run reports: judge_and_store's counts (`left`: not judged because the run was stopped),
    the means and n over the dialogues of its set judged by its judge (this run and earlier ones), and each
    failure of this run."""
    group = next((g for g in summarize(dialogue_scores(store, dialogue_ids))
                  if g["judge_hash"] == report["judge_hash"]), None)
    failed = [r for r in report["results"] if r.status != "ok"]
    return {"judge_hash": report["judge_hash"], "fingerprint": report["fingerprint"], "dialogues": len(dialogue_ids),
            "judged": report["judged"], "skipped": report["skipped"], "left": report["left"], "ok": report["ok"],
            "errors": report["errors"], "means": (group or {}).get("means", {}), "n": (group or {}).get("n", 0),
            "failures": [{"dialogue_id": r.dialogue_id, "kind": r.error_kind, "error": r.error} for r in failed]}


def run_judge_job(store: Engine, ctx: Any) -> dict[str, Any]:
    """Entry of a "judge" job (trainer.job_runner): the run's summary, its means also as `metrics`."""
    summary = judge_dialogues(store, ctx)
    return {**summary, "metrics": summary["means"]}
