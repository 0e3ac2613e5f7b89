"""Benchmark view: launch a Sentient benchmark as a background job, the leaderboard of eval runs ranked
within each simulator fingerprint (never across), the published reference rows beside them, a bar chart,
a run's breakdown by hidden need and personality, and its dialogues (a click opens one in Transcripts).

The plain functions at the top build the tables and the chart from trainer.benchmarking.eval_runs' data (tested in
tests/test_app_benchmark.py); `build` only wires them to components.
"""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.context import LINK_EVENT, LabContext, changed_only
from app.endpoint_field import endpoint_field
from app.judge_panel import judge_view
from app.render import BREAKDOWN_HEADERS, breakdown_tables, ci_text, md, number_text
from app.services import benchmark_form, training
from simulator.personas.specs import PERSONA_SETS, spec_choices
from storage import Store

LAB_HEADERS = ["simulator", "rank", "eval run", "model", "score", "success", "failure", "n", "errors", "95% CI",
               "profiles", "finished", "protocol"]
PUBLISHED_HEADERS = ["rank", "model", "score", "success", "failure", "n", "simulator", "source"]
POLL_S = 3.0  # while a benchmark job is live; app.context.IDLE_POLL_S otherwise
DIALOGUE_HEADERS = ["dialogue", "profile", "hidden need", "personality", "final emotion", "outcome", "turns",
                    "error"]


def simulator_label(fp: dict[str, Any], fp_hash: str = "") -> str:
    """'offline:MODEL · rules standard · fp 1a2b3c4d': what produced the scores of a leaderboard group."""
    fp = fp or {}
    name = ":".join(str(x) for x in (fp.get("backend"), fp.get("model")) if x) or "unknown simulator"
    parts = [name + (f" @ {fp['endpoint']}" if fp.get("endpoint") else "")]
    rules = fp.get("rules") or {}
    if isinstance(rules, dict) and rules.get("name"):
        parts.append(f"rules {rules['name']}")
    pack = fp.get("prompt_pack") or {}
    if pack.get("pack"):
        parts.append(f"prompts {pack['pack']}" + (" (json)" if pack.get("structured") else ""))
    elif fp.get("prompt_version") and fp.get("backend") not in ("offline", "replay"):  # native backends: none
        parts.append(f"prompts {fp['prompt_version']}")
    if fp_hash:
        parts.append(f"fp {fp_hash[:8]}")
    return " · ".join(parts)


def simulator_short(fp: dict[str, Any], fp_hash: str = "") -> str:
    """'offline:MODEL · fp 1a2b3c4d' for table cells (the chart and the run header show the full label)."""
    parts = simulator_label(fp).split(" · ")[:1] + ([f"fp {fp_hash[:8]}"] if fp_hash else [])
    return " · ".join(parts)


def protocol_label(protocol: Optional[dict[str, Any]]) -> str:
    """'sage-test_npc-1 · 6bb305d8': the protocol a run followed (runs before protocols: 'unversioned')."""
    protocol = protocol or {}
    if not protocol.get("protocol_hash"):
        return "unversioned"
    return f"{protocol.get('version', '?')} · {protocol['protocol_hash'][:8]}"


def protocol_details(protocol: Optional[dict[str, Any]], cuts: Optional[dict[str, int]] = None) -> str:
    """The protocol of a run in words: rules, caps, the policy's system prompt hash, truncations."""
    p = protocol or {}
    if not p.get("protocol_hash"):
        return "protocol: unversioned (recorded before protocols were versioned)"
    rules = p.get("rules") or {}
    cap = lambda v: "none" if v is None else str(v)
    line = (f"protocol {md(protocol_label(p))}: start {rules.get('start')}, changes clamped to ±"
            f"{rules.get('max_delta')}, {rules.get('max_turns')} policy replies"
            f"{'' if rules.get('judge_final_reply') else ' (the last not judged)'}, end words "
            f"{md(p.get('end_words', ''))}; caps per reply {cap(p.get('max_new_tokens'))}, per dialogue "
            f"{cap(p.get('max_tokens'))}; policy system prompt sha256 "
            + ", ".join(f"{k} {v}" for k, v in (p.get("policy_system_prompt_sha256") or {}).items()))
    if cuts is not None:
        line += (f"; replies cut {cuts.get('replies_cut', 0)}, dialogues out of context "
                 f"{cuts.get('dialogues_out_of_context', 0)}")
    return line


def lab_rows(groups: list[dict[str, Any]]) -> list[list[Any]]:
    """The lab's eval runs (LAB_HEADERS), group after group; rank restarts in each simulator group."""
    rows = []
    for g in groups:
        if g.get("published"):
            continue
        label = simulator_short(g.get("simulator") or {}, g.get("fingerprint_hash", ""))
        for r in g["rows"]:
            finished = r.get("finished_at")
            model = (r.get("name") or r.get("model_ref", "")) + (" (replay)" if g.get("replay") else "")
            rows.append([label, r["rank"], r["id"], model, number_text(r.get("score")),
                         r.get("success"), r.get("failure"), r.get("n"), r.get("n_errors", 0), ci_text(r),
                         g.get("profile_set_hash", "")[:8],
                         finished.strftime("%Y-%m-%d %H:%M") if hasattr(finished, "strftime") else "",
                         protocol_label(g.get("protocol"))])
    return rows


def published_table(groups: list[dict[str, Any]]) -> list[list[Any]]:
    """The published reference rows (PUBLISHED_HEADERS), each marked with its own simulator."""
    rows = []
    for g in groups:
        if g.get("published"):
            rows += [[r["rank"], f"{r['model']} (published)", number_text(r["score"]), r["success"], r["failure"], r["n"],
                      r["simulator"], r["source"]] for r in g["rows"]]
    return rows


def leaderboard_figure(groups: list[dict[str, Any]]) -> go.Figure:
    """One horizontal bar panel per simulator group (published last): scores are compared only within a
    panel, the best at the top."""
    groups = [g for g in groups if g.get("rows")]
    if not groups:
        fig = go.Figure()
        fig.add_annotation(text="no finished eval runs yet", showarrow=False, xref="paper", yref="paper",
                           x=0.5, y=0.5)
        return fig.update_layout(height=200)
    panels = [("published · " + g["rows"][0].get("simulator", "")) if g.get("published")
              else simulator_label(g.get("simulator") or {}, g.get("fingerprint_hash", "")) for g in groups]
    titles = [p if g.get("published") else p + f" · protocol {protocol_label(g.get('protocol'))}"
              + (" · replay" if g.get("replay") else "") for p, g in zip(panels, groups)]
    heights = [max(len(g["rows"]), 1) + 1 for g in groups]
    fig = make_subplots(rows=len(groups), cols=1, subplot_titles=titles, row_heights=heights,
                        vertical_spacing=min(0.12, 0.5 / len(groups)), shared_xaxes=True)
    for i, g in enumerate(groups, start=1):
        rows = list(reversed(g["rows"]))  # plotly draws the first category at the bottom
        names = [(r["model"] if g.get("published") else f"#{r['id']} {r.get('name') or r.get('model_ref', '')}")
                 for r in rows]
        fig.add_trace(go.Bar(x=[r.get("score") or 0 for r in rows], y=names, orientation="h",
                             name=panels[i - 1], text=[number_text(r.get("score")) for r in rows], textposition="auto",
                             marker_pattern_shape="/" if g.get("published") else "",
                             marker_color="#9e9e9e" if g.get("published") else None), row=i, col=1)
    fig.update_xaxes(range=[0, 100])
    fig.update_xaxes(title_text="Sentient score (mean final emotion)", row=len(groups), col=1)
    fig.update_layout(height=120 + 28 * sum(heights), showlegend=False, margin=dict(l=10, r=20, t=40, b=40),
                      template="plotly_white")
    return fig


def dialogue_rows(dialogues: list[dict[str, Any]]) -> list[list[Any]]:
    """An eval run's dialogues (DIALOGUE_HEADERS); failed ones show their reason, never a score."""
    return [[d["id"], d.get("name") or d.get("persona_id", ""), d.get("need_category", ""), d.get("personality", ""),
             number_text(d.get("final_emotion"), 0), d.get("outcome") or d.get("status", ""), d.get("n_turns", 0),
             (d.get("error") or "")[:160]] for d in dialogues]


def run_title(run: Optional[dict[str, Any]], cuts: Optional[dict[str, int]] = None) -> str:
    if not run:
        return "Click a lab row of the leaderboard to see its breakdown and dialogues."
    return (f"**Eval run #{run['id']}** · {md(run.get('name') or run.get('model_ref', ''))} · score "
            f"**{number_text(run.get('score'))}** · success {run.get('success')} · failure {run.get('failure')} · "
            f"n {run.get('n')} (errors {run.get('n_errors', 0)}) · seed {run.get('seed')} · "
            f"code {md(run.get('code_version') or 'unknown')}\n\nsimulator: "
            f"{md(simulator_label(run.get('simulator_fingerprint') or {}, run.get('fingerprint_hash', '')))} · "
            f"policy: {md(run.get('model_ref', ''))}\n\n{protocol_details(run.get('protocol'), cuts)}")


def fidelity_view(store: Store, run_id: Optional[int]) -> tuple[str, Optional[go.Figure]]:
    """(summary markdown, chart) of an eval run's emotion changes vs the published ones (simulator.evaluation.fidelity)."""
    from app.plots import fidelity_figure
    from simulator.evaluation.fidelity import eval_run_report

    if run_id in (None, ""):
        return "", None
    try:
        report = eval_run_report(store, int(run_id))
    except KeyError as exc:
        return md(str(exc).strip("'")), None
    return f"**Fidelity** · {report.summary()}", fidelity_figure(report)


def running_progress_md(store: Any) -> str:
    """A line per eval run still running: dialogues done, replies, tokens per second and the time left."""
    from trainer.benchmarking.eval_runs import running_eval_run_ids
    from trainer.benchmarking.progress import progress_text, run_progress
    from trainer.benchmarking.protocol import protocol_rules

    lines = [f"- eval run {run_id}: {md(progress_text(run_progress(store, run_id, protocol_rules().max_turns)))}"
             for run_id in running_eval_run_ids(store)]
    return "**Running**\n" + "\n".join(lines) if lines else ""


# ------------------------------------------------------------------------------------------------ the view
def build(ctx: LabContext) -> None:
    from trainer.benchmarking import benchmark, eval_runs
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    store, url = ctx.store, ctx.store_url
    with gr.Accordion("Run a benchmark", open=True):
        form, errors = _form_fields()
        expected = gr.Markdown(benchmark_form.expected_text(store, {}), elem_id="bench-expected")
        start = gr.Button("Start benchmark", variant="primary", elem_id="bench-start")
        ctx.jobs_button("bench-all-jobs")
        start_msg = gr.Markdown("", elem_id="bench-msg")
        general = gr.Markdown("", elem_classes="field-error", elem_id="bench-err-general")
        progress_md = gr.Markdown("", elem_id="bench-progress")
        bench_jobs = gr.Dataframe(headers=training.JOB_HEADERS, value=[], interactive=False, wrap=True,
                                  label="benchmark jobs (click one for its details)", elem_id="bench-jobs")
        with gr.Row():
            job_md = gr.Markdown(benchmark_form.job_details(store, None), elem_id="bench-job-detail")
            cancel = gr.Button("Cancel this job", scale=0, min_width=160, elem_id="bench-cancel")
            resume = gr.Button("Resume this job", scale=0, min_width=160, elem_id="bench-resume")
        picked_job = gr.State(None)
    gr.Markdown("### Leaderboard\nRuns are ranked only against runs scored by the same simulator "
                "(fingerprint) on the same profile set under the same protocol. Published rows used their own "
                "simulator; a replay (replay:FILE) re-scores a published transcript through the lab's rules.")
    # Full width, one above the other: side by side, the narrower table hides its score column.
    lab_table = gr.Dataframe(headers=LAB_HEADERS, value=[], interactive=False, wrap=True,
                             label="lab eval runs (click a row)", elem_id="bench-lab")
    pub_table = gr.Dataframe(headers=PUBLISHED_HEADERS, value=[], interactive=False, wrap=True,
                             label="published reference (not comparable unless the simulator matches)",
                             elem_id="bench-published")
    chart = gr.Plot(label="scores by simulator", elem_id="bench-chart")
    run_md = gr.Markdown(run_title(None), elem_id="bench-run")
    with gr.Row():
        reproduce = gr.Button("Reproduce this run", scale=1, elem_id="bench-reproduce")
        reproduce_msg = gr.Markdown("", elem_id="bench-reproduce-msg")
    picked_run = gr.State(None)
    with gr.Row():
        by_need = gr.Dataframe(headers=BREAKDOWN_HEADERS, value=[], interactive=False, label="by hidden need",
                               elem_id="bench-need")
        by_personality = gr.Dataframe(headers=BREAKDOWN_HEADERS, value=[], interactive=False,
                                      label="by personality type", elem_id="bench-personality")
    dialogues = gr.Dataframe(headers=DIALOGUE_HEADERS, value=[], interactive=False, wrap=True,
                             label="dialogues (click one to open it in Transcripts)", elem_id="bench-dialogues")
    fidelity_md = gr.Markdown("", elem_id="bench-fidelity-summary")
    fidelity_plot = gr.Plot(label="emotion changes vs the published DeepSeek-V3 judgements", elem_id="bench-fidelity")
    judge_md = gr.Markdown("", elem_id="bench-judge-summary")
    judge_plot = gr.Plot(label="social-cognition judge (1-5, python -m trainer judge)", elem_id="bench-judge")
    timer = ctx.poll(POLL_S)
    board_sig = gr.State(None)
    polled = gr.State(None)  # changed_only's digests of the jobs table, the two job texts and the pace last sent

    def refresh(sig: Any, sent: Any, job: Any):
        jobs = job_queue.list_jobs(store, kind="benchmark", limit=20)
        live = any(j["status"] in training.LIVE_STATUSES for j in jobs)
        (job_rows, running, detail, pace), sent = changed_only(
            [benchmark_form.job_rows(store, jobs), running_progress_md(store), benchmark_form.job_details(store, job),
             ctx.poll_pace(live, POLL_S)], sent)
        groups = eval_runs.leaderboard(store)
        new_sig = [[r["id"] for g in groups if not g["published"] for r in g["rows"]]]
        if sig == new_sig:
            return job_rows, gr.skip(), gr.skip(), gr.skip(), sig, running, detail, pace, sent
        return (job_rows, lab_rows(groups), published_table(groups), leaderboard_figure(groups), new_sig, running,
                detail, pace, sent)

    def on_start(*values: Any):
        job_id, problems, message = benchmark_form.start(store, url, dict(zip(benchmark_form.NAMES, values)))
        per_field, other = benchmark_form.error_texts(problems)
        return [*per_field, other, message, job_id if job_id is not None else gr.skip()]

    def on_cancel(job: Any):
        if job is None:
            return "Click a benchmark job in the table first."
        try:
            status = job_control.cancel(store, int(job))
        except (job_queue.JobError, OSError) as exc:
            return md(exc)
        return training.cancel_message(int(job), status)

    def on_lab_row(evt: gr.SelectData):
        run_id = evt.row_value[2] if evt.row_value else None
        if run_id in (None, ""):
            return [gr.skip()] * 4
        run = eval_runs.get_eval_run(store, int(run_id))
        need, pers = breakdown_tables(eval_runs.breakdown(store, int(run_id)))
        return (run_title(run, eval_runs.truncations(store, int(run_id))), need, pers,
                dialogue_rows(eval_runs.eval_run_dialogues(store, int(run_id))))

    def on_pick_run(evt: gr.SelectData):
        run_id = evt.row_value[2] if evt.row_value else None
        return int(run_id) if run_id not in (None, "") else None

    def on_reproduce(run_id: Any):
        """The picked run's settings and seed, played again as a new benchmark job; the two runs can then be
        compared dialogue by dialogue (trainer.benchmarking.compare.link_eval_runs, the Compare view)."""
        from trainer.benchmarking.compare import reproduce_config

        if run_id is None:
            return "Pick a lab eval run first."
        try:
            job_id = benchmark.start_benchmark_job(store, url, reproduce_config(store, int(run_id)).to_dict())
        except (ValueError, OSError) as exc:
            return f"Not started: {md(exc)}"
        return f"Benchmark job #{job_id} plays eval run {run_id} again with its seed."

    def on_lab_row_fidelity(evt: gr.SelectData):
        return fidelity_view(store, evt.row_value[2] if evt.row_value else None)

    def on_lab_row_judge(evt: gr.SelectData):
        return judge_view(store, evt.row_value[2] if evt.row_value else None)

    def on_dialogue(evt: gr.SelectData):
        return ctx.open_dialogue(evt.row_value[0] if evt.row_value else None)

    outputs = [bench_jobs, lab_table, pub_table, chart, board_sig, progress_md, job_md, timer, polled]
    timer.tick(refresh, [board_sig, polled, picked_job], outputs)
    start.click(on_start, form, [*errors, general, start_msg, picked_job]).then(
        refresh, [gr.State(None), gr.State(None), picked_job], outputs)
    def on_pick_job(evt: gr.SelectData):
        return evt.row_value[0] if evt.row_value else gr.skip()

    bench_jobs.select(on_pick_job, None, picked_job).then(
        lambda job: (benchmark_form.job_details(store, job), None), picked_job, [job_md, polled])
    cancel.click(on_cancel, picked_job, start_msg).then(refresh, [board_sig, polled, picked_job], outputs)
    resume.click(lambda job: benchmark_form.resume_job(store, url, job), picked_job, start_msg).then(
        refresh, [board_sig, polled, picked_job], outputs)
    lab_table.select(on_lab_row, None, [run_md, by_need, by_personality, dialogues])
    lab_table.select(on_lab_row_fidelity, None, [fidelity_md, fidelity_plot])
    lab_table.select(on_pick_run, None, picked_run)
    reproduce.click(on_reproduce, picked_run, reproduce_msg)
    lab_table.select(on_lab_row_judge, None, [judge_md, judge_plot])
    dialogues.select(on_dialogue, None, ctx.link_outputs, **LINK_EVENT)
    profiles = form[benchmark_form.NAMES.index("profiles")]
    ctx.refresh_on_show(lambda: gr.update(choices=spec_choices(store)), None, profiles)  # stored sets too
    field = {name: form[benchmark_form.NAMES.index(name)] for name in ("quick", "limit", "max_new_tokens")}

    def on_quick(on: bool):  # the quick look fills the form with what it plays; unticked, the full benchmark
        values = benchmark_form.QUICK if on else {k: benchmark_form.DEFAULTS[k] for k in benchmark_form.QUICK}
        return values["limit"], values["max_new_tokens"]

    field["quick"].input(on_quick, field["quick"], [field["limit"], field["max_new_tokens"]]).then(
        lambda *values: benchmark_form.expected_text(store, dict(zip(benchmark_form.NAMES, values))), form, expected)
    for name in ("policy", "profiles", "limit", "max_new_tokens"):
        form[benchmark_form.NAMES.index(name)].change(
            lambda *values: benchmark_form.expected_text(store, dict(zip(benchmark_form.NAMES, values))), form,
            expected)


def _form_fields() -> tuple[list[Any], list[Any]]:
    """The form's inputs (app.services.benchmark_form.NAMES order) and a message box under each."""
    widgets, errors = [], []
    rows = [benchmark_form.NAMES[:6], benchmark_form.NAMES[6:-1], benchmark_form.NAMES[-1:]]
    for names in rows:
        with gr.Row():
            for name in names:
                label, default = next((lab, d) for n, lab, d in benchmark_form.FIELDS if n == name)
                key = f"bench-{name.replace('_', '-')}"
                with gr.Column(min_width=150, scale=2 if name in ("policy", "profiles", "simulator") else 1):
                    if name == "profiles":
                        widget = gr.Dropdown(choices=list(PERSONA_SETS), value=default, allow_custom_value=True,
                                             label=label, elem_id=key)
                    elif name == "mode":
                        widget = gr.Radio(choices=["direct", "think"], value=default, label=label, elem_id=key)
                    elif name == "simulator_base_url":
                        widget = endpoint_field(label, elem_id=key)
                    elif name in ("limit", "seed", "max_new_tokens", "gpus"):
                        widget = gr.Number(value=default, precision=0, label=label, elem_id=key)
                    elif name == "quick":
                        widget = gr.Checkbox(value=default, label=label, elem_id=key)
                    else:
                        widget = gr.Textbox(value=default, label=label, elem_id=key)
                    widgets.append(widget)
                    errors.append(gr.Markdown("", elem_classes="field-error", elem_id=f"bench-err-{name}"))
    return widgets, errors
