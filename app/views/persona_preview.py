"""Preview from the persona editor: a short dialogue with the persona exactly as it is in the form, before it
is saved, shown with the Live rollout view's curve and dialogue columns. Nothing is stored: neither the
persona nor the dialogue (the rollout runs without a recorder), so a preview never counts in runs or
benchmarks."""
from __future__ import annotations

from typing import Any, Iterator, Optional

import gradio as gr

from app.context import LabContext
from app.render import md
from app.services.persona_form import FIELDS, form_profile
from app.views import live_rollout
from simulator.personas import store as persona_store
from simulator.personas.profile import ProfileError
from storage import Store

PREVIEW_RULES = "standard"
PREVIEW_TOKENS = 96


def preview_dialogue(store: Store, request_key: str, editing_id: Optional[str], values: dict[str, Any],
                     policy: str, simulator: str, turns: int, seed: int = 0) -> Iterator[tuple]:
    """(status, figure, dialogue HTML) as the preview runs. The form is validated first: a problem is
    reported by field and nothing runs."""

    original = persona_store.get_profile(store, editing_id) if editing_id else None
    try:
        profile = form_profile(values, original).validate()
    except ProfileError as exc:
        problems = "".join(f"  \n{md(k)}: {md(v)}" for k, v in exc.errors.items())
        yield (f"**Not previewed.** Fix the form first:{problems}", live_rollout.figure({}),
               live_rollout.columns_html({}))
        return
    for status, fig, html, _ in live_rollout.start_rollout(
            store, f"preview:{request_key}", [], policy or "default", "", simulator or "offline", "",
            PREVIEW_RULES, "direct", 1, int(turns), PREVIEW_TOKENS, 1.0, int(seed), profiles=[profile],
            record=False):
        yield status + ("" if status.startswith("**") or "…" in status else " (preview: nothing stored)"), fig, html


def build(ctx: LabContext, editing: Any, inputs: list) -> None:
    """The preview controls under the persona form; `inputs` are the form's fields in FIELDS order."""

    store = ctx.store
    with gr.Accordion("Preview dialogue (the form as it is, not saved)", open=False, elem_id="preview-box"):
        with gr.Row():
            policy = gr.Textbox("default", label="Policy", info="default · a local model folder · openai:MODEL",
                                elem_id="preview-policy")
            simulator = gr.Textbox("offline", label="Simulator", info="offline · offline:v2 · openai:MODEL",
                                   elem_id="preview-simulator")
            turns = gr.Slider(1, 10, value=3, step=1, label="Turns", elem_id="preview-turns")
        run = gr.Button("Preview dialogue", elem_id="preview-run")
        status = gr.Markdown(elem_id="preview-status")
        plot = gr.Plot(label="Emotion per turn", elem_id="preview-plot")
        chat = gr.HTML(live_rollout.columns_html({}), elem_id="preview-chat")

    def on_preview(request: gr.Request, editing_id, policy_, simulator_, turns_, *values):
        yield from preview_dialogue(store, request.session_hash or "", editing_id, dict(zip(FIELDS, values)),
                                    policy_, simulator_, turns_)

    run.click(on_preview, [editing, policy, simulator, turns, *inputs], [status, plot, chat])
