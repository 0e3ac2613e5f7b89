"""Training view: a validated config form, filled from a preset (cpu-demo first), with the plan of the job
(memory, time) beside Launch, which asks for a confirmation when the job will not fit or will run for more
than a day; and the jobs list with live status, curves, log tail, Cancel / Resume / Clone, and "Benchmark
this checkpoint".

Jobs are OS processes (trainer.jobs.queue); this view only writes through trainer.jobs.queue and polls the store with
a gr.Timer, so a job outlives a closed browser and a restarted app.
"""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr

from app.context import LabContext, changed_only
from app.render import code, md
from app.services import job_progress, training
from app.services.plans import probe_task as plan_probe_task, training_plan

POLL_S = 2.0  # while a job or a plan is live; app.context.IDLE_POLL_S otherwise


def _widget(name: str, label: str, kind: str, value: Any) -> gr.components.Component:
    key = f"train-{name}"
    label, _, hint = label.partition(" (")
    info = hint.rstrip(")") or None
    if kind == "int":
        return gr.Number(value=value, label=label, info=info, precision=0, elem_id=key)
    if kind == "float":
        return gr.Number(value=value, label=label, info=info, elem_id=key)
    if kind == "bool":
        return gr.Checkbox(value=value, label=label, info=info, elem_id=key)
    if kind == "radio":
        return gr.Radio(choices=list(training.field_choices(name)), value=value, label=label, info=info, elem_id=key)
    if kind in ("choice", "choice+"):
        return gr.Dropdown(choices=list(training.field_choices(name)), value=value, label=label, info=info, elem_id=key,
                           allow_custom_value=kind == "choice+")
    return gr.Textbox(value=value, label=label, info=info, elem_id=key)


def _job_id(value: Any) -> Optional[int]:
    return int(value) if value not in (None, "") and int(value) > 0 else None


def build(ctx: LabContext) -> None:
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    store, url = ctx.store, ctx.store_url
    with gr.Row():
        with gr.Column(scale=2, min_width=380):
            gr.Markdown("### New training job")
            from trainer.presets import DEFAULT_PRESET

            values, extra_yaml, hardware = training_plan.preset_form(DEFAULT_PRESET)
            with gr.Row():
                preset = gr.Dropdown(choices=training_plan.preset_choices(), value=DEFAULT_PRESET, label="preset",
                                     info="fills the form (and the other settings box)", elem_id="train-preset")
                preset_info = gr.Markdown(training_plan.preset_description(DEFAULT_PRESET), elem_id="train-preset-info")
            name = gr.Textbox(label="job name", placeholder="e.g. grpo-think-smollm2", elem_id="train-name")
            widgets, errors = [], []
            fields = list(zip(training.FORM_FIELDS, values))
            for i in range(0, len(fields), 2):
                with gr.Row():
                    for (fname, label, kind, _), value in fields[i:i + 2]:
                        with gr.Column(min_width=170):
                            widgets.append(_widget(fname, label, kind, value))
                            errors.append(gr.Markdown("", elem_classes="field-error", elem_id=f"err-{fname}"))
            extra = gr.Textbox(value=extra_yaml, label="other settings (YAML, any TrainConfig field)", lines=3,
                               placeholder="entropy_coef: 0.001\ntemperature: 1.0", elem_id="train-extra")
            general = gr.Markdown("", elem_classes="field-error", elem_id="err-general")
            with gr.Row():  # the hardware the plan is for (empty: this machine)
                gpus = gr.Number(value=hardware[0], label="plan for: GPUs per node", precision=0, minimum=0,
                                 elem_id="train-plan-gpus")
                nodes = gr.Number(value=hardware[1], label="nodes", precision=0, minimum=0, elem_id="train-plan-nodes")
                memory = gr.Number(value=hardware[2], label="GPU memory (GiB; on CPU the RAM)", minimum=0,
                                   elem_id="train-plan-memory")
            with gr.Row():
                plan_btn = gr.Button("Plan", elem_id="train-plan-btn")
                launch = gr.Button("Launch", variant="primary", elem_id="train-launch")
                stop_probe = gr.Button("Stop the timing", elem_id="train-probe-stop", size="sm")
            confirm = gr.Checkbox(False, label="launch anyway", visible=False, elem_id="train-confirm")
            launch_msg = gr.Markdown("", elem_id="train-launch-msg")
            plan_md = gr.Markdown(training_plan.opening_plan(DEFAULT_PRESET), elem_id="train-plan")
            plan_key = gr.State(None)  # the timed probe followed (app.services.plans.probe_task)
            grid, launch_grid, grid_msg = _experiment_section()
        with gr.Column(scale=3):
            gr.Markdown("### Jobs: every kind (training, benchmarks, comparisons, ...), from here or from a shell")
            table = gr.Dataframe(headers=training.JOB_HEADERS, value=[],  # filled on load (after any login)
                                 interactive=False, elem_id="train-jobs", label="click a row to follow the job")
            with gr.Row():
                job_id = gr.Number(label="job", precision=0, minimum=0, scale=1, elem_id="train-job-id")
                cancel = gr.Button("Cancel", scale=1, elem_id="train-cancel")
                resume = gr.Button("Resume", scale=1, elem_id="train-resume")
                clone = gr.Button("Clone", scale=1, elem_id="train-clone")
                to_form = gr.Button("Edit as new", scale=1)
            action_msg = gr.Markdown("", elem_id="train-action-msg")
            summary = gr.Markdown(training.job_summary_md(None), elem_id="train-summary")
            with gr.Row():
                reward_plot = gr.Plot(training.reward_figure(None), show_label=False, elem_id="train-reward")
                emotion_plot = gr.Plot(training.emotion_step_figure(None), show_label=False,
                                       elem_id="train-emotion")
                overlap_plot = gr.Plot(training.overlap_figure(None), show_label=False, elem_id="train-overlap")
            checkpoints = gr.Dataframe(headers=training.CHECKPOINT_HEADERS, value=[], interactive=False,
                                       label="checkpoints (click one to pick it)", elem_id="train-checkpoints")
            with gr.Row():
                ck_path = gr.Textbox(label="checkpoint", scale=4, elem_id="train-ck-path")
                bench = gr.Button("Benchmark this checkpoint", scale=1, elem_id="train-bench")
            log = gr.Textbox(label="log (tail)", lines=10, max_lines=10, autoscroll=True, interactive=False,
                             elem_id="train-log")
    timer = ctx.poll(POLL_S)  # one timer, one tick: each tick costs the browser a pass over the whole page
    shown = gr.State(None)  # what the detail outputs last got: {"sig": the job's signature, "sent": digests}
    table_sent = gr.State(None)  # changed_only's digests of the jobs table and the pace the poll last sent
    detail_outputs = [summary, reward_plot, emotion_plot, overlap_plot, checkpoints, log, cancel, resume, shown]

    def show(jid: Any, old: Any = None):
        """Detail outputs for the job: no figure is built while the job's signature stays as in `old`, and
        only the outputs that changed are sent (a plot is not redrawn when only the progress line moved)."""
        jid = _job_id(jid)
        detail = job_queue.job_detail(store, jid, log_lines=60) if jid else None
        now = job_progress.step_progress_text(store, detail)
        sig = ["no job"] if detail is None else [
            detail["status"], detail["step"], detail["progress"], str(detail["heartbeat_at"]), now,
            sum(len(m["step"]) for m in detail["metrics"].values()), len(detail["checkpoints"]),
            len(detail["log_tail"]), detail["error"]]
        old = old or {}
        if old.get("sig") == sig:
            return [gr.skip()] * len(detail_outputs)
        acts = training.actions_for(detail["status"] if detail else "")
        summary_text = training.job_summary_md(detail) + (f"\n\n**Now:** {md(now)}" if now else "")
        updates, sent = changed_only(
            [summary_text, training.reward_figure(detail), training.emotion_step_figure(detail),
             training.overlap_figure(detail), training.checkpoint_rows(detail), (detail or {}).get("log_tail", ""),
             gr.update(interactive=acts["cancel"]), gr.update(interactive=acts["resume"])], old.get("sent"))
        return [*updates, {"sig": sig, "sent": sent}]

    def plan_shown(key: Any):
        shown_plan = plan_probe_task.progress(key) if key else None
        return gr.skip() if shown_plan is None else shown_plan

    def tick(jid: Any, old: Any, sent: Any, key: Any):
        """The jobs table (list_jobs shows stalled / dead jobs as such: derived, nothing written), the poll's
        pace, the picked job and the plan under way."""
        jobs = job_queue.list_jobs(store)
        live = any(j["status"] in training.LIVE_STATUSES for j in jobs) or plan_probe_task.running(key)
        (table_update, pace), sent = changed_only(
            [job_progress.jobs_rows_now(store, jobs), ctx.poll_pace(live, POLL_S)], sent)
        return [table_update, pace, sent, *show(jid, old), plan_shown(key)]

    def checked(form: tuple, extra_yaml: str, check_paths: bool = True):
        """A plan needs no model folder and no personas here (it may be made for another machine); a launch
        does."""
        config, problems = training.config_from_form(dict(zip(training.FORM_NAMES, form)), extra_yaml, check_paths,
                                                     store if check_paths else None)
        return config, *training.error_updates(problems)

    def on_plan(preset_name: str, *values: Any):
        *form, extra_yaml, n_gpus, n_nodes, gib = values
        config, per_field, other = checked(form, extra_yaml, check_paths=False)
        if config is None:
            return [*per_field, other, "No plan: fix the fields marked ⚠.", gr.skip(), gr.skip(), gr.skip(), gr.skip()]
        args = training_plan.plan_args(n_gpus, n_nodes, gib)
        quick = training_plan.quick_plan(config.to_dict(), args, preset_name or "")
        if quick.get("error") or quick.get("device") != "cpu" or quick.get("seconds_per_step") is not None:
            return [*per_field, other, "", training_plan.plan_markdown(quick, config.steps), None, gr.skip(), None]
        key = plan_probe_task.start(config.to_dict(), args, preset_name or "", quick)  # the time, in the background
        return [*per_field, other, "", plan_probe_task.progress(key), key, gr.Timer(value=POLL_S),
                None]  # the poll follows the probe at once; the next tick sends its pace again

    def on_open(preset_name: str, key: Any):
        """A probe already followed stays; else a probe still running (a reloaded page), the kept plan of the
        preset, or (none kept) its quick plan, made now (seconds; no probe: that takes the cores)."""
        if key:
            return gr.skip(), gr.skip()
        running = plan_probe_task.running_key(preset_name)
        if running:
            return plan_probe_task.progress(running), running
        if training_plan.kept_plan(preset_name) is None and training_plan.plan_on_open_allowed():
            quick = training_plan.preset_quick_plan(preset_name)
            if quick is not None:
                return quick, gr.skip()
        return training_plan.opening_plan(preset_name), gr.skip()

    def on_launch(preset_name: str, job_name: str, *values: Any):
        *form, extra_yaml, n_gpus, n_nodes, gib, confirmed = values
        config, per_field, other = checked(form, extra_yaml)
        if config is None:
            return [*per_field, other, "Not launched: fix the fields marked ⚠.", *[gr.skip()] * 7]
        args = training_plan.plan_args(n_gpus, n_nodes, gib)
        plan = training_plan.quick_plan(config.to_dict(), args)  # the timed plan when one of these settings ended
        reason = training_plan.confirmation_reason(plan, config.steps)
        if reason and not confirmed:
            return [*per_field, other, f"Not launched: {md(reason)}. Tick **launch anyway** and press Launch again "
                                       "to launch it all the same.", gr.skip(), gr.skip(), gr.skip(), gr.skip(),
                    training_plan.plan_markdown(plan, config.steps), gr.update(visible=True, value=False), None]
        stopped = [k for k in {plan_probe_task.running_key(), plan_probe_task.running_key(preset_name)}
                   if plan_probe_task.cancel(k, "Launch")]  # never waited for: the job takes every core
        new_id, message = training.launch_training_job(store, url, config, job_name)
        if stopped:
            message += " The timing probe was stopped so that the job has the cores."
        return [*per_field, other, message, training.jobs_rows(job_queue.list_jobs(store)), gr.Timer(value=POLL_S),
                None, new_id, training_plan.plan_markdown(plan, config.steps), gr.update(visible=False, value=False),
                None]

    def on_preset(name: str):
        if name not in training_plan.preset_choices():
            return [gr.skip()] * (len(widgets) + 8)
        values, extra_yaml, (n_gpus, n_nodes, gib) = training_plan.preset_form(name)
        return [training_plan.preset_description(name), *values, extra_yaml, n_gpus, n_nodes, gib,
                training_plan.opening_plan(name),
                gr.update(visible=False, value=False), None]  # a confirmation was for the job planned before

    def act(action: str, jid: Any):
        jid = _job_id(jid)
        if jid is None:
            return "Pick a job first.", gr.skip()
        try:
            if action == "cancel":
                msg = training.cancel_message(jid, job_control.cancel(store, jid))
            elif action == "resume":
                job_control.resume(store, url, jid)
                msg = f"Job #{jid} resumes from its last checkpoint."
            else:
                new_id = job_queue.clone(store, jid)
                job_queue.launch(url, new_id)
                return f"Cloned job #{jid} as #{new_id} and launched it.", new_id
        except (job_queue.JobError, OSError) as exc:
            return md(exc), gr.skip()
        return msg, jid

    def on_benchmark(jid: Any, path: str):
        jid = _job_id(jid)
        if not path or not path.strip():
            return "Pick a checkpoint in the table first."
        from trainer.benchmarking.benchmark import start_benchmark_job

        config = training.benchmark_config_for(job_queue.job_detail(store, jid) if jid else None, path.strip())
        try:
            bench_id = start_benchmark_job(store, url, config)
        except (ValueError, OSError) as exc:
            return f"Benchmark not started: {md(exc)}"
        return f"Benchmark job #{bench_id} started for {code(path.strip())}; see the Benchmark view."

    def on_pick_row(evt: gr.SelectData):
        return evt.row_value[0] if evt.row_value else gr.skip()

    def on_pick_checkpoint(evt: gr.SelectData):
        return evt.row_value[1] if evt.row_value else gr.skip()

    def edit_as_new(jid: Any):
        jid = _job_id(jid)
        detail = job_queue.job_detail(store, jid) if jid else None
        if detail is None:
            return [gr.skip()] * (len(widgets) + 1)
        return [f"{detail['name']} (edited)", *training.form_values(detail["config"])]

    hardware_boxes = [gpus, nodes, memory]
    preset.change(on_preset, [preset], [preset_info, *widgets, extra, *hardware_boxes, plan_md, confirm, plan_key])
    plan_btn.click(on_plan, [preset, *widgets, extra, *hardware_boxes], [*errors, general, launch_msg, plan_md,
                                                                        plan_key, timer, table_sent])
    # on every page load and when the tab opens: a probe still running, else the kept plan (never a new probe)
    ctx.load_hooks.append((on_open, [preset, plan_key], [plan_md, plan_key]))  # a reloaded page finds its probe
    if ctx.current_tab is not None:
        ctx.current_tab.select(on_open, [preset, plan_key], [plan_md, plan_key])
    stop_probe.click(lambda key: plan_probe_task.progress(key) if plan_probe_task.cancel(key, "Stop") else gr.skip(),
                     [plan_key], plan_md)
    launch.click(on_launch, [preset, name, *widgets, extra, *hardware_boxes, confirm],  # the plan shown: Launch's
                 [*errors, general, launch_msg, table, timer, table_sent, job_id, plan_md, confirm, plan_key])
    table.select(on_pick_row, None, job_id)
    job_id.change(show, [job_id], detail_outputs)
    timer.tick(tick, [job_id, shown, table_sent, plan_key], [table, timer, table_sent, *detail_outputs, plan_md])
    ctx.refresh_on_show(lambda: (job_progress.jobs_rows_now(store, job_queue.list_jobs(store)), None), None,
                        [table, table_sent])
    ctx.refresh_on_show(lambda: gr.update(choices=training.persona_set_choices(store)), None,  # stored sets too
                        widgets[training.FORM_NAMES.index("persona_set")])
    for button, action in ((cancel, "cancel"), (resume, "resume"), (clone, "clone")):
        button.click(lambda jid, a=action: act(a, jid), [job_id], [action_msg, job_id])
    to_form.click(edit_as_new, [job_id], [name, *widgets])
    checkpoints.select(on_pick_checkpoint, None, ck_path)
    bench.click(on_benchmark, [job_id, ck_path], action_msg)
    if ctx.job_link is not None:  # another view (Experiments) opens a job here
        ctx.job_link.change(lambda link: int(link["id"]) if link else gr.skip(), ctx.job_link, job_id)
    if ctx.experiment_link is not None:
        launch_grid.click(lambda text: _launch_experiment(ctx, text), [grid],
                          [grid_msg, ctx.tabs, ctx.experiment_link], show_progress_on=[grid_msg])


def _experiment_section() -> tuple[gr.Textbox, gr.Button, gr.Markdown]:
    """The Experiment accordion: a grid (YAML, see docs/evaluation.md#experiments) and its Launch button."""
    from app.services import experiments

    with gr.Accordion("Experiment: a grid of configs, each cell benchmarked on held-out personas", open=False,
                      elem_id="train-experiment"):
        grid = gr.Textbox(value=experiments.example_grid(), lines=16, max_lines=40, label="grid (YAML)",
                          elem_id="exp-grid")
        preview = gr.Markdown(experiments.time_preview(experiments.example_grid()), elem_id="exp-preview")
        grid.blur(experiments.time_preview, grid, preview)  # what the cells take, before Launch
        launch_grid = gr.Button("Launch experiment", variant="primary", elem_id="exp-launch")
        grid_msg = gr.Markdown("", elem_id="exp-launch-msg")
    return grid, launch_grid, grid_msg


def _launch_experiment(ctx: LabContext, text: str) -> tuple:
    """Launch the grid's experiment and open it in the Experiments view (or show what is wrong with it)."""
    from app.services import experiments

    experiment_id, message = experiments.launch_experiment(ctx.store, ctx.store_url, text or "")
    return (message, *ctx.open_experiment(experiment_id))
