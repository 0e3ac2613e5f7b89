"""The People view's calibration panel: start a "calibrate" job (trainer.benchmarking.calibrate_jobs: a
simulator's shadow judgements of a human set where it lacks them, then the fit, saved in the lab's folder),
follow the calibrate jobs with their progress and time left, resume one cut off, and list the saved
calibrations with their held-out figures before and after."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from app.render import code, md
from app.services.people.human_sets import RESUMABLE, judged_turns, resume_job, time_left
from simulator.user.calibration import saved_calibrations
from storage import Store
from storage.models import utcnow
from trainer.benchmarking.calibrate_jobs import CALIBRATE_JOB_KIND, create_calibrate_job
from trainer.jobs import queue as job_queue


def whole_folds(folds: Any) -> int:
    """The panel's folds as a whole number (ValueError naming --folds); the job checks it is 2 or more."""
    try:
        value = float(folds)
    except (TypeError, ValueError):
        raise ValueError(f"--folds: a whole number of 2 or more, got {folds!r}") from None
    if not value.is_integer():
        raise ValueError(f"--folds: a whole number of 2 or more, got {folds!r}")
    return int(value)


def start_calibration(store: Store, store_url: str, set_spec: str, simulator: str, base_url: str, name: str,
                      folds: Any, reply_signal: bool = False, method: str = "predict") -> tuple[str, Optional[int]]:
    """Record and launch a calibrate job: (message, job id or None when refused, the field named);
    `reply_signal`: fit the second level too (simulator.fitting.reply_signal_fit); `method`: the map
    (simulator.fitting.monotone_map.MAPS)."""
    try:
        job_id = create_calibrate_job(store, {"spec": (simulator or "").strip(), "base_url": (base_url or "").strip()},
                                      (set_spec or "").strip(), (name or "").strip(), whole_folds(folds),
                                      reply_signal=bool(reply_signal), method=str(method or ""))
    except ValueError as exc:  # JobError too: the owner's ceiling of live jobs
        return f"**Not started:** {md(exc)}", None
    job_queue.launch(store_url, job_id)
    return f"Calibrate job {job_id} started: {code((name or '').strip())}.", job_id


def resume_calibration(store: Store, store_url: str, job_id: Optional[int]) -> str:
    """Reopen a calibrate job that was cut off and launch it again: only the turns not yet judged are played."""
    return resume_job(store, store_url, job_id, "Calibrate job",
                      "only the turns not yet judged are played, then the fit")


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:+.2f}"


def before_after(report: dict[str, Any], stat: str) -> str:
    """'0.41 -> 0.47': a held-out per-turn figure before and after calibration (and '-> 0.52' after the map with
    the reply signal, when one was fitted)."""
    sides = ("before", "after", "after_signal") if "after_signal" in report else ("before", "after")
    return " -> ".join(_figure(((report.get(side) or {}).get("turns") or {}).get(stat, {}).get("value"))
                       for side in sides)


def calibrate_jobs_md(store: Store, now: Optional[datetime] = None) -> tuple[str, Optional[int], bool]:
    """The calibrate jobs, newest first (stage, turns judged, time left, what each saved); (Markdown, the newest
    resumable job's id, whether one is live)."""
    jobs = job_queue.list_jobs(store, kind=CALIBRATE_JOB_KIND)
    if not jobs:
        return "No calibrate jobs yet.", None, False
    now = now or utcnow()
    lines = ["| job | calibration | set | simulator | status | turns judged | time left | saved |",
             "|---|---|---|---|---|---|---|---|"]
    resumable, live = None, False
    for j in jobs[:10]:
        config = j.get("config") or {}
        done, total = judged_turns(j)
        result = config.get("result") or {}
        saved = f"{code(result['hash'])}, turn Spearman {before_after(result, 'spearman')}" if result else ""
        status = j["status"] + (f" ({config['stage']})" if j["status"] in ("running", "stalled")
                                and config.get("stage") else "")
        if resumable is None and j["status"] in RESUMABLE:
            resumable = j["id"]
        live = live or j["status"] in ("queued", "running", "stalled")
        lines.append(f"| {j['id']} | {code((config.get('calibration') or {}).get('name', ''))} | "
                     f"{code(config.get('set', ''))} | {code((config.get('simulator') or {}).get('spec', ''))} · "
                     f"{md(str(config.get('fingerprint_hash', ''))[:12])} | {md(status)} | {done}/{total} | "
                     f"{time_left(j, now)} | {saved} |")
    newest = jobs[0]
    if newest["status"] == "failed" and newest.get("error"):
        lines.insert(0, f"**Calibrate job {newest['id']} failed:** {md(newest['error'])}\n")
    return "\n".join(lines), resumable, live


def saved_md(home: Optional[Path] = None) -> str:
    """The lab's saved calibrations: name, map, simulator fingerprint, rated turns, held-out per-turn Spearman and
    mean difference (simulator - people) before -> after (-> with the reply signal)."""
    rows = saved_calibrations(home)
    if not rows:
        return "No saved calibrations yet."
    lines = ["| calibration | map | simulator fingerprint | turns | turn Spearman (held out) | "
             "mean difference (held out) |", "|---|---|---|---|---|---|"]
    for cal in rows:
        lines.append(f"| {code(cal.name)} | {cal.data.get('map', 'predict')} | {code(cal.simulator_fingerprint_hash)} | "
                     f"{cal.report.get('n_turns', cal.data.get('n_turns', ''))} | {before_after(cal.report, 'spearman')} | "
                     f"{before_after(cal.report, 'mean_diff')} |")
    return "\n".join(lines)
