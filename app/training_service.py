"""Presentation helpers for the Training view: the jobs table, a job's summary, curves and checkpoints.

Inputs are the plain dicts of trainer.jobs (list_jobs, job_detail); nothing here starts or stops a job.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

import plotly.graph_objects as go

from app.plots import TIER_COLOURS, tier_bands
from app.render import md
from app.runs_service import Series, curves_figure

JOB_HEADERS = ["id", "name", "kind", "status", "progress", "algorithm", "created", "note"]
LIVE_STATUSES = ("queued", "running")
RESUMABLE = ("interrupted", "failed", "cancelled")


def _when(value: Optional[datetime]) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else ""


def progress_text(job: dict[str, Any]) -> str:
    """'step 3/10 (30%)'; just the percentage when the total is unknown."""
    pct = f"{100 * float(job.get('progress') or 0):.0f}%"
    total = int(job.get("total_steps") or 0)
    return f"step {int(job.get('step') or 0)}/{total} ({pct})" if total else pct


def jobs_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """Rows of the jobs table (JOB_HEADERS), in the order given (list_jobs: newest first)."""
    rows = []
    for j in jobs:
        config = j.get("config") or {}
        note = (j.get("error") or "").splitlines()[0][:120] if j.get("error") else ""
        if j.get("status") == "queued" and j.get("pid"):
            note = note or "waiting for the running job to end"
        rows.append([j["id"], j.get("name", ""), j.get("kind", ""), j.get("status", ""), progress_text(j),
                     config.get("algorithm", ""), _when(j.get("created_at")), note])
    return rows


def job_summary_md(detail: Optional[dict[str, Any]]) -> str:
    """A job's status block (Markdown, every free text escaped)."""
    if not detail:
        return "Select a job in the table."
    cfg = detail.get("config") or {}
    lines = [f"**Job #{detail['id']}** · {md(detail.get('name', ''))} · **{md(detail.get('status', ''))}** · "
             f"{md(progress_text(detail))}"]
    facts = [("model", cfg.get("model")), ("algorithm", cfg.get("algorithm")), ("mode", cfg.get("mode")),
             ("simulator", cfg.get("simulator")), ("seed", detail.get("seed")), ("pid", detail.get("pid")),
             ("heartbeat", _when(detail.get("heartbeat_at"))), ("code", detail.get("code_version"))]
    lines.append(" · ".join(f"{k}: **{md(v)}**" for k, v in facts if v not in (None, "")))
    if detail.get("error"):
        lines.append(f"**Reason:** {md(detail['error'])}")
    return "\n\n".join(lines)


def _series(metrics: dict[str, dict[str, list]], name: str) -> Series:
    m = metrics.get(name) or {}
    return list(zip([int(s) for s in m.get("step", [])], [float(v) for v in m.get("value", [])]))


def reward_names(metrics: dict[str, Any]) -> list[str]:
    return sorted(n for n in metrics if "reward" in n.lower())


def emotion_names(metrics: dict[str, Any]) -> list[str]:
    """Metrics on the emotion scale (0..100): names with 'emotion', rates and counts left out."""
    return sorted(n for n in metrics if "emotion" in n.lower()
                  and not any(w in n.lower() for w in ("rate", "count", "frac", "delta", "std")))


def reward_figure(detail: Optional[dict[str, Any]]) -> go.Figure:
    """The reward metrics of a job against the step."""
    metrics = (detail or {}).get("metrics") or {}
    return curves_figure({n: _series(metrics, n) for n in reward_names(metrics)}, title="reward", y_title="reward")


def emotion_step_figure(detail: Optional[dict[str, Any]]) -> go.Figure:
    """The final-emotion metrics of a job against the step, over the benchmark's tier bands."""
    metrics = (detail or {}).get("metrics") or {}
    fig = curves_figure({n: _series(metrics, n) for n in emotion_names(metrics)}, title="final emotion",
                        y_title="emotion")
    for name, low, high in tier_bands():
        fig.add_hrect(y0=low, y1=high, fillcolor=TIER_COLOURS[name], opacity=0.12, line_width=0, layer="below",
                      annotation_text=name, annotation_position="right", annotation_font_size=11)
    fig.update_yaxes(range=[0, 105])
    return fig


CHECKPOINT_HEADERS = ["step", "path", "metrics", "saved"]


def checkpoint_rows(detail: Optional[dict[str, Any]]) -> list[list[Any]]:
    """Rows of the checkpoints table, newest first (the one to benchmark is usually the latest)."""
    rows = []
    for c in reversed((detail or {}).get("checkpoints") or []):
        metrics = ", ".join(f"{k}={v:.3g}" if isinstance(v, (int, float)) else f"{k}={v}"
                            for k, v in sorted((c.get("metrics") or {}).items()))
        rows.append([c["step"], c["path"], metrics, _when(c.get("created_at"))])
    return rows


def actions_for(status: str) -> dict[str, bool]:
    """Which job buttons make sense: cancel a live job, resume a stopped one, clone any."""
    return {"cancel": status in LIVE_STATUSES, "resume": status in RESUMABLE, "clone": bool(status)}
