"""The People view's work: import a human-played corpus, start and follow a shadow job (a simulator
played over every reply of a human set, trainer.benchmarking.shadow_jobs) in the background, resume one that
was cut off, and the agreement report of a set (simulator.evaluation.human_agreement)."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from app.render import md
from simulator.evaluation.human_corpora import human_sets, import_corpus
from simulator.evaluation.ratings import decode_text
from storage import Store
from storage.models import utcnow
from trainer.benchmarking.shadow_jobs import SHADOW_JOB_KIND, create_shadow_job
from trainer.jobs import queue as job_queue

RESUMABLE = ("dead", "interrupted", "failed", "cancelled")


def import_file(store: Store, path: Optional[str], fmt: str, name: str, keep_valid: bool) -> str:
    """The import's message (Markdown): what was stored, and each bad conversation."""
    if not path:
        return "**Choose a corpus file first.**"
    from pathlib import Path

    try:
        text = decode_text(Path(path).read_bytes(), Path(path).name)
        report = import_corpus(store, text, fmt, (name or fmt).strip(), keep_valid=keep_valid,
                               file_name=Path(path).name)
    except ValueError as exc:
        return f"**Nothing imported:** {md(exc)}"
    bad = "\n".join(f"- {md(e)}" for e in report.errors[:50])
    more = f"\n- ... and {len(report.errors) - 50} more" if len(report.errors) > 50 else ""
    if report.errors and not keep_valid:
        return f"**Nothing imported:** {len(report.errors)} bad conversation(s).\n{bad}{more}"
    head = f"Imported {len(report.dialogue_ids)} dialogue(s) into `human:{md(report.corpus)}`"
    if report.duplicates:
        head += f"; {len(report.duplicates)} already there (skipped)"
    return head + (f". Left out {len(report.errors)}:\n{bad}{more}" if report.errors else ".")


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


def resume_shadow(store: Store, store_url: str, job_id: Optional[int]) -> str:
    """Reopen a shadow job that was cut off and launch it again; the refusal named (its owner still lives...)."""
    if not job_id:
        return "**No shadow run to resume.**"
    try:
        job_queue.reopen(store, int(job_id))
    except job_queue.JobError as exc:
        return f"**Not resumed:** {md(exc)}"
    job_queue.launch(store_url, int(job_id))
    return f"Shadow job {job_id} resumed: only the turns not yet judged are played."


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
        done, total = int(j.get("step") or 0), int(j.get("total_steps") or config.get("total") or 0)
        left = ""
        started = j.get("started_at")
        if j["status"] in ("running", "stalled") and done and started:
            elapsed = (now - started).total_seconds() if isinstance(started, datetime) else 0
            left = f"~{elapsed / done * (total - done):.0f} s" if elapsed > 0 else ""
        if resumable is None and j["status"] in RESUMABLE:
            resumable = j["id"]
        lines.append(f"| {j['id']} | `{md(config.get('set', ''))}` | `{md((config.get('simulator') or {}).get('spec', ''))}`"
                     f" · {md(str(config.get('fingerprint_hash', ''))[:12])} | {md(j['status'])} | {done}/{total} | {left} |")
    return "\n".join(lines), resumable
