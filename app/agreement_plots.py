"""Plotly figures of the agreement report: the simulator's change against people's, and agreement per need."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from simulator.evaluation.agreement import group_units


def agreement_scatter(rows: Sequence[dict[str, Any]], height: int = 360) -> go.Figure:
    """One point per rated turn: the simulator's change (x) against the raters' mean (y); the diagonal is
    perfect agreement, points below it are turns the simulator scored more generously than people."""
    units = [u for u in group_units(rows).values() if u["simulator"] is not None]
    xs = [float(u["simulator"]) for u in units]
    ys = [sum(u["human"].values()) / len(u["human"]) for u in units]
    labels = [f"dialogue {u['row']['dialogue_id']} turn {u['row']['turn_index']} · {len(u['human'])} rater(s)"
              for u in units]
    lim = max([10.0] + [abs(v) for v in xs + ys])
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="markers", text=labels, name="rated turns",
                               hovertemplate="%{text}<br>simulator %{x:+.1f} · people %{y:+.1f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[-lim, lim], y=[-lim, lim], mode="lines", name="agreement",
                             line=dict(dash="dot", color="#888")))
    fig.update_layout(title=dict(text="Emotion change: simulator vs people", font_size=14), height=height,
                      xaxis_title="simulator's change", yaxis_title="people's change (mean)", showlegend=False,
                      template="plotly_white", margin=dict(l=50, r=20, t=40, b=40))
    return fig


def need_bars(report: dict[str, Any], height: int = 320) -> go.Figure:
    """Per persona need: mean absolute difference and mean difference (simulator - people), with intervals."""
    groups = report.get("by_need_category", {})
    names = list(groups)
    fig = go.Figure()
    for stat, label in (("mean_abs_diff", "mean |simulator - people|"), ("mean_diff", "mean (simulator - people)")):
        est = [groups[n][stat] for n in names]
        vals = [e["value"] if e["value"] is not None else 0 for e in est]
        up = [(e["ci_high"] - e["value"]) if e["ci_high"] is not None else 0 for e in est]
        down = [(e["value"] - e["ci_low"]) if e["ci_low"] is not None else 0 for e in est]
        fig.add_trace(go.Bar(x=names, y=vals, name=label, error_y=dict(type="data", array=up, arrayminus=down),
                             text=[f"n {e['n']}" for e in est]))
    fig.update_layout(title=dict(text="Per need", font_size=14), barmode="group", height=height,
                      template="plotly_white", yaxis_title="emotion points", legend=dict(orientation="h", y=-0.3),
                      margin=dict(l=50, r=20, t=40, b=40))
    return fig


def _bar(fig: go.Figure, names: list[str], estimates: list[dict[str, Any]], label: str) -> None:
    vals = [e["value"] if e["value"] is not None else 0 for e in estimates]
    up = [(e["ci_high"] - e["value"]) if e["ci_high"] is not None and e["value"] is not None else 0 for e in estimates]
    down = [(e["value"] - e["ci_low"]) if e["ci_low"] is not None and e["value"] is not None else 0 for e in estimates]
    fig.add_trace(go.Bar(x=names, y=vals, name=label, error_y=dict(type="data", array=up, arrayminus=down),
                         text=[f"n {e['n']}" if e["value"] is not None else (e.get("why") or "")[:40]
                               for e in estimates]))


def human_spearman_bars(report: dict[str, Any], height: int = 340) -> go.Figure:
    """Per simulator fingerprint: Spearman with the people per turn and per dialogue, with 95% intervals over
    dialogues (simulator.evaluation.human_agreement)."""
    tables = report.get("by_fingerprint", {})
    names = [f"{h[:10]} {t['fingerprint'].get('model') or t['fingerprint'].get('backend', '')}"
             for h, t in tables.items()]
    fig = go.Figure()
    _bar(fig, names, [t["turns"]["spearman"] for t in tables.values()], "per turn: change vs score")
    _bar(fig, names, [t["dialogues"]["spearman"] for t in tables.values()], "per dialogue: total vs pre-to-post")
    fig.update_layout(title=dict(text=f"Rank agreement with the people of {report.get('set', '')}", font_size=14),
                      barmode="group", height=height, template="plotly_white", yaxis_title="Spearman",
                      yaxis_range=[-1, 1], legend=dict(orientation="h", y=-0.3), margin=dict(l=50, r=20, t=40, b=40))
    return fig


def human_group_bars(report: dict[str, Any], key: str = "problem_type", height: int = 340) -> go.Figure:
    """Per problem (or emotion) type: each simulator's per-turn Spearman with the people, with intervals."""
    fig = go.Figure()
    for h, t in report.get("by_fingerprint", {}).items():
        groups = t.get(f"by_{key}", {})
        _bar(fig, list(groups), [g["turns"]["spearman"] for g in groups.values()], h[:10])
    fig.update_layout(title=dict(text=f"Per-turn Spearman by {key.replace('_', ' ')}", font_size=14),
                      barmode="group", height=height, template="plotly_white", yaxis_title="Spearman",
                      yaxis_range=[-1, 1], legend=dict(orientation="h", y=-0.3), margin=dict(l=50, r=20, t=40, b=40))
    return fig


def change_by_score_lines(report: dict[str, Any], height: int = 340) -> go.Figure:
    """The calibration curve: per simulator fingerprint, its mean change at each of the people's scores with the
    95% interval over dialogues (simulator.evaluation.people.measures), and the declared mapping."""
    fig = go.Figure()
    mapped: dict[float, float] = {}
    for h, t in report.get("by_fingerprint", {}).items():
        curve = t.get("change_by_score") or []
        mapped.update({c["score"]: c["mapped"] for c in curve})
        up = [(c["ci_high"] - c["mean"]) if c["ci_high"] is not None else 0 for c in curve]
        down = [(c["mean"] - c["ci_low"]) if c["ci_low"] is not None else 0 for c in curve]
        fig.add_trace(go.Scatter(x=[c["score"] for c in curve], y=[c["mean"] for c in curve], mode="lines+markers",
                                 name=f"{h[:10]} {t['fingerprint'].get('model') or t['fingerprint'].get('backend', '')}",
                                 error_y=dict(type="data", array=up, arrayminus=down),
                                 text=[f"n {c['n']} in {c['n_dialogues']} dialogue(s)" for c in curve],
                                 hovertemplate="score %{x:g}: %{y:+.1f} (%{text})<extra></extra>"))
    if mapped:
        xs = sorted(mapped)
        fig.add_trace(go.Scatter(x=xs, y=[mapped[x] for x in xs], mode="lines", name="declared map",
                                 line=dict(dash="dot", color="#888")))
    fig.update_layout(title=dict(text="Simulator's change at each person's score", font_size=14), height=height,
                      template="plotly_white", xaxis_title="the person's score", yaxis_title="mean simulator change",
                      legend=dict(orientation="h", y=-0.3), margin=dict(l=50, r=20, t=40, b=40))
    return fig


def policy_ranking_points(report: dict[str, Any], height: int = 340) -> go.Figure:
    """The ranking of policies: per simulator fingerprint, each policy at the people's mean score (x) and the
    simulator's mean change per rated turn (y); a simulator that ranks policies as the people did rises left to
    right. Where no simulator has two policies to rank, the figure says why."""
    fig = go.Figure()
    why = ""
    for h, t in report.get("by_fingerprint", {}).items():
        ranking = t.get("policy_ranking") or {}
        points = ranking.get("policies") or []
        if not points:
            why = why or ranking.get("why", "")
            continue
        rho = ranking["spearman"]["value"]
        fig.add_trace(go.Scatter(x=[p["people_mean"] for p in points], y=[p["sim_mean"] for p in points],
                                 mode="markers+text", text=[p["policy"][:24] for p in points],
                                 textposition="top center",
                                 name=f"{h[:10]} (spearman {'-' if rho is None else format(rho, '+.2f')})",
                                 customdata=[p["n_dialogues"] for p in points],
                                 hovertemplate="%{text}: people %{x:.2f}, simulator %{y:+.2f} (n %{customdata} "
                                               "dialogues)<extra></extra>"))
    if not fig.data and why:
        fig.add_annotation(text=why[:120], showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=dict(text="Ranking of policies: people against the simulator", font_size=14),
                      height=height, template="plotly_white", xaxis_title="people's mean score",
                      yaxis_title="simulator's mean change", legend=dict(orientation="h", y=-0.3),
                      margin=dict(l=50, r=20, t=40, b=40))
    return fig
