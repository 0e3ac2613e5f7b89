"""Presentation helpers for the Training and Runs views: curves, config diffs, a step's dialogue groups.

Plain functions over the store and plain data, so the Gradio handlers stay one line each and the logic
is unit-tested without a browser. Reads only (read_scope); jobs are started and stopped by trainer.jobs.queue.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Iterable, Optional

import plotly.graph_objects as go
from sqlalchemy import Engine, select

from storage import Dialogue, Job, Metric, read_scope

Series = list[tuple[int, float]]
MAX_COMPARE = 4


def metric_names(store: Engine, job_ids: Iterable[int]) -> list[str]:
    """Names of the metrics any of the jobs recorded, sorted (reward first, then emotion, then the rest)."""
    ids = [int(j) for j in job_ids]
    if not ids:
        return []
    with read_scope(store) as s:
        names = set(s.scalars(select(Metric.name).where(Metric.job_id.in_(ids)).distinct()))
    return sorted(names, key=lambda n: (0 if "reward" in n else 1 if "emotion" in n else 2, n))


def metric_series(store: Engine, job_ids: Iterable[int], name: str) -> dict[int, Series]:
    """{job_id: [(step, value), ...]} of one metric, ordered by step; jobs without it map to []."""
    ids = [int(j) for j in job_ids]
    out: dict[int, Series] = {j: [] for j in ids}
    if not ids:
        return out
    with read_scope(store) as s:
        rows = s.execute(select(Metric.job_id, Metric.step, Metric.value)
                         .where(Metric.job_id.in_(ids), Metric.name == name).order_by(Metric.step))
        for job_id, step, value in rows:
            out[job_id].append((int(step), float(value)))
    return out


def job_labels(store: Engine, job_ids: Iterable[int]) -> dict[int, str]:
    """'#id name (algorithm)' per job, for legends and column headers."""
    ids = [int(j) for j in job_ids]
    with read_scope(store) as s:
        found = {j.id: (j.name or j.kind, (j.config or {}).get("algorithm", ""))
                 for j in s.scalars(select(Job).where(Job.id.in_(ids)))} if ids else {}
    labels = {}
    for j in ids:
        if j not in found:
            labels[j] = f"#{j} (missing)"
            continue
        name, algo = found[j]
        labels[j] = f"#{j} {name}" + (f" ({algo})" if algo else "")
    return labels


def curves_figure(series: dict[str, Series], title: str = "", y_title: str = "",
                  marker_step: Optional[int] = None) -> go.Figure:
    """Overlaid line curves, one per label; an optional vertical line marks the picked step."""
    fig = go.Figure()
    for label, points in series.items():
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers",
                                 name=label))
    if marker_step is not None:
        fig.add_vline(x=marker_step, line_dash="dot", line_color="gray")
    fig.update_layout(title=title, xaxis_title="step", yaxis_title=y_title or title, height=320,
                      margin=dict(l=50, r=20, t=40 if title else 20, b=40),
                      legend=dict(orientation="h", y=-0.25), template="plotly_white")
    steps = [p[0] for points in series.values() for p in points]
    if steps and max(steps) - min(steps) <= 20:
        fig.update_xaxes(dtick=1)  # steps are whole numbers: no 1.5 ticks on a short run
    if not any(series.values()):
        fig.add_annotation(text="no data yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def compare_figure(store: Engine, job_ids: list[int], name: str,
                   marker_step: Optional[int] = None) -> go.Figure:
    """One metric of 2-4 jobs overlaid."""
    labels = job_labels(store, job_ids)
    data = metric_series(store, job_ids, name)
    return curves_figure({labels[j]: data[j] for j in job_ids}, title=name, marker_step=marker_step)


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists and scalars kept as values."""
    if not isinstance(config, dict):
        return {prefix: config} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, path))
        else:
            out[path] = value
    return out


def _cell(value: Any) -> str:
    if value is _MISSING:
        return "—"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


_MISSING = object()


def config_diff(configs: dict[str, dict[str, Any]], only_different: bool = True) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of a config table: one row per (dotted) key, one column per run.

    With only_different, keys whose value is the same in every run are left out; a key a run lacks shows
    as '—' and counts as a difference.
    """
    flat = {label: flatten(cfg or {}) for label, cfg in configs.items()}
    keys = sorted(set().union(*[set(f) for f in flat.values()])) if flat else []
    rows = []
    for key in keys:
        values = [f.get(key, _MISSING) for f in flat.values()]
        cells = [_cell(v) for v in values]
        if only_different and len(set(cells)) <= 1:
            continue
        rows.append([key, *cells])
    return ["setting", *flat.keys()], rows


def job_configs(store: Engine, job_ids: list[int]) -> dict[str, dict[str, Any]]:
    """{label: config} of the jobs, in the order given."""
    labels = job_labels(store, job_ids)
    with read_scope(store) as s:
        found = {j.id: dict(j.config or {}) for j in s.scalars(select(Job).where(Job.id.in_(job_ids)))} \
            if job_ids else {}
    return {labels[j]: found.get(j, {}) for j in job_ids}


def dialogue_steps(store: Engine, job_id: int) -> list[int]:
    """Steps of a job that recorded dialogues, ascending."""
    with read_scope(store) as s:
        steps = s.scalars(select(Dialogue.step).where(Dialogue.job_id == int(job_id), Dialogue.step.is_not(None))
                          .distinct().order_by(Dialogue.step))
        return [int(x) for x in steps]


def _persona_name(d: Dialogue) -> str:
    snap = d.persona_snapshot or {}
    return str(snap.get("name") or d.persona_id or "?")


def dialogue_cell(d: Dialogue) -> str:
    """'#id persona · emotion · outcome' — the dialogue id comes first so a click can open it."""
    emo = "—" if d.final_emotion is None else f"{d.final_emotion:g}"
    return f"#{d.id} {_persona_name(d)} · {emo} · {d.outcome or d.status}"


def step_groups(store: Engine, job_id: int, step: int) -> tuple[list[str], list[list[str]]]:
    """A step's dialogues, one row per GRPO group (group_id), its rollouts side by side.

    Returns (headers, rows): headers 'group', 'mean', 'rollout 1'..'rollout G'; each cell is
    dialogue_cell(d). Dialogues without a group id (PPO) each form their own row.
    """
    groups: dict[str, list[Dialogue]] = defaultdict(list)
    with read_scope(store) as s:
        for d in s.scalars(select(Dialogue).where(Dialogue.job_id == int(job_id), Dialogue.step == int(step))
                           .order_by(Dialogue.group_id, Dialogue.id)):
            s.expunge(d)
            groups[d.group_id or f"(dialogue {d.id})"].append(d)
    width = max((len(g) for g in groups.values()), default=0)
    rows = []
    for gid, members in groups.items():
        emotions = [d.final_emotion for d in members if d.final_emotion is not None]
        mean = f"{sum(emotions) / len(emotions):.1f}" if emotions else "—"
        cells = [dialogue_cell(d) for d in members] + [""] * (width - len(members))
        rows.append([gid, mean, *cells])
    return ["group", "mean", *[f"rollout {i + 1}" for i in range(width)]], rows


def dialogue_id_from_cell(value: Any) -> Optional[int]:
    """The dialogue id a table cell names ('#12 ...' or 12), or None."""
    text = str(value or "").strip()
    if text.startswith("#"):
        text = text[1:]
    head = text.split(" ", 1)[0]
    return int(head) if head.isdigit() else None


def parse_job_ids(values: Iterable[Any]) -> list[int]:
    """Job ids from dropdown choices like '#3 name' or 3, de-duplicated, in order."""
    out: list[int] = []
    for v in values or []:
        jid = dialogue_id_from_cell(v)
        if jid is not None and jid not in out:
            out.append(jid)
    return out
