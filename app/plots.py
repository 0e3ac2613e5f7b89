"""Plotly emotion curves with the Sentient benchmark's tier bands (S/A/B/C/F), shared by every view."""
from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from simulator.rules import TIERS

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
