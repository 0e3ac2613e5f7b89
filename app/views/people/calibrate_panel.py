"""The People view's Calibrate panel: fit a simulator to the people of a human set in a "calibrate" job (its
shadow judgements where it lacks them, then the fit, saved in the lab's folder: app.services.people.calibrations),
its progress and time left while it judges, and the saved calibrations with their held-out figures."""
from __future__ import annotations

import gradio as gr

from app.context import LabContext, changed_only
from app.services.people import calibrations
from simulator.fitting.monotone_map import MAPS

POLL_S = 2.0  # the panel's poll while a calibrate job is live (else the lab's idle pace)


def build(ctx: LabContext) -> None:
    """The panel, inside the People view's build()."""
    store = ctx.store
    with gr.Accordion("4. Calibrate a simulator to the people", open=False):
        gr.Markdown("Judges every reply of the set the simulator has not judged yet (as a shadow run), then fits "
                    "a map of its emotion changes onto the people's scores (*predict*: the monotone "
                    "least-squares guess of the people's score; *scale*: the line giving them the people's mean "
                    "and spread, keeping the simulator's ranking), with the reply signal also a per-reply signal "
                    "fitted to them, cross-validated over dialogues, and saves it under its name. Use it with "
                    "`--calibration NAME` on the simulator.")
        with gr.Row():
            set_spec = gr.Textbox("human:esconv", label="Human set", elem_id="people-cal-set")
            simulator = gr.Textbox("offline", label="Simulator spec", elem_id="people-cal-simulator")
            base_url = gr.Textbox("", label="Simulator base URL (openai: specs)", elem_id="people-cal-base-url")
            name = gr.Textbox("", label="Calibration name", elem_id="people-cal-name",
                              info="lowercase letters, digits, - and _")
            folds = gr.Number(5, label="Folds", precision=0, elem_id="people-cal-folds")
            method = gr.Radio(list(MAPS), value=MAPS[0], label="Map", elem_id="people-cal-map")
            signal = gr.Checkbox(False, label="Reply signal (second level: sentence embeddings of each reply)",
                                 elem_id="people-cal-signal")
        with gr.Row():
            start = gr.Button("Calibrate", variant="primary", elem_id="people-cal-start")
            refresh = gr.Button("Refresh", elem_id="people-cal-refresh")
            resume = gr.Button("Resume the last calibration cut off", elem_id="people-cal-resume")
            ctx.jobs_button("people-cal-all-jobs")
        status = gr.Markdown(elem_id="people-cal-status")
        jobs = gr.Markdown(elem_id="people-cal-jobs")
        saved = gr.Markdown(elem_id="people-cal-saved")
        resumable = gr.State(None)
        polled = gr.State(None)
        timer = ctx.poll(POLL_S)

    def on_show():
        text, job_id, live = calibrations.calibrate_jobs_md(store)
        return text, calibrations.saved_md(), job_id, None, ctx.poll_pace(live, POLL_S)

    shown = [jobs, saved, resumable, polled, timer]

    def on_start(set_, sim, url, name_, folds_, method_, signal_):
        message, _ = calibrations.start_calibration(store, ctx.store_url, set_, sim, url, name_, folds_, signal_,
                                                    method_)
        return (message, *on_show())

    start.click(on_start, [set_spec, simulator, base_url, name, folds, method, signal], [status, *shown])
    refresh.click(on_show, None, shown)
    resume.click(lambda job_id: (calibrations.resume_calibration(store, ctx.store_url, job_id), *on_show()),
                 [resumable], [status, *shown])

    def on_tick(sent):
        text, job_id, live = calibrations.calibrate_jobs_md(store)
        (text, saved_, pace), sent = changed_only([text, calibrations.saved_md(), ctx.poll_pace(live, POLL_S)], sent)
        return text, saved_, job_id, pace, sent

    timer.tick(on_tick, polled, [jobs, saved, resumable, timer, polled])
    ctx.refresh_on_show(on_show, None, shown)
