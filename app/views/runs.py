"""Runs view: compare 2-4 training runs (overlaid curves of any metric, config diff) and open a step's
dialogues, GRPO groups side by side, each one a click away from the Transcripts view."""
from __future__ import annotations

from typing import Any

import gradio as gr

from app.context import LINK_EVENT, LabContext
from app.services import runs as runs_service


def job_choices(ctx: LabContext) -> list[str]:
    """'#id name (algorithm)' of every training job, newest first."""
    from trainer.jobs.queue import list_jobs

    jobs = list_jobs(ctx.store, kind="train", limit=200)
    return list(runs_service.job_labels(ctx.store, [j["id"] for j in jobs]).values())


def build(ctx: LabContext) -> None:
    store = ctx.store
    gr.Markdown("Compare up to 4 training runs. Pick the runs, a metric, and a step to see its dialogues.")
    with gr.Row():
        runs = gr.Dropdown(choices=[], multiselect=True, max_choices=runs_service.MAX_COMPARE,  # filled on load
                           label="runs (2-4)", scale=4, elem_id="runs-pick")
        metric = gr.Dropdown(choices=[], label="metric", scale=2, elem_id="runs-metric")
        refresh = gr.Button("Refresh", scale=1, elem_id="runs-refresh")
    plot = gr.Plot(label="curves", elem_id="runs-plot")
    with gr.Accordion("Config diff", open=True):
        show_all = gr.Checkbox(value=False, label="show settings that are the same too")
        diff = gr.Dataframe(headers=["setting"], value=[], interactive=False, wrap=True, elem_id="runs-diff")
    gr.Markdown("### Dialogues of a step")
    with gr.Row():
        step_job = gr.Dropdown(choices=[], label="run", scale=3, elem_id="runs-step-job")
        step = gr.Dropdown(choices=[], label="step", scale=1, elem_id="runs-step")
    groups = gr.Dataframe(headers=["group"], value=[], interactive=False, wrap=True, elem_id="runs-groups",
                          label="groups (rollouts of the same prompt side by side) · click a dialogue to open it")
    with gr.Row():
        dialogue_id = gr.Number(label="dialogue id", precision=0, scale=1)
        open_btn = gr.Button("Open in Transcripts", scale=1)

    def on_runs(values: list[str], current_metric: str, all_settings: bool):
        ids = runs_service.parse_job_ids(values)
        names = runs_service.metric_names(store, ids)
        chosen = current_metric if current_metric in names else (names[0] if names else None)
        headers, rows = runs_service.config_diff(runs_service.job_configs(store, ids), only_different=not all_settings)
        fig = runs_service.compare_figure(store, ids, chosen) if chosen else runs_service.curves_figure({})
        labels = list(runs_service.job_labels(store, ids).values())
        return (gr.update(choices=names, value=chosen), fig, gr.update(value=rows, headers=headers),
                gr.update(choices=labels, value=labels[0] if labels else None))

    def on_metric(values: list[str], name: str, picked_step: Any):
        ids = runs_service.parse_job_ids(values)
        mark = int(picked_step) if picked_step not in (None, "") else None
        if not name:
            return runs_service.curves_figure({})
        return runs_service.compare_figure(store, ids, name, marker_step=mark)

    def on_diff(values: list[str], all_settings: bool):
        headers, rows = runs_service.config_diff(runs_service.job_configs(store, runs_service.parse_job_ids(values)),
                                                 only_different=not all_settings)
        return gr.update(value=rows, headers=headers)

    def on_step_job(label: str):
        ids = runs_service.parse_job_ids([label])
        steps = runs_service.dialogue_steps(store, ids[0]) if ids else []
        return gr.update(choices=steps, value=steps[-1] if steps else None)

    def on_step(label: str, picked_step: Any):
        ids = runs_service.parse_job_ids([label])
        if not ids or picked_step in (None, ""):
            return gr.update(value=[], headers=["group"])
        headers, rows = runs_service.step_groups(store, ids[0], int(picked_step))
        return gr.update(value=rows, headers=headers)

    def on_cell(evt: gr.SelectData):
        return runs_service.dialogue_id_from_cell(evt.value)

    def on_refresh(values: list[str]):
        return gr.update(choices=job_choices(ctx), value=values)

    runs.change(on_runs, [runs, metric, show_all], [metric, plot, diff, step_job])
    metric.input(on_metric, [runs, metric, step], plot)
    show_all.change(on_diff, [runs, show_all], diff)
    step_job.change(on_step_job, step_job, step)
    step.change(on_step, [step_job, step], groups).then(on_metric, [runs, metric, step], plot)
    groups.select(on_cell, None, dialogue_id).then(
        lambda i: ctx.open_dialogue(int(i) if i not in (None, "") else None), dialogue_id, ctx.link_outputs,
        **LINK_EVENT)
    open_btn.click(lambda i: ctx.open_dialogue(int(i) if i not in (None, "") else None), dialogue_id,
                   ctx.link_outputs, **LINK_EVENT)
    ctx.refresh_on_show(on_refresh, runs, runs)
    refresh.click(on_refresh, runs, runs).then(on_runs, [runs, metric, show_all], [metric, plot, diff, step_job])
