"""Experiments view: pick an experiment (a grid of training configs, `python -m trainer experiment`, the
Training view's Experiment section, or this view's arms box: a grid over reward x advantage); its cells'
status (a click opens the cell's job in Training), their overlaid training curves, the held-out results table
with 95% intervals, the breakdown by hidden need and personality, reply statistics and the judge radar;
Cancel / Resume act on the whole experiment.

The tables and figures come from app.services.experiments; this module only wires them.
"""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr

from app.context import LINK_EVENT, LabContext, changed_only
from app.render import BREAKDOWN_HEADERS
from app.services import experiments

POLL_S = 3.0  # while the experiment shown is live; app.context.IDLE_POLL_S otherwise


def _id(value: Any) -> Optional[int]:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def build(ctx: LabContext) -> None:
    from trainer.experiments import grid

    store, url = ctx.store, ctx.store_url
    with gr.Row():
        pick = gr.Dropdown(choices=[], value=None, label="experiment", scale=4, elem_id="exp-pick")
        cancel = gr.Button("Cancel experiment", scale=1, elem_id="exp-cancel")
        resume = gr.Button("Resume experiment", scale=1, elem_id="exp-resume")
        ctx.jobs_button("exp-all-jobs")
    with gr.Accordion("Launch arms side by side: a grid over reward x advantage, the cells' curves on one plot",
                      open=False, elem_id="exp-arms"):
        arms_text = gr.Textbox(value=experiments.arms_grid(), lines=14, max_lines=40, label="grid (YAML)",
                               elem_id="exp-arms-grid")
        arms_preview = gr.Markdown(experiments.time_preview(experiments.arms_grid()), elem_id="exp-arms-preview")
        arms_text.blur(experiments.time_preview, arms_text, arms_preview)  # what the cells take, before Launch
        arms_launch = gr.Button("Launch experiment", variant="primary", elem_id="exp-arms-launch")
    action_msg = gr.Markdown("", elem_id="exp-action-msg")
    summary = gr.Markdown(experiments.summary_md(None), elem_id="exp-summary")
    status = gr.Dataframe(headers=experiments.STATUS_HEADERS, value=[], interactive=False, wrap=True,
                          label="cells (click a row to open its job in Training)", elem_id="exp-cells")
    gr.Markdown("### Held-out results\nScore = mean final emotion of the cell's final checkpoint on the held-out "
                "personas; intervals are bootstrap 95% percentile intervals.")
    results = gr.Dataframe(headers=experiments.RESULT_HEADERS, value=[], interactive=False, elem_id="exp-results")
    with gr.Row():
        metric = gr.Dropdown(choices=[], value=None, label="training metric", scale=1, elem_id="exp-metric")
    curve = gr.Plot(label="training curves, one line per cell", elem_id="exp-curves")
    with gr.Row():
        by_need = gr.Dataframe(headers=["cell", *BREAKDOWN_HEADERS], value=[], interactive=False,
                               label="by hidden need", elem_id="exp-need")
        by_personality = gr.Dataframe(headers=["cell", *BREAKDOWN_HEADERS], value=[], interactive=False,
                                      label="by personality type", elem_id="exp-personality")
    replies = gr.Dataframe(headers=experiments.REPLY_HEADERS, value=[], interactive=False,
                           label="policy replies on the held-out set", elem_id="exp-replies")
    judge_md = gr.Markdown("", elem_id="exp-judge-summary")
    judge_plot = gr.Plot(label="social-cognition judge (1-5), one shape per cell", elem_id="exp-judge")
    timer = ctx.poll(POLL_S)
    sig = gr.State(None)
    outputs = [summary, status, results, metric, curve, by_need, by_personality, replies, judge_md, judge_plot, timer,
               sig]

    def show(eid: Any, chosen: Optional[str], old: Any = None):
        """Every output for the experiment. `old` is what the last call sent ({"sig", "sent"}): all is skipped,
        nothing read, while a finished experiment's signature stays; otherwise only the outputs that changed
        are sent (changed_only), so a running experiment's page redraws no unchanged plot."""
        eid = _id(eid)
        exp = grid.experiment_detail(store, eid) if eid else None
        metrics = experiments.metric_choices(store, exp)
        new = ["no experiment", metrics, chosen] if exp is None else [
            exp["status"], [(c["status"], c["train_status"], c["benchmark_status"], c["eval_run_id"])
                            for c in exp["cells"]], metrics, chosen]
        live = bool(exp) and exp["status"] in ("queued", "running")
        old = old or {}
        if old.get("sig") == new and not live:
            return [gr.skip()] * len(outputs)
        chosen = chosen if chosen in metrics else next(iter(metrics), None)
        need, personality = experiments.breakdown_rows(store, exp)
        counts = experiments.judge_counts(store, exp)
        judged = ("**Judged dialogues:** " + ", ".join(f"{k} {v}" for k, v in counts.items())) if counts else ""
        updates, sent = changed_only(
            [experiments.summary_md(exp), experiments.status_rows(exp), experiments.result_rows(store, exp),
             gr.update(choices=metrics, value=chosen), experiments.curves(store, exp, chosen), need, personality,
             experiments.reply_rows(store, exp), judged, experiments.judge_figure(store, exp),
             ctx.poll_pace(live, POLL_S)], old.get("sent"))
        return [*updates, {"sig": new, "sent": sent}]

    def refresh_choices(current: Any):
        choices = experiments.experiment_choices(store)
        ids = [c[1] for c in choices]
        value = _id(current) if _id(current) in ids else (ids[0] if ids else None)
        return gr.update(choices=choices, value=value)

    def on_link(link: Any):
        if not link:
            return gr.skip()
        return gr.update(choices=experiments.experiment_choices(store), value=int(link["id"]))

    def on_cell(eid: Any, evt: gr.SelectData):
        row = evt.row_value or []
        col = evt.index[1] if isinstance(evt.index, (list, tuple)) else None
        job = row[5] if col in (5, 6) and len(row) > 5 and row[5] not in ("", None) else row[3] if row else None
        return ctx.open_job(_id(job))

    def on_launch(text: str):
        """Launch the grid and show it (or what is wrong with it)."""
        eid, message = experiments.launch_experiment(store, url, text or "")
        return message, (gr.update(choices=experiments.experiment_choices(store), value=eid) if eid else gr.skip())

    arms_launch.click(on_launch, [arms_text], [action_msg, pick], show_progress_on=[action_msg])
    pick.change(lambda e, m: show(e, m), [pick, metric], outputs)
    metric.input(lambda e, m: show(e, m), [pick, metric], outputs)
    timer.tick(show, [pick, metric, sig], outputs)
    ctx.refresh_on_show(refresh_choices, [pick], pick)
    ctx.experiment_link.change(on_link, ctx.experiment_link, pick)
    status.select(on_cell, [pick], [ctx.tabs, ctx.job_link], **LINK_EVENT)
    cancel.click(lambda e: experiments.cancel(store, _id(e)) if _id(e) else "Pick an experiment first.", [pick],
                 action_msg)
    resume.click(lambda e: experiments.resume(store, url, _id(e)) if _id(e) else "Pick an experiment first.", [pick],
                 action_msg)
