"""The Personas view's Generate panel: a spec form and an endpoint, Generate as a background job (its own
process: it survives a closed browser or a restarted app) with a progress bar polled from the store, Cancel
and Resume, a picker of earlier generations, then the review queue (accept, edit in the persona form then
accept, reject, regenerate one, accept all valid). Logic: simulator.personas.generation_store,
app.services.persona_generation_jobs and app.services.persona_generation_form."""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional, Sequence

import gradio as gr

from app.context import LabContext
from app.endpoint_field import endpoint_field
from app.render import md
from app.services import persona_generation_form, persona_generation_jobs
from app.services.persona_form import FIELDS, form_profile, form_values
from simulator.personas import generation_store
from simulator.personas import store as persona_store
from simulator.personas.generation import DEFAULT_THRESHOLD
from simulator.personas.profile import LANGUAGES, NEED_CATEGORIES, PERSONALITIES, ProfileError
from trainer.jobs.queue import JobError

POLL_S = 1.0
NEED_CHOICES = [(f"{label} ({key})", key) for key, (label, _zh) in NEED_CATEGORIES.items()]


def build(ctx: LabContext, editor: Sequence[Any], editing: Any, title: Any,
          refresh: tuple[Callable, list, list], sets_refresh: tuple[Callable, list, list]) -> None:
    """The panel, below the persona list and form. `editor`: the form's inputs (in app.views.personas.FIELDS
    order); `editing` / `title`: its state and heading; `refresh` / `sets_refresh`: (fn, inputs, outputs) of
    the persona list and of the Sets panel."""

    store = ctx.store
    refresh_fn, refresh_in, refresh_out = refresh
    with gr.Accordion("Generate personas with an LLM", open=False, elem_id="gen-panel"):
        with gr.Row():
            count = gr.Number(6, label="How many", precision=0, minimum=1, elem_id="gen-count")
            needs = gr.Dropdown(NEED_CHOICES, value=[], multiselect=True, label="Hidden needs (empty: all 8)",
                                elem_id="gen-needs")
            personalities = gr.Dropdown(list(PERSONALITIES), value=[], multiselect=True,
                                        label="Personalities (empty: all 3)", elem_id="gen-personalities")
            languages = gr.Dropdown(list(LANGUAGES), value=["en"], multiselect=True, label="Languages",
                                    elem_id="gen-languages")
        topics = gr.Textbox(label="Topics or seed scenes, one per line (optional)", lines=2, elem_id="gen-topics")
        with gr.Row():
            base_url = endpoint_field("Endpoint", elem_id="gen-base-url")
            model = gr.Textbox(label="Model", elem_id="gen-model")
            threshold = gr.Number(DEFAULT_THRESHOLD, label=f"Dedupe threshold (default {DEFAULT_THRESHOLD:.2f})",
                                  minimum=0, maximum=1, step=0.01, elem_id="gen-threshold")
            seed = gr.Number(0, label="Seed", precision=0, elem_id="gen-seed")
        with gr.Row():
            start_btn = gr.Button("Generate", variant="primary", elem_id="gen-start")
            cancel_btn = gr.Button("Cancel", variant="stop", elem_id="gen-cancel")
            resume_btn = gr.Button("Resume", elem_id="gen-resume")
            ctx.jobs_button("gen-all-jobs")
            pick = gr.Dropdown(persona_generation_jobs.choices(store), value=None, label="Generation",
                               allow_custom_value=True, elem_id="gen-pick")
        progress = gr.HTML(persona_generation_form.progress_html(None), elem_id="gen-progress")
        status = gr.Markdown(elem_id="gen-status")
        table = gr.Dataframe([], headers=persona_generation_form.HEADERS, datatype="str", type="array",
                             interactive=False, max_height=360, label="Review queue (click a candidate)",
                             elem_id="gen-table")
        detail = gr.Markdown(persona_generation_form.candidate_markdown(None), elem_id="gen-candidate")
        with gr.Row():
            accept_btn = gr.Button("Accept", elem_id="gen-accept")
            edit_btn = gr.Button("Edit in the form", elem_id="gen-edit")
            accept_edited_btn = gr.Button("Accept the edited form", elem_id="gen-accept-edited")
            reject_btn = gr.Button("Reject", elem_id="gen-reject")
            regen_btn = gr.Button("Regenerate", elem_id="gen-regenerate")
            accept_all_btn = gr.Button("Accept all valid", variant="primary", elem_id="gen-accept-all")
        with gr.Row():
            set_name = gr.Textbox(label="Set name for this generation's accepted personas", scale=3,
                                  elem_id="gen-set-name")
            make_set_btn = gr.Button("Save as a persona set", scale=1, elem_id="gen-make-set")
    gen_id = gr.State(None)
    cand_id = gr.State(None)
    timer = gr.Timer(POLL_S, active=False)

    def queue(gid: Optional[int], cid: Optional[int] = None) -> list:
        g = persona_generation_jobs.generation(store, gid) if gid else None
        rows = persona_generation_form.candidate_rows(generation_store.list_candidates(store, gid)) if g else []
        candidate = generation_store.get_candidate(store, cid) if cid else None
        return [persona_generation_form.progress_html(g), rows, persona_generation_form.candidate_markdown(candidate)]

    queue_out = [progress, table, detail]

    def on_start(*values: Any):
        spec, settings, errs = persona_generation_form.read_form(dict(zip(persona_generation_form.FORM_FIELDS, values)))
        if spec is None:
            return [gr.skip(), persona_generation_form.errors_markdown(errs), gr.skip()] + [gr.skip()] * len(queue_out)
        gen = generation_store.make_generator(settings["base_url"], settings["model"],
                                              threshold=float(settings["threshold"]))
        try:
            gid, job_id = persona_generation_jobs.start(store, ctx.store_url, spec, gen)
        except (JobError, OSError) as exc:
            return [gr.skip(), f"**Not started.** {md(exc)}", gr.skip()] + [gr.skip()] * len(queue_out)
        return [gid, f"Generation {gid} started as job #{job_id}: {spec.count} persona(s).", gr.Timer(active=True),
                *queue(gid)]

    def on_tick(gid: Optional[int], cid: Optional[int]):
        g = persona_generation_jobs.generation(store, gid) if gid else None
        return [*queue(gid, cid), gr.Timer(active=persona_generation_jobs.is_live(g))]

    def on_pick(gid: Any):
        gid = int(gid) if str(gid or "").isdigit() else None
        g = persona_generation_jobs.generation(store, gid) if gid else None
        return [gid, None, gr.Timer(active=persona_generation_jobs.is_live(g)), *queue(gid)]

    def on_resume(gid: Optional[int]):
        return [persona_generation_jobs.resume(store, ctx.store_url, gid), gr.Timer(active=True), *queue(gid)]

    def on_select(gid: Optional[int], evt: gr.SelectData):
        row = evt.row_value or []
        cid = int(row[0]) if row and str(row[0]).isdigit() else None
        candidate = generation_store.get_candidate(store, cid) if cid else None
        return cid, persona_generation_form.candidate_markdown(candidate)

    def review(action: str, gid: Optional[int], cid: Optional[int], *form: Any):
        if action == "accept_all":
            if not gid:
                return ["Generate first.", *queue(gid, cid)]
            taken = generation_store.accept_all_valid(store, gid)
            return [f"Accepted {len(taken)} persona(s).", *queue(gid, cid)]
        if not cid:
            return ["Pick a candidate first.", *queue(gid, cid)]
        try:
            if action == "accept":
                msg = f"Accepted as **{md(generation_store.accept_candidate(store, cid).id)}**."
            elif action == "accept_edited":
                edited = form_profile(dict(zip(FIELDS, form)), None)
                msg = f"Accepted the edited form as **{md(generation_store.accept_candidate(store, cid, edited).id)}**."
            elif action == "reject":
                generation_store.reject_candidate(store, cid)
                msg = f"Rejected candidate {cid}."
            else:
                msg = f"Regenerated candidate {cid}: {md(generation_store.regenerate_candidate(store, cid)['status'])}."
        except ProfileError as exc:
            msg = "**Not done.** " + "".join(f"  \n⚠ {md(k)}: {md(v)}" for k, v in exc.errors.items())
        return [msg, *queue(gid, cid)]

    def on_edit(cid: Optional[int]):
        cand = generation_store.get_candidate(store, cid) if cid else None
        if cand is None:
            return [gr.skip()] * (2 + len(editor)) + ["Pick a candidate first."]
        p = generation_store.candidate_profile(cand)
        p.id = persona_store.fresh_id(store, p.name or "generated")
        head = f"### New persona from candidate {cid} (press *Accept the edited form* when done)"
        return [None, head, *form_values(p), f"Candidate {cid} is in the persona form."]

    form_in = [count, needs, personalities, languages, topics, seed, base_url, model, threshold]
    start_btn.click(on_start, form_in, [gen_id, status, timer, *queue_out])
    timer.tick(on_tick, [gen_id, cand_id], [*queue_out, timer])
    cancel_btn.click(partial(persona_generation_jobs.cancel, store), [gen_id], status)
    resume_btn.click(on_resume, [gen_id], [status, timer, *queue_out])
    pick.select(on_pick, [pick], [gen_id, cand_id, timer, *queue_out])
    ctx.refresh_on_show(lambda: gr.update(choices=persona_generation_jobs.choices(store)), None, pick)
    table.select(on_select, [gen_id], [cand_id, detail])
    for btn, action in ((accept_btn, "accept"), (accept_edited_btn, "accept_edited"), (reject_btn, "reject"),
                        (regen_btn, "regenerate"), (accept_all_btn, "accept_all")):
        btn.click(partial(review, action), [gen_id, cand_id, *editor],
                  [status, *queue_out]).then(refresh_fn, refresh_in, refresh_out)
    edit_btn.click(on_edit, [cand_id], [editing, title, *editor, status])
    make_set_btn.click(partial(persona_generation_form.set_from_generation, store), [set_name, gen_id],
                       status).then(*sets_refresh)
