"""The People view's work: import a human-played corpus as a job (its own process, bounded in conversations:
trainer.import_jobs), start and follow a shadow job (a simulator
played over every reply of a human set, trainer.benchmarking.shadow_jobs) in the background, resume one that
was cut off, and the agreement report of a set (simulator.evaluation.human_agreement)."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from app.render import code, md
from simulator.evaluation.human_corpora import human_sets
from storage import Store
from storage.models import utcnow
from trainer.benchmarking.shadow_jobs import SHADOW_JOB_KIND, create_shadow_job
from trainer.import_jobs import IMPORT_JOB_KIND, create_import_job, import_bound
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

RESUMABLE = ("dead", "interrupted", "failed", "cancelled")
LIVE = ("queued", "running", "stalled")


def start_import(store: Store, store_url: str, path: Optional[str], fmt: str, name: str, keep_valid: bool,
                 version: str = "", add: bool = False) -> tuple[str, Optional[int]]:
    """Record and launch an import job for an uploaded corpus file (its own process, bounded in conversations):
    (message, job id or None when refused, the problem named)."""
    if not path:
        return "**Choose a corpus file first.**", None
    bound = import_bound()
    settings = {"format": fmt, "name": (name or "").strip(), "keep_valid": bool(keep_valid),
                "version": (version or "").strip(), "add": bool(add), "max_conversations": bound,
                "bound": f"the most a web import takes (the owner's --max-import-conversations {bound})"}
    try:
        job_id = create_import_job(store, path, settings)
    except ValueError as exc:  # JobError too: the owner's ceiling of live jobs
        return f"**Not started:** {md(exc)}", None
    job_queue.launch(store_url, job_id)
    return f"Import job {job_id} started: {code(Path(path).name)} (at most {bound:,} conversations).", job_id


def target_of(config: dict[str, Any]) -> str:
    """The set an import job's settings name: human:NAME, or human:NAME@VERSION."""
    return f"human:{config.get('name', '')}" + (f"@{config['version']}" if config.get("version") else "")


def import_result_md(job: dict[str, Any]) -> str:
    """What an import job did, or is doing (Markdown): what was stored, each bad conversation, or why nothing."""
    config, status = job.get("config") or {}, job["status"]
    if status in LIVE:
        count = int(job.get("step") or 0)
        doing = (f"storing {count:,} conversation(s) into {code(target_of(config))}"
                 if config.get("stage") == "storing" else f"{count:,} conversation(s) read")
        return f"Import job {job['id']} ({md(status)}): {doing}"
    result = config.get("result") or {}
    errors, bad = result.get("errors") or [], int(result.get("bad") or 0)
    listed = "\n".join(f"- {md(e)}" for e in errors)
    if bad > len(errors):
        listed += f"\n- ... and {bad - len(errors)} more"
    if status != "succeeded":
        reason = (job.get("error") or status).removeprefix("ValueError: ")
        return f"**Nothing imported** (job {job['id']}, {md(status)}): {md(reason)}" + (f"\n{listed}" if errors else "")
    head = (f"Imported {result['imported']:,} dialogue(s) into {code(result['set'])}: {result['turns']:,} turns, "
            f"{result['ratings']:,} people's ratings on {result['rated_turns']:,} turns, {result['state_pairs']:,} "
            "pre/post pairs")
    if result.get("duplicates"):
        head += f"; {result['duplicates']:,} already there (unchanged, skipped)"
    return head + (f". Left out {bad}:\n{listed}" if bad else ".")


def import_jobs_md(store: Store) -> tuple[str, Optional[int]]:
    """The newest import job's result, then a table of the import jobs; (Markdown, the live job's id or None)."""
    jobs = job_queue.list_jobs(store, kind=IMPORT_JOB_KIND)
    if not jobs:
        return "", None
    live = next((j["id"] for j in jobs if j["status"] in LIVE), None)
    lines = ["| job | file | set | status | conversations |", "|---|---|---|---|---|"]
    for j in jobs[:10]:
        config = j.get("config") or {}
        done = (config.get("result") or {}).get("imported", j.get("step") or 0)
        lines.append(f"| {j['id']} | {code(config.get('file_name', ''))} | {code(target_of(config))} | "
                     f"{md(j['status'])} | {done:,} |")
    return import_result_md(jobs[0]) + "\n\n" + "\n".join(lines), live


def cancel_import(store: Store, job_id: Optional[int]) -> str:
    """Cancel a live import job: it stops with nothing stored."""
    if not job_id:
        return "No import is running."
    return f"Import job {job_id}: {md(job_control.cancel(store, int(job_id)))}; nothing of it is stored."


def sets_md(store: Store) -> str:
    rows = human_sets(store)
    if not rows:
        return "No human sets yet: import a corpus above."
    return "| set | dialogues |\n|---|---|\n" + "\n".join(f"| `human:{md(r['name'])}` | {r['n']} |" for r in rows)


def start_shadow(store: Store, store_url: str, set_spec: str, simulator: str, base_url: str,
                 seed: Any) -> tuple[str, Optional[int]]:
    """Record and launch a shadow job: (message, job id or None when refused, the problem named)."""
    try:
        seed_value = int(float(seed or 0))
        job_id = create_shadow_job(store, {"spec": (simulator or "offline").strip(), "base_url": (base_url or "").strip()},
                                   (set_spec or "").strip(), seed_value)
    except (TypeError, ValueError) as exc:
        return f"**Not started:** {md(exc)}", None
    job_queue.launch(store_url, job_id)
    return f"Shadow job {job_id} started.", job_id


def resume_job(store: Store, store_url: str, job_id: Optional[int], what: str = "Shadow job",
               after: str = "only the turns not yet judged are played") -> str:
    """Reopen a job that plays a simulator over a set (shadow, calibrate) that was cut off and launch it again;
    the refusal named (its owner still lives...)."""
    if not job_id:
        return f"**No {what.lower()} to resume.**"
    try:
        job_control.reopen(store, int(job_id))
    except job_queue.JobError as exc:
        return f"**Not resumed:** {md(exc)}"
    job_queue.launch(store_url, int(job_id))
    return f"{what} {job_id} resumed: {after}."


def resume_shadow(store: Store, store_url: str, job_id: Optional[int]) -> str:
    """Reopen a shadow job that was cut off and launch it again; the refusal named (its owner still lives...)."""
    return resume_job(store, store_url, job_id)


def judged_turns(job: dict[str, Any]) -> tuple[int, int]:
    """(turns judged, turns to judge) of a job that plays a simulator over a set (shadow, calibrate)."""
    config = job.get("config") or {}
    return int(job.get("step") or 0), int(job.get("total_steps") or config.get("total") or 0)


def time_left(job: dict[str, Any], now: datetime) -> str:
    """'~N s' the running job has left at its pace since it started ('' when not running or nothing done)."""
    (done, total), started = judged_turns(job), job.get("started_at")
    if job["status"] not in ("running", "stalled") or not done or not isinstance(started, datetime):
        return ""
    elapsed = (now - started).total_seconds()
    return f"~{elapsed / done * (total - done):.0f} s" if elapsed > 0 else ""


def shadow_jobs_md(store: Store, now: Optional[datetime] = None) -> tuple[str, Optional[int]]:
    """The shadow jobs, newest first, with progress and time left; (Markdown, the newest resumable job's id)."""
    jobs = job_queue.list_jobs(store, kind=SHADOW_JOB_KIND)
    if not jobs:
        return "No shadow runs yet.", None
    now = now or utcnow()
    lines = ["| job | set | simulator | status | turns | time left |", "|---|---|---|---|---|---|"]
    resumable = None
    for j in jobs[:20]:
        config = j.get("config") or {}
        done, total = judged_turns(j)
        left = time_left(j, now)
        if resumable is None and j["status"] in RESUMABLE:
            resumable = j["id"]
        lines.append(f"| {j['id']} | `{md(config.get('set', ''))}` | `{md((config.get('simulator') or {}).get('spec', ''))}`"
                     f" · {md(str(config.get('fingerprint_hash', ''))[:12])} | {md(j['status'])} | {done}/{total} | {left} |")
    return "\n".join(lines), resumable
