"""People (published human-rated dialogues): measure any simulated user against human-played, human-rated dialogues.

Import a corpus (ESConv's JSON or the lab's human JSONL: simulator.evaluation.human_corpora) as a human set, in
an import job (its own process, with progress and Cancel, at most the owner's bound of conversations),
run a simulator's shadow judgements over every reply of it in the background (trainer.benchmarking.shadow_jobs,
with its progress, time left and Resume), and read its agreement with the people who played and rated those
dialogues (simulator.evaluation.human_agreement): one table per simulator fingerprint, with plots (rank
agreement, per group, and the simulator's mean change at each person's score beside the declared map); then
calibrate a simulator to them in a job (app.views.people.calibrate_panel).
"""
from __future__ import annotations

import json

import gradio as gr

from app.agreement_plots import change_by_score_lines, human_group_bars, human_spearman_bars, policy_ranking_points
from app.context import LabContext, changed_only
from app.render import fenced, md
from app.views.people import calibrate_panel
from app.services.people import human_sets
from simulator.evaluation.human_agreement import format_human_report, human_agreement

POLL_S = 2.0  # the import jobs' poll while one is live (else the lab's idle pace)


def build(ctx: LabContext) -> None:
    store = ctx.store
    gr.Markdown("Measure a simulated user against people who played the user and rated the other side "
                "(ESConv and the like): import the corpus, run the simulator over its replies, read the agreement. "
                "Guide: docs/human-evaluation.md.")
    with gr.Accordion("1. Import a human-played corpus", open=True):
        with gr.Row():
            upload = gr.File(label="Corpus file", file_types=[".json", ".jsonl"], type="filepath",
                             elem_id="people-upload")
            with gr.Column():
                fmt = gr.Radio(["esconv", "jsonl"], value="esconv", label="Format", elem_id="people-format")
                name = gr.Textbox("", label="Set name (default: the format)", elem_id="people-name")
                keep = gr.Checkbox(False, label="Import the good conversations and name the bad ones "
                                                "(default: all or nothing)")
                version = gr.Textbox("", label="New version (a corrected release of a stored set)",
                                     elem_id="people-version", info="stored as human:NAME@VERSION; the set stays")
                add = gr.Checkbox(False, label="The file's conversations the set lacks are new ones: add them")
                with gr.Row():
                    import_btn = gr.Button("Import", variant="primary", elem_id="people-import")
                    cancel_import = gr.Button("Cancel", variant="stop", elem_id="people-import-cancel")
        import_status = gr.Markdown(elem_id="people-import-status")
        import_jobs = gr.Markdown(elem_id="people-import-jobs")
        sets = gr.Markdown(elem_id="people-sets")
        import_job = gr.State(None)
        polled = gr.State(None)  # changed_only's digests of what the poll sent last
        timer = ctx.poll(POLL_S)
    with gr.Accordion("2. Shadow judgements: play a simulator over every reply", open=True):
        with gr.Row():
            set_spec = gr.Textbox("human:esconv", label="Human set", elem_id="people-set")
            simulator = gr.Textbox("offline", label="Simulator spec", elem_id="people-simulator",
                                   info="offline · openai:MODEL (with its base URL)")
            base_url = gr.Textbox("", label="Simulator base URL (openai: specs)")
            seed = gr.Number(0, label="Seed", precision=0)
        with gr.Row():
            start = gr.Button("Start", variant="primary", elem_id="people-start")
            refresh = gr.Button("Refresh", elem_id="people-refresh")
            resume = gr.Button("Resume the last run cut off", elem_id="people-resume")
            ctx.jobs_button("people-all-jobs")
        shadow_status = gr.Markdown(elem_id="people-shadow-status")
        runs = gr.Markdown(elem_id="people-runs")
        resumable = gr.State(None)
    with gr.Accordion("3. Agreement with the people", open=True):
        with gr.Row():
            report_set = gr.Textbox("human:esconv", label="Human set", elem_id="people-report-set")
            realism = gr.Checkbox(True, label="Realism of the simulator's next messages (embeds them: slower)",
                                  elem_id="people-realism")
            report_btn = gr.Button("Compute", variant="primary", elem_id="people-report")
        report_out = gr.Markdown(elem_id="people-report-table")
        with gr.Row():
            bars = gr.Plot(elem_id="people-bars")
            groups = gr.Plot(elem_id="people-groups")
        with gr.Row():
            curve = gr.Plot(elem_id="people-curve")
            ranking = gr.Plot(elem_id="people-ranking")
        report_json = gr.Code(language="json", label="The report as JSON", visible=False)
    calibrate_panel.build(ctx)

    def on_import(path, fmt_, name_, keep_, version_, add_):
        message, job_id = human_sets.start_import(store, ctx.store_url, path, fmt_, name_, bool(keep_), version_,
                                                  bool(add_))
        return message, None, job_id, None, ctx.poll_pace(True, POLL_S)

    import_btn.click(on_import, [upload, fmt, name, keep, version, add], [import_status, upload, import_job, polled,
                                                                         timer])
    cancel_import.click(lambda job_id: (human_sets.cancel_import(store, job_id), None), import_job,
                        [import_status, polled])

    def on_tick(sent):
        jobs, live = human_sets.import_jobs_md(store)
        (jobs, sets_, pace), sent = changed_only([jobs, human_sets.sets_md(store),
                                                  ctx.poll_pace(live is not None, POLL_S)], sent)
        return jobs, sets_, live, pace, sent

    timer.tick(on_tick, polled, [import_jobs, sets, import_job, timer, polled])

    def on_runs():
        text, job_id = human_sets.shadow_jobs_md(store)
        return text, job_id

    def on_start(set_, sim, url, seed_):
        message, _ = human_sets.start_shadow(store, ctx.store_url, set_, sim, url, seed_)
        return (message, *on_runs())

    start.click(on_start, [set_spec, simulator, base_url, seed], [shadow_status, runs, resumable])
    refresh.click(on_runs, None, [runs, resumable])

    def on_resume(job_id):
        return (human_sets.resume_shadow(store, ctx.store_url, job_id), *on_runs())

    resume.click(on_resume, [resumable], [shadow_status, runs, resumable])

    def on_report(set_, with_realism):
        try:
            report = human_agreement(store, (set_ or "").strip(), with_realism=bool(with_realism))
        except ValueError as exc:
            return f"**No report:** {md(exc)}", None, None, None, None, gr.update(visible=False)
        return (fenced(format_human_report(report)), human_spearman_bars(report), human_group_bars(report),
                change_by_score_lines(report), policy_ranking_points(report),
                gr.update(value=json.dumps(report, indent=1), visible=True))

    report_btn.click(on_report, [report_set, realism], [report_out, bars, groups, curve, ranking, report_json])
    ctx.refresh_on_show(lambda: (human_sets.sets_md(store), *on_runs(), human_sets.import_jobs_md(store)[0]), None,
                        [sets, runs, resumable, import_jobs])
