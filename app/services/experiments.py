"""Presentation helpers for the Experiments view (and the Training view's Experiment section): the cells'
status, their overlaid training curves, the held-out results table with 95% intervals, the breakdown by
hidden need and personality, reply statistics and the judge radar per cell; launch, cancel and resume.

Plain functions over the store (tested in tests/test_experiments.py); the view only wires them.
Experiments themselves are trainer.experiments.grid (grid, store) and trainer.experiments.runner (the runner).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Optional

import plotly.graph_objects as go
from sqlalchemy import select

from app.judge_panel import judge_radar
from app.render import md
from app.services.runs import curves_figure, metric_names, metric_series
from simulator.evaluation.scoring import bootstrap_interval, sentient_summary
from simulator.user.rules import tier
from storage import Dialogue, Store, Turn, read_scope
from storage.db import PROJECT_ROOT
from trainer.benchmarking import eval_runs
from trainer.experiments import grid
from trainer.experiments.runner import launch_runner, runner_alive

EXAMPLE_GRID = PROJECT_ROOT / "configs" / "experiment-cpu.yaml"
ARMS_GRID = PROJECT_ROOT / "configs" / "experiment-arms-cpu.yaml"  # reward x advantage (trainer.experiments.arms)
STATUS_HEADERS = ["cell", "settings", "status", "training job", "training", "benchmark job", "benchmark",
                  "eval run", "note"]
RESULT_HEADERS = ["cell", "settings", "score", "95% CI", "success", "success 95% CI", "failure", "failure 95% CI",
                  "n", "errors"]
REPLY_HEADERS = ["cell", "settings", "replies", "words / reply", "tokens / reply", "questions / reply",
                 "think words / reply"]
N_BOOT = 2000


def example_grid() -> str:
    """The text the Training view's Experiment box starts with (configs/experiment-cpu.yaml)."""
    return EXAMPLE_GRID.read_text(encoding="utf-8") if EXAMPLE_GRID.is_file() else ""


def arms_grid() -> str:
    """The text the Experiments view's arms box starts with (configs/experiment-arms-cpu.yaml)."""
    return ARMS_GRID.read_text(encoding="utf-8") if ARMS_GRID.is_file() else ""


def experiment_choices(store: Store) -> list[tuple[str, int]]:
    """(label, id) of every experiment, newest first: '#3 algo-x-mode · running · 4 cells'."""
    return [(f"#{e['id']} {e['name']} · {e['status']} · {e['n_cells']} cells", e["id"])
            for e in grid.list_experiments(store)]


def time_preview(grid_text: str) -> str:
    """What an experiment's cells are expected to take before Launch: each cell's steps at the time per step of a
    timed plan of its settings (app.services.plans.training_plan), 'about', never a bound; a cell with no timed plan
    says so. '' for a grid that does not parse (Launch names its problems)."""
    from app.services.plans.training_plan import planned_step_seconds
    from trainer.benchmarking.progress import duration_text
    from trainer.config import TrainConfig

    try:
        spec = grid.parse_grid(grid_text or "", PROJECT_ROOT, check_paths=False)
        configs = [TrainConfig.from_dict({**spec.base, **cell}).to_dict() for cell in spec.cells()]
    except Exception:  # noqa: BLE001  any grid problem: Launch reports it in full
        return ""
    lines, known = [], []
    for i, (cell, config) in enumerate(zip(spec.cells(), configs), 1):
        per_step = planned_step_seconds(config)
        steps = int(config.get("steps") or 0)
        if per_step:
            known.append(per_step * steps)
            lines.append(f"- cell {i} ({md(grid.cell_label(cell))}): about {duration_text(per_step * steps)} "
                         f"({steps} steps × {per_step:.0f} s, a timed plan of its settings)")
        else:
            lines.append(f"- cell {i} ({md(grid.cell_label(cell))}): {steps} steps, not timed yet (Plan in the "
                         "Training view with its settings times a step)")
    at_once = max(1, int(spec.parallel or 1))
    head = (f"**{len(configs)} training cell(s)**, {at_once} at a time, each then benchmarked on "
            f"{md(spec.benchmark.get('profiles', ''))}")
    if known:
        head += (f"; the timed ones about {duration_text(sum(known) / at_once)} together"
                 + ("" if len(known) == len(configs) else ", the others on top"))
    return head + ".\n\n" + "\n".join(lines)


def launch_experiment(store: Store, store_url: str, grid_text: str) -> tuple[Optional[int], str]:
    """Check a grid (relative base_config paths from the project root), record the experiment and start its
    runner in the background; (experiment id or None, the message to show: every problem on its own line)."""
    try:
        spec = grid.parse_grid(grid_text, PROJECT_ROOT)
        experiment_id = grid.create_experiment(store, spec)
    except grid.ExperimentError as exc:
        return None, "Not launched:\n\n" + "\n".join(f"- **{md(k)}**: {md(v)}" for k, v in exc.errors.items())
    try:
        launch_runner(store, store_url, experiment_id)
    except OSError as exc:
        return experiment_id, f"Experiment #{experiment_id} was recorded but its runner could not start: {md(exc)}"
    return experiment_id, f"Launched experiment #{experiment_id} ({len(spec.cells())} cells)."


def cancel(store: Store, experiment_id: int) -> str:
    try:
        return f"Experiment #{experiment_id}: {grid.cancel_experiment(store, experiment_id)}."
    except grid.ExperimentError as exc:
        return md(exc)


def resume(store: Store, store_url: str, experiment_id: int) -> str:
    """Reopen what did not finish and start a runner for it in the background."""
    try:
        reopened = grid.reopen_experiment(store, experiment_id)
        launch_runner(store, store_url, experiment_id)
    except (grid.ExperimentError, OSError) as exc:
        return md(exc)
    jobs = f"; reopened job(s) #{', #'.join(map(str, reopened))}" if reopened else ""
    return f"Experiment #{experiment_id} resumes{jobs}."


def summary_md(exp: Optional[dict[str, Any]]) -> str:
    """The experiment's header: status, runner, grid, benchmark, judge, code version."""
    if not exp:
        return "Pick an experiment (or launch one from the Training view's Experiment section)."
    runner = f"runner alive: process {exp['runner']} on {md(exp.get('runner_host') or '?')}" if runner_alive(exp) \
        else "no runner" if exp["status"] in ("queued", "running") else ""
    done = sum(c["status"] == "succeeded" for c in exp["cells"])
    lines = [f"**Experiment #{exp['id']}** · {md(exp['name'])} · **{md(exp['status'])}**"
             + (f" ({runner})" if runner else "") + f" · {done}/{len(exp['cells'])} cells done · parallel "
             f"{exp['parallel']} · code {md(exp['code_version'] or 'unknown')}",
             "grid: " + " × ".join(f"{md(k)} {{{md(', '.join(map(str, v)))}}}" for k, v in exp["grid"].items()),
             "held-out benchmark: " + ", ".join(f"{md(k)} {md(v)}" for k, v in exp["benchmark"].items())
             + (f" · judge {md(exp['judge'].get('model'))}" if exp["judge"] else "")]
    if exp["error"]:
        lines.append(f"**Reason:** {md(exp['error'])}")
    return "\n\n".join(lines)


def cell_name(cell: dict[str, Any]) -> str:
    return f"cell {cell['index'] + 1}"


def status_rows(exp: Optional[dict[str, Any]]) -> list[list[Any]]:
    """One row per cell (STATUS_HEADERS); its jobs open in the Training view from the table."""
    return [[cell_name(c), c["label"], c["status"], c["train_job_id"] or "", c["train_status"],
             c["benchmark_job_id"] or "", c["benchmark_status"], c["eval_run_id"] or "", (c["error"] or "")[:160]]
            for c in (exp or {}).get("cells", [])]


def _scored(exp: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in (exp or {}).get("cells", []) if c.get("eval_run_id")]


# ------------------------------------------------------------------------------------------------ curves
def metric_choices(store: Store, exp: Optional[dict[str, Any]]) -> list[str]:
    """The metrics any cell's training job recorded (reward first, then emotion, then the rest)."""
    return metric_names(store, [c["train_job_id"] for c in (exp or {}).get("cells", []) if c["train_job_id"]])


def curves(store: Store, exp: Optional[dict[str, Any]], metric: Optional[str]) -> go.Figure:
    """One line per cell of `metric` against the training step."""
    cells = [c for c in (exp or {}).get("cells", []) if c["train_job_id"]]
    if not metric:
        return curves_figure({}, title="training curves")
    series = metric_series(store, [c["train_job_id"] for c in cells], metric)
    return curves_figure({f"{cell_name(c)} {c['label']}": series[c["train_job_id"]] for c in cells}, title=metric)


# ----------------------------------------------------------------------------------------------- results
def _interval(values: list[float]) -> str:
    lo, hi = bootstrap_interval(values, N_BOOT)
    return f"{100 * lo:.0f}–{100 * hi:.0f}%"


def result_row(store: Store, cell: dict[str, Any]) -> list[Any]:
    """A cell's held-out result (RESULT_HEADERS): score with its bootstrap 95% interval, and success and failure
    counts with the bootstrap 95% interval of their share (errored dialogues count as failures, as scored)."""
    finals = [d["final_emotion"] for d in eval_runs.scored_dialogues(store, cell["eval_run_id"])]
    if not finals:
        return [cell_name(cell), cell["label"], "—", "—", "—", "—", "—", "—", 0, 0]
    s = sentient_summary(finals, n_boot=N_BOOT)
    tiers = [tier(0.0 if v is None else float(v)) for v in finals]
    return [cell_name(cell), cell["label"], f"{s.score:.1f}", f"{s.ci_low:.1f}–{s.ci_high:.1f}", s.success,
            _interval([t == "S" for t in tiers]), s.failure, _interval([t == "F" for t in tiers]), s.n, s.n_errors]


def result_rows(store: Store, exp: Optional[dict[str, Any]]) -> list[list[Any]]:
    return [result_row(store, c) for c in _scored(exp)]


def breakdown_rows(store: Store, exp: Optional[dict[str, Any]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """(by hidden need, by personality): the Benchmark view's breakdown rows of each cell, the cell first."""
    from app.render import breakdown_tables

    need, personality = [], []
    for c in _scored(exp):
        by_need, by_personality = breakdown_tables(eval_runs.breakdown(store, c["eval_run_id"]))
        need += [[cell_name(c), *row] for row in by_need]
        personality += [[cell_name(c), *row] for row in by_personality]
    return need, personality


def reply_stats(store: Store, eval_run_id: int) -> dict[str, Optional[float]]:
    """Means over the policy's replies in an eval run: words, tokens (None when not recorded), question
    marks, and words of the think block (None when no reply had one)."""
    with read_scope(store) as s:
        rows = s.execute(select(Turn.text, Turn.think_text, Turn.n_tokens).join(Dialogue)
                         .where(Dialogue.eval_run_id == eval_run_id, Turn.role == "assistant")).all()
    if not rows:
        return {"replies": 0, "words": None, "tokens": None, "questions": None, "think_words": None}
    n = len(rows)
    tokens = [t for _, _, t in rows if t]
    thinks = [len((k or "").split()) for _, k, _ in rows]
    return {"replies": n, "words": sum(len((t or "").split()) for t, _, _ in rows) / n,
            "tokens": sum(tokens) / len(tokens) if tokens else None,
            "questions": sum((t or "").count("?") for t, _, _ in rows) / n,
            "think_words": sum(thinks) / n if any(thinks) else None}


def reply_rows(store: Store, exp: Optional[dict[str, Any]]) -> list[list[Any]]:
    out = []
    for c in _scored(exp):
        st = reply_stats(store, c["eval_run_id"])
        num = lambda v, d=1: "—" if v is None else f"{v:.{d}f}"  # noqa: E731
        out.append([cell_name(c), c["label"], st["replies"], num(st["words"]), num(st["tokens"]),
                    num(st["questions"], 2), num(st["think_words"])])
    return out


def overlaid_radar(named_groups: list[tuple[str, list[dict[str, Any]]]]) -> Optional[go.Figure]:
    """judge_radar of each (name, judge groups) overlaid, its traces prefixed by the name; None when none
    of them has a judged dialogue."""
    fig = None
    for name, groups in named_groups:
        if not any(g.get("means") for g in groups):
            continue
        radar = judge_radar(groups)
        for trace in radar.data:
            trace.name = f"{name} · {trace.name}"
        if fig is None:
            fig = radar
        else:
            fig.add_traces(list(radar.data))
    return fig


def judge_figure(store: Store, exp: Optional[dict[str, Any]]) -> Optional[go.Figure]:
    """The judge radars of every cell overlaid (app.judge_panel.judge_radar per cell, its traces named by
    cell); None when no cell's eval run was judged."""
    from simulator.evaluation.judge_store import eval_run_summary

    return overlaid_radar([(f"{cell_name(c)} {c['label']}", eval_run_summary(store, c["eval_run_id"]))
                           for c in _scored(exp)])


def judge_counts(store: Store, exp: Optional[dict[str, Any]]) -> dict[str, int]:
    """{cell name: dialogues judged without error} (all judges), for the summary line."""
    from simulator.evaluation.judge_store import eval_run_summary

    counts: dict[str, int] = defaultdict(int)
    for c in _scored(exp):
        for g in eval_run_summary(store, c["eval_run_id"]):
            counts[cell_name(c)] += int(g.get("n") or 0)
    return dict(counts)
