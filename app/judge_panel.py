"""The social-cognition judge's scores of an eval run (simulator.evaluation.judge_store) as a radar: one trace per judge
fingerprint (scores from different judges are never averaged together), with a summary line."""
from __future__ import annotations

from typing import Any, Optional

import plotly.graph_objects as go

from app.render import md
from simulator.evaluation.judge import DIMENSION_LABELS, DIMENSIONS


def judge_label(fp: dict[str, Any], judge_hash: str = "") -> str:
    """'MODEL @ host · prompt v1 · t 0.0 · fp 1a2b3c4d'."""
    return " · ".join(x for x in (f"{fp.get('model', '?')} @ {fp.get('endpoint', '')}",
                                  f"prompt {fp.get('prompt_version', '?')}", f"t {fp.get('temperature')}",
                                  f"fp {judge_hash[:8]}" if judge_hash else "") if x)


def judge_radar(groups: list[dict[str, Any]]) -> go.Figure:
    """A Scatterpolar per judge fingerprint over the five dimensions (1-5 scale)."""
    labels = [DIMENSION_LABELS[d] for d in DIMENSIONS]
    fig = go.Figure()
    for g in groups:
        if not g.get("means"):
            continue
        r = [g["means"][d] for d in DIMENSIONS]
        fig.add_trace(go.Scatterpolar(r=r + r[:1], theta=labels + labels[:1], fill="toself",
                                      name=f"{judge_label(g['fingerprint'], g['judge_hash'])} (n {g['n']})"))
    fig.update_layout(polar=dict(radialaxis=dict(range=[0, 5], tickvals=[1, 2, 3, 4, 5])), showlegend=True,
                      legend=dict(orientation="h"), height=420, margin=dict(l=40, r=40, t=30, b=30),
                      template="plotly_white")
    return fig


def judge_view(store: Any, run_id: Optional[int]) -> tuple[str, Optional[go.Figure]]:
    """(summary markdown, radar) of an eval run's judge scores; ('', None) when it has none."""
    from simulator.evaluation.judge_store import eval_run_summary

    if run_id in (None, ""):
        return "", None
    groups = eval_run_summary(store, int(run_id))
    if not groups:
        return "", None
    lines = []
    for g in groups:
        means = ", ".join(f"{DIMENSION_LABELS[d]} {g['means'][d]:.2f}" for d in DIMENSIONS) if g["means"] else "—"
        errors = ", ".join(f"{k} {v}" for k, v in sorted(g["errors"].items()))
        lines.append(f"**Social-cognition judge** {md(judge_label(g['fingerprint'], g['judge_hash']))} · "
                     f"n {g['n']}" + (f" · errors {g['n_errors']} ({errors})" if g["n_errors"] else "")
                     + f" · {means}")
    return "\n\n".join(lines), judge_radar(groups)
