"""Plotly figures shared by the views: emotion curves with the Sentient benchmark's tier bands (S/A/B/C/F)
and the fidelity chart (a set of dialogues' emotion changes beside the published DeepSeek-V3 ones)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import plotly.graph_objects as go

from simulator.user.rules import TIERS

if TYPE_CHECKING:
    from simulator.evaluation.fidelity import FidelityReport

# Band colours, low opacity so overlaid curves stay readable.
TIER_COLOURS = {"S": "#2e7d32", "A": "#7cb342", "B": "#fbc02d", "C": "#fb8c00", "F": "#e53935"}
Y_MAX = 105.0


def tier_bands() -> list[tuple[str, float, float]]:
    """(tier, low, high) for each band, from rules.TIERS (S >= 100, A >= 70, B >= 40, C >= 10, F below)."""
    bands, upper = [], Y_MAX
    for threshold, name in TIERS:
        bands.append((name, threshold, upper))
        upper = threshold
    bands.append(("F", 0.0, upper))
    return bands


def emotion_figure(series: Sequence[tuple[str, Sequence[Optional[float]]]], title: str = "Emotion per turn",
                   height: int = 320) -> go.Figure:
    """One line per (label, emotions); x is the user turn (0 = the opening, before any reply).

    None values (turns without an emotion, e.g. an error) leave a gap instead of a fake point.
    """
    fig = go.Figure()
    for name, low, high in tier_bands():
        fig.add_hrect(y0=low, y1=high, fillcolor=TIER_COLOURS[name], opacity=0.12, line_width=0, layer="below",
                      annotation_text=name, annotation_position="right", annotation_font_size=11)
    n_max = 0
    for label, emotions in series:
        ys = [None if e is None else float(e) for e in emotions]
        n_max = max(n_max, len(ys))
        fig.add_trace(go.Scatter(x=list(range(len(ys))), y=ys, mode="lines+markers", name=str(label),
                                 connectgaps=False, hovertemplate="turn %{x}: %{y:.0f}<extra>%{fullData.name}</extra>"))
    fig.update_layout(
        title=dict(text=title, font_size=14), height=height, margin=dict(l=40, r=30, t=40, b=36),
        xaxis=dict(title="user turn", range=[-0.3, max(n_max - 1, 1) + 0.3], dtick=1),
        yaxis=dict(title="emotion", range=[0, Y_MAX]),
        showlegend=len(series) > 1, legend=dict(orientation="h", y=-0.2), template="plotly_white",
    )
    return fig


def fidelity_figure(report: "FidelityReport", height: int = 300) -> go.Figure:
    """Bars of the share of each emotion change: the lab's dialogues beside the published DeepSeek-V3
    judgements, one category per value of either, with the distances in the title."""
    from simulator.evaluation.fidelity import value_label

    rows = report.rows()
    labels = [value_label(r["value"]) for r in rows]
    fig = go.Figure([
        go.Bar(x=labels, y=[r["share"] for r in rows], name=f"{report.source} (n {report.n})",
               customdata=[r["count"] for r in rows], marker_color="#1e88e5",
               hovertemplate="change %{x}: %{y:.1%} (%{customdata})<extra>lab</extra>"),
        go.Bar(x=labels, y=[r["published_share"] for r in rows], name="published DeepSeek-V3",
               marker_color="#9e9e9e", marker_pattern_shape="/",
               hovertemplate="change %{x}: %{y:.1%}<extra>published</extra>")])
    title = "Emotion changes vs the published DeepSeek-V3 judgements"
    if report.n:
        title += f" · TV {report.tv:.3f} · within sign {report.within_sign:.3f}"
    fig.update_layout(
        title=dict(text=title, font_size=14), height=height, barmode="group", template="plotly_white",
        margin=dict(l=40, r=20, t=40, b=36), legend=dict(orientation="h", y=-0.2),
        xaxis=dict(title="emotion change of a judged user turn", type="category"),
        yaxis=dict(title="share", tickformat=".0%", rangemode="tozero"))
    return fig
