"""Play the user: talk to a policy as a persona (or as yourself) and set your own emotion after each reply.

The logic is app.services.play; this view shows the persona card (profile, hidden need, scenario), the
dialogue, your emotion curve, and, only after you answered, what the simulated user would have felt.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import gradio as gr

from app.context import LabContext
from app.endpoint_field import endpoint_field
from app.plots import emotion_figure
from app.render import dialogue_html, md, user_emotions
from app.services import play
from app.views.live_partial import PartialReplies, partial_html
from simulator.personas.builtin import builtin_profiles
from simulator.personas.profile import NEED_CATEGORIES
from simulator.personas.specs import resolve_personas
from simulator.user.rules import DEFAULT_RULES, RULE_SETS
from storage.dialogues import load_dialogue
from trainer.rollout.build import SpecError


def persona_choices(store: Any) -> list[tuple[str, str]]:
    from simulator.personas import store as persona_store

    stored = [(f"{p.name} ({p.id})", p.id) for p in persona_store.list_profiles(store)]
    hard = [(f"{p.name} ({p.id}, {p.extra.get('adversarial_style', 'hard')})", p.id)
            for p in builtin_profiles("adversarial")]
    return [("Yourself (no persona)", play.YOURSELF)] + stored + hard


def persona_card(store: Any, persona_id: str | None) -> tuple[str, str]:
    """(the card's markdown, the persona's first line) for a persona id."""
    if not persona_id or persona_id == play.YOURSELF:
        return ("**Playing yourself.** Say what you want the simulated user to know about you and what you hope "
                "for: the shadow judge reads it as your profile."), ""
    p = resolve_personas([persona_id], store)[0]
    return (f"### You are {md(p.name)}\n**Hidden need** (what would really help you): {md(p.hidden_need)}\n\n"
            f"<details><summary>Profile</summary>\n\n{md(p.persona)}\n</details>\n\n"
            f"<details><summary>Scenario</summary>\n\n{md(p.background)}\n</details>"), p.first_line


def _player(name: str, request: gr.Request | None) -> str:
    return (getattr(request, "username", None) or name or "").strip()


def _outputs(store: Any, state: play.PlayState | None, status: str, shadow: str = ""):
    if state is None:
        return state, status, dialogue_html([]), emotion_figure([]), shadow
    d = load_dialogue(store, state.dialogue_id) or {"turns": []}
    series = [("you", user_emotions(d["turns"]))]
    if state.replies > 1 or state.ended:  # a shadow point exists only once you answered
        series.append(("simulator (shadow)", play.shadow_emotions(store, d)))
    head = f"dialogue {state.dialogue_id} · {state.policy}" + (f" · ended: {state.ended}" if state.ended else "")
    return state, status, dialogue_html(d["turns"], header=head), emotion_figure(series), shadow


def emotion_box(state: play.PlayState) -> Any:
    """The emotion box after a reply: emptied (a Send without a value is refused, never read as 0), the
    person's last emotion shown beside the bands."""
    return gr.update(value=None, info=f"your last: {state.emotion:g} · {play.BANDS}")


def shadow_md(shadow: dict[str, Any]) -> str:
    """The simulator's judgement of your last turn, shown after you answered."""
    if shadow.get("error"):
        return f"**The simulator could not judge this turn:** {md(shadow['error'])}"
    inner = shadow.get("inner") or {}
    lines = [f"**The simulator would have felt {shadow['delta']:+g}** (emotion {shadow['emotion']:g})."]
    for key, label in (("analyse", "Felt"), ("activity", "Inner activity"), ("TargetCompletion", "Need")):
        if inner.get(key):
            lines.append(f"- {label}: {md(inner[key])}")
    if shadow.get("reply_text"):
        lines.append(f"- It would have said: {md(shadow['reply_text'])}")
    return "\n".join(lines)


FIELD_ERRORS = ("message", "emotion", "policy")  # a refusal's field (its message's prefix) -> the line under it


def field_errors(problem: str) -> tuple[str, list[str]]:
    """(the status line, one line per FIELD_ERRORS field) for a refusal: a field's problem goes under the field
    it names ("emotion: ..."), anything else in the status line."""
    field = problem.partition(":")[0].strip()
    if field in FIELD_ERRORS:
        return "**Not sent:** fix the field marked ⚠.", [f"⚠ {md(problem)}" if f == field else ""
                                                         for f in FIELD_ERRORS]
    return f"**Not sent:** {md(problem)}", [""] * len(FIELD_ERRORS)


def while_writing(store: Any, work: Callable[[Callable], None], policy: str, policy_url: str, cap: int
                  ) -> Iterator[str]:
    """Run `work(listener)` (the policy writes its reply: up to minutes on a busy CPU) in a thread and yield the
    dialogue with the reply in progress under it, as Live rollout shows it, until `work` ends."""
    partial, seen = PartialReplies(cap), {}

    def listener(keys: list[str], rows: list[list[int]]) -> None:
        seen["key"] = keys[0] if keys else ""
        partial.listener(keys, rows)

    thread = threading.Thread(target=work, args=(listener,), daemon=True, name="play-reply")
    thread.start()
    shown = None
    while thread.is_alive():
        thread.join(0.5)
        key = seen.get("key", "")
        progress = partial.progress(key) if key else None
        if progress is None or not thread.is_alive() or len(progress[0]) == shown:
            continue
        shown = len(progress[0])
        turns = (load_dialogue(store, int(key.rsplit("-", 1)[1])) or {"turns": []})["turns"]
        yield dialogue_html(turns) + partial_html(play.decoder(policy, policy_url)(progress[0]), shown, progress[1])


def build(ctx: LabContext) -> None:
    store = ctx.store
    state = gr.State(None)
    with gr.Row():
        with gr.Column(scale=3, min_width=320):
            persona = gr.Dropdown([], label="Play as", elem_id="play-persona")
            card = gr.Markdown(elem_id="play-card")
            with gr.Group(visible=False) as self_box:
                about = gr.Textbox(label="About you", lines=2, elem_id="play-about")
                need = gr.Textbox(label="What you hope for", elem_id="play-need")
                need_category = gr.Dropdown(list(NEED_CATEGORIES), value="deep_empathy", label="Kind of need")
            player = gr.Textbox("", label="Your name (your login name when logged in)", elem_id="play-player")
            policy = gr.Textbox("default", label="Policy", elem_id="play-policy",
                                info="default · a model or checkpoint folder · openai:MODEL")
            err_policy = gr.Markdown("", elem_classes="field-error", elem_id="err-play-policy")
            policy_url = endpoint_field("Policy endpoint (openai: policies)", elem_id="play-policy-url")
            simulator = gr.Textbox("offline", label="Shadow simulator", elem_id="play-simulator",
                                   info="judges each of your turns after you answered: offline · openai:MODEL")
            simulator_url = endpoint_field("Simulator endpoint (openai: simulators)", elem_id="play-simulator-url")
            with gr.Row():
                rules = gr.Dropdown(list(RULE_SETS), value=DEFAULT_RULES, label="Emotion rules")
                max_turns = gr.Number(10, precision=0, label="Policy replies at most", elem_id="play-max-turns")
            opening = gr.Textbox(label="Your opening message", lines=2, elem_id="play-opening")
            err_opening = gr.Markdown("", elem_classes="field-error", elem_id="err-play-opening")
            start = gr.Button("Start", variant="primary", elem_id="play-start")
        with gr.Column(scale=7):
            status = gr.Markdown(elem_id="play-status")
            chat = gr.HTML(dialogue_html([]), elem_id="play-chat")
            with gr.Row():
                with gr.Column(min_width=200):
                    emotion = gr.Number(None, label="Your emotion now (0-100)", info=play.BANDS,
                                        elem_id="play-emotion")
                    err_emotion = gr.Markdown("", elem_classes="field-error", elem_id="err-play-emotion")
                thoughts = gr.Textbox(label="What you thought (optional)", elem_id="play-thoughts")
            message = gr.Textbox(label="Your answer", lines=2, elem_id="play-message")
            err_message = gr.Markdown("", elem_classes="field-error", elem_id="err-play-message")
            with gr.Row():
                send = gr.Button("Send", variant="primary", elem_id="play-send")
                end = gr.Button("End dialogue", elem_id="play-end")
            shadow = gr.Markdown(elem_id="play-shadow")
            plot = gr.Plot(label="Emotion: you and the simulator", elem_id="play-plot")

    def on_persona(pid):
        text, first = persona_card(store, pid)
        return text, first, gr.update(visible=pid == play.YOURSELF)

    persona.change(on_persona, persona, [card, opening, self_box])

    def on_start(pid, about_, need_, category, name, policy_, policy_url_, sim, sim_url, rules_, turns, opening_,
                 request: gr.Request):
        who, box = _player(name, request), {}

        def work(listener: Callable) -> None:
            try:
                profile = play.yourself_profile(who, about_, need_, category) if pid == play.YOURSELF or not pid \
                    else resolve_personas([pid], store)[0]
                box["state"] = play.start_play(store, profile, opening_, who, policy_, policy_url_, sim, sim_url,
                                               rules=rules_, max_turns=int(turns or 10), listener=listener,
                                               session=request.session_hash or "")
            except (ValueError, KeyError, SpecError, RuntimeError) as exc:
                box["error"] = str(exc.args[0] if exc.args else exc)

        skip = gr.skip()
        for chat_now in while_writing(store, work, policy_, policy_url_, 96):
            yield skip, "The policy is writing its reply…", chat_now, skip, skip, skip, *[skip] * 3
        if "error" in box:
            status_line, lines = field_errors(box["error"])
            yield (*_outputs(store, None, status_line.replace("Not sent", "Cannot start")), gr.update(), *lines)
            return
        st = box["state"]
        yield (*_outputs(store, st, "Your turn: read the reply, set your emotion and answer."), emotion_box(st),
               "", "", "")

    outs = [state, status, chat, plot, shadow]
    start.click(on_start, [persona, about, need, need_category, player, policy, policy_url, simulator, simulator_url,
                           rules, max_turns, opening], outs + [emotion, err_opening, err_emotion, err_policy])

    def on_answer(st, message_, emotion_, thoughts_, end_=False):
        skip, keep = gr.skip(), gr.update()
        if st is None:
            yield (*_outputs(store, None, "**Start a dialogue first.**"), keep, keep, keep, "", "", "")
            return
        box = {}

        def work(listener: Callable) -> None:
            try:
                box["judged"] = play.answer(store, st, message_, emotion_, thoughts_, end=end_, listener=listener)
            except ValueError as exc:  # nothing stored; what you typed stays in the boxes
                box["error"] = str(exc)

        for chat_now in while_writing(store, work, st.policy, st.policy_url, st.max_new_tokens):
            yield skip, "The policy is writing its reply…", chat_now, skip, skip, skip, skip, skip, skip, skip, skip
        if "error" in box:
            status_line, lines = field_errors(box["error"])
            yield (*_outputs(store, st, status_line), keep, keep, keep, *lines)
            return
        judged = box.get("judged")
        note = play.ending_text(st) or "Your turn again: set your emotion now and answer."
        yield (*_outputs(store, st, note, shadow_md(judged) if judged else ""), "", "", emotion_box(st), "", "", "")

    answer_outs = outs + [message, thoughts, emotion, err_message, err_emotion, err_policy]
    send.click(on_answer, [state, message, emotion, thoughts], answer_outs)

    def on_end(st, message_, emotion_, thoughts_):
        yield from on_answer(st, message_, emotion_, thoughts_, True)

    end.click(on_end, [state, message, emotion, thoughts], answer_outs)
    for box_, err in ((emotion, err_emotion), (message, err_message), (opening, err_opening), (policy, err_policy)):
        box_.input(lambda: "", None, err)  # a field's error goes once the field changes
    ctx.unload_hooks.append(_abandon_on_unload)  # a closed (or reloaded) page ends its dialogue

    def fill(current, request: gr.Request):
        choices = persona_choices(store)
        ids = [pid for _, pid in choices]
        value = current if current in ids else (ids[1] if len(ids) > 1 else ids[0])
        return gr.update(choices=choices, value=value), getattr(request, "username", None) or gr.update()

    ctx.refresh_on_show(fill, persona, [persona, player])


def _abandon_on_unload(request: gr.Request) -> None:
    play.abandon(request.session_hash or "")
