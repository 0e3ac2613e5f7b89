"""Compare view: start a comparison (A and B: the default model, a stored checkpoint or a model folder; the
personas; the simulated user) as a background job, watch it with the time left, Cancel, Resume; then
two policies on the same personas, simulated user and seeds (`python -m trainer compare`):
wins / ties / losses with a paired interval and the breakdown, the pairs sorted by the difference, and one
persona's two dialogues side by side aligned by turn with both emotion curves and the user's inner thoughts
where they part."""
from __future__ import annotations

from typing import Any

import gradio as gr

from app.context import LabContext
from app.services import compare as compare_service
from app.services import compare_jobs
from simulator.personas.specs import spec_choices
from trainer.benchmarking import compare

POLL_S = 2.0  # how often the picked comparison's progress is read


def _same_comparison(choices: list[str], current: Any) -> Any:
    """The choice naming the same comparison as `current` (its label carries the status, which changes), else
    the newest."""
    cid = compare_service.parse_choice(current)
    same = [c for c in choices if cid is not None and compare_service.parse_choice(c) == cid]
    return same[0] if same else (choices[0] if choices else None)


def build(ctx: LabContext) -> None:
    store = ctx.store
    gr.Markdown("Two policies against the same personas, simulated user, seeds and rules, dialogue by dialogue. "
                "Start one here (or with `python -m trainer compare --a POLICY --b POLICY --profiles SPEC`): it "
                "runs as a background job, survives a closed browser, and a stopped one resumes where it was.")
    with gr.Accordion("New comparison", open=True):
        errs: dict[str, Any] = {}

        def under(name: str) -> None:  # the field's own message line, kept until the next Start
            errs[name] = gr.Markdown("", elem_classes="field-error", elem_id=f"cmp-err-{name.replace('_', '-')}")

        with gr.Row():
            with gr.Column():
                a_pick = gr.Dropdown(choices=compare_jobs.policy_choices(store), value=compare_jobs.DEFAULT_POLICY,
                                     allow_custom_value=True,
                                     label="A (the baseline): default, a stored checkpoint or a model folder",
                                     elem_id="cmp-a")
                under("a")
            with gr.Column():
                b_pick = gr.Dropdown(choices=compare_jobs.policy_choices(store), value=compare_jobs.DEFAULT_POLICY,
                                     allow_custom_value=True, label="B (a win is B ending higher)", elem_id="cmp-b")
                under("b")
        with gr.Row():
            with gr.Column(min_width=200):
                profiles = gr.Dropdown(choices=spec_choices(store), value="builtin:heldout", allow_custom_value=True,
                                       label="personas (a persona spec)", elem_id="cmp-profiles")
                under("profiles")
            with gr.Column(min_width=200):
                simulator = gr.Textbox(value="offline", label="simulated user (offline, openai:MODEL, python:...)",
                                       elem_id="cmp-simulator")
                under("simulator")
            with gr.Column(min_width=120):
                limit = gr.Number(value=0, precision=0, label="first N personas (0 = all)", elem_id="cmp-limit")
                under("limit")
            with gr.Column(min_width=120):
                seeds = gr.Number(value=1, precision=0, label="seeds", elem_id="cmp-seeds")
                under("seeds")
            with gr.Column(min_width=120):
                max_new = gr.Number(value=0, precision=0, label="max new tokens per reply (0 = the protocol's)",
                                    elem_id="cmp-max-new")
                under("max_new_tokens")
            with gr.Column(min_width=120):
                gpus = gr.Number(value=0, precision=0, label="GPUs its job asks a Ray node for (1: local policies "
                                 "on a GPU)", elem_id="cmp-gpus")
                under("gpus")
        with gr.Row():
            quick = gr.Checkbox(False, label="quick look: 1 persona, 1 seed, 16-token replies (minutes, not hours)",
                                elem_id="cmp-quick")
            expected = gr.Markdown(compare_jobs.expected_text(store, "default", "default", "builtin:heldout", 0, 1, 0),
                                   elem_id="cmp-expected")
        with gr.Row():
            start = gr.Button("Start", variant="primary", elem_id="cmp-start")
            cancel = gr.Button("Cancel", elem_id="cmp-cancel")
            resume = gr.Button("Resume", elem_id="cmp-resume")
            ctx.jobs_button("cmp-all-jobs")
        start_msg = gr.Markdown("", elem_id="cmp-start-msg")  # Start's answer: the poll never writes here
        under(compare_jobs.GENERAL)
        job_md = gr.Markdown("", elem_id="cmp-job")
    with gr.Row():
        pick = gr.Dropdown(choices=[], label="comparison", scale=4, elem_id="cmp-pick")
        refresh = gr.Button("Refresh", scale=1, elem_id="cmp-refresh")
    summary = gr.Markdown(compare_service.summary_md(None), elem_id="cmp-summary")
    pairs_table = gr.Dataframe(headers=compare_service.PAIR_HEADERS, value=[], interactive=False, wrap=True,
                               label="pairs, largest difference first (click one to open it)", elem_id="cmp-pairs")
    with gr.Row():
        by_need = gr.Dataframe(headers=compare_service.BREAKDOWN_HEADERS, value=[], interactive=False,
                               label="by hidden need", elem_id="cmp-need")
        by_personality = gr.Dataframe(headers=compare_service.BREAKDOWN_HEADERS, value=[], interactive=False,
                                      label="by personality type", elem_id="cmp-personality")
    pair_pick = gr.Dropdown(choices=[], label="persona", elem_id="cmp-pair")
    curves = gr.Plot(label="emotion, A and B", elem_id="cmp-curves")
    aligned = gr.HTML("", elem_id="cmp-aligned")

    def on_pick(choice: str):
        cid = compare_service.parse_choice(choice)
        if cid is None:
            return compare_service.summary_md(None), [], [], [], gr.update(choices=[], value=None)
        pairs = compare.comparison_pairs(store, cid)
        names = compare_service.pair_choices(sorted(pairs, key=lambda p: (p["diff"] is None, -abs(p["diff"] or 0.0))))
        return (compare_service.summary_md(compare.get_comparison(store, cid)), compare_service.pair_rows(pairs),
                compare_service.breakdown_rows(pairs, "need_category"),
                compare_service.breakdown_rows(pairs, "personality"),
                gr.update(choices=names, value=names[0] if names else None))

    def on_pair(choice: str, pair_choice: str):
        cid = compare_service.parse_choice(choice)
        pairs = compare.comparison_pairs(store, cid, with_turns=True) if cid else []
        pair = compare_service.find_pair(pairs, pair_choice) if cid else None
        if pair is None:
            return None, ""
        return compare_service.pair_figure(pair), compare_service.aligned_html(pair)

    def on_row(evt: gr.SelectData):
        row = evt.row_value or []
        return f"{row[0]} · seed {row[1]}" if len(row) > 1 else gr.skip()

    def on_refresh(current: Any):
        choices = compare_service.comparison_choices(store)
        return gr.update(choices=choices, value=_same_comparison(choices, current))

    def on_start(a, b, spec, sim, n, k, cap, gpus):
        message, cid, problems = compare_jobs.start(store, ctx.store_url, a, b, spec, sim, n, k, cap, gpus)
        texts = compare_jobs.error_texts(problems)
        if cid is None:
            return message, *texts, gr.skip(), gr.skip()
        choices = compare_service.comparison_choices(store)
        return (message, *texts, compare_jobs.progress_md(store, cid),
                gr.update(choices=choices, value=_same_comparison(choices, f"#{cid}")))

    def on_tick(current: Any):
        """The picked comparison's progress; when its status changes (e.g. it finished) the picker's label
        changes with it, which reloads the view with the result."""
        cid = compare_service.parse_choice(current)
        choices = compare_service.comparison_choices(store)
        value = _same_comparison(choices, current)
        picker = gr.update(choices=choices, value=value) if value != current else gr.skip()
        return compare_jobs.progress_md(store, cid), picker

    def on_control(action: str, current: Any):
        cid = compare_service.parse_choice(current)
        if action == "cancel":
            message = compare_jobs.cancel(store, cid)
        else:
            message = compare_jobs.resume(store, ctx.store_url, cid)
        return message + "\n\n" + compare_jobs.progress_md(store, cid)

    error_boxes = [errs[n] for n in (*compare_jobs.FIELDS, compare_jobs.GENERAL)]
    form = [a_pick, b_pick, profiles, simulator, limit, seeds, max_new]
    for name, box in zip(compare_jobs.FIELDS, form):  # a field's error goes once the field changes
        box.change(lambda: "", None, errs[name])
        box.change(lambda a, b, spec, _sim, n, k, cap: compare_jobs.expected_text(store, a, b, spec, n, k, cap), form,
                   expected)
    quick.change(lambda on: (1, 1, 16) if on else (0, 1, 0), quick, [limit, seeds, max_new])
    start.click(on_start, [a_pick, b_pick, profiles, simulator, limit, seeds, max_new, gpus],
                [start_msg, *error_boxes, job_md, pick])
    cancel.click(lambda c: on_control("cancel", c), pick, job_md)
    resume.click(lambda c: on_control("resume", c), pick, job_md)
    ctx.poll(POLL_S).tick(on_tick, pick, [job_md, pick])
    def on_show():
        policies = compare_jobs.policy_choices(store)
        return gr.update(choices=policies), gr.update(choices=policies), gr.update(choices=spec_choices(store))

    ctx.refresh_on_show(on_show, None, [a_pick, b_pick, profiles])

    pick.change(on_pick, pick, [summary, pairs_table, by_need, by_personality, pair_pick])
    pair_pick.change(on_pair, [pick, pair_pick], [curves, aligned])
    pairs_table.select(on_row, None, pair_pick)
    refresh.click(on_refresh, pick, pick)
    ctx.refresh_on_show(on_refresh, pick, pick)
