"""Live rollout view: watch a policy talk with simulated users turn by turn.

Start runs trainer.rollout.dialogue_rollout.DialogueRollout.stream() (profiles x group size dialogues,
written to the store as they happen) and streams each event into the page: the dialogues side by side, their emotion curves
overlaid, every user turn's inner thoughts and every policy turn's think block (collapsible). Stop cancels
the run: running dialogues end as "cancelled" with the reason stored; pressing it again does nothing.
A finished dialogue opens in the Transcripts view.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional

import gradio as gr

from app.context import LINK_EVENT, LabContext
from app.endpoint_field import endpoint_field
from app.plots import emotion_figure
from app.render import dialogue_html, md, outcomes_text, user_emotions
from app.views.live_partial import PartialReplies, decode_with, partial_html, writing_words
from simulator.llm.traffic import TrafficLimits
from simulator.personas import store as persona_store
from simulator.user.rules import DEFAULT_RULES, RULE_SETS
from simulator.user.spec import SimulatorSpec
from storage import Store

OFFLINE_NOTE = ("**Offline simulator**: a deterministic development and demo environment. Its emotions are not "
                "produced by an LLM, and its scores are **not comparable with the Sentient benchmark**; use "
                "`openai:MODEL` for benchmark-grade numbers.")
# Runs in progress, by browser session: Stop finds its run here.
_RUNS: dict[str, Any] = {}
_RUNS_LOCK = threading.Lock()
TICK_S = 1.0  # how often a reply being sampled is redrawn (and a closed page noticed) between events


@dataclass
class LiveDialogue:
    label: str
    dialogue_id: Optional[int] = None
    turns: list[dict] = field(default_factory=list)
    status: str = "running"
    outcome: str = ""
    error: str = ""
    final_emotion: Optional[float] = None


def apply_event(live: dict[str, LiveDialogue], ev: Any) -> None:
    """Fold one RolloutEvent into the per-dialogue state."""
    d = live.get(ev.key)
    if d is None:
        n = sum(x.label.startswith(ev.profile_id) for x in live.values()) + 1
        d = live[ev.key] = LiveDialogue(label=f"{ev.profile_id} #{n}")
    d.dialogue_id = ev.dialogue_id if ev.dialogue_id is not None else d.dialogue_id
    if ev.kind == "turn" and ev.turn:
        d.turns.append(dict(ev.turn))
    elif ev.kind == "finished" and ev.sample is not None:
        s = ev.sample
        d.status, d.outcome, d.error, d.final_emotion = s.status, s.outcome, s.error, s.final_emotion


def columns_html(live: dict[str, LiveDialogue], partial: Optional[PartialReplies] = None,
                 decode: Any = None) -> str:
    """The dialogues side by side, each headed by its label, store id and state; a running one's reply in
    progress (`partial`, decoded with `decode`) under its last turn."""
    cols = []
    for key, d in live.items():
        progress = partial.progress(key) if partial is not None and d.status == "running" else None
        writing = partial_html(decode(progress[0]), len(progress[0]), progress[1]) if progress else ""
        state = d.status if d.status == "running" else f"{d.outcome or d.status}"
        final = "" if d.final_emotion is None else f" · final {d.final_emotion:.0f}"
        stored = d.dialogue_id if d.dialogue_id is not None else "…" if d.status == "running" else "not stored"
        head = f"{d.label} · dialogue {stored} · {state}{final}"
        foot = f"error: {d.error}" if d.error and d.status != "running" else ""
        cols.append(f"<div class='live-col'>{dialogue_html(d.turns, header=head, footer=foot)}{writing}</div>")
    return f"<div class='live-row' data-dialogues='{len(cols)}'>{''.join(cols)}</div>"


def figure(live: dict[str, LiveDialogue]):
    return emotion_figure([(d.label, user_emotions(d.turns)) for d in live.values()], title="Emotion per turn (live)")


def finished_choices(live: dict[str, LiveDialogue]) -> list[tuple[str, int]]:
    return [(f"{d.label} · dialogue {d.dialogue_id} · {d.outcome or d.status}", d.dialogue_id)
            for d in live.values() if d.status != "running" and d.dialogue_id is not None]


def progress_words(live: dict[str, LiveDialogue], max_turns: int) -> str:
    """'5 of 8 policy replies' over the dialogues still playing (each may end before its turn limit)."""
    playing = [d for d in live.values() if d.status == "running"]
    replies = sum(1 for d in playing for t in d.turns if t.get("role") == "assistant")
    return f"{replies} of at most {len(playing) * max_turns} policy replies in the dialogues still playing"


def persona_choices(store: Store) -> list[tuple[str, str]]:
    """Every stored persona, then every stored persona set (as set:NAME)."""
    from simulator.personas.sets import list_sets

    return [(f"{p.name} ({p.id})", p.id) for p in persona_store.list_profiles(store)] + \
        [(f"set {s.name} ({s.size} personas)", f"set:{s.name}") for s in list_sets(store)]


def start_rollout(store: Store, request_key: str, persona_ids: list[str], policy: str, policy_url: str, simulator: str,
                  simulator_url: str, rules: str, mode: str, group: int, max_turns: int, max_new_tokens: int,
                  temperature: float, seed: int, profiles: Optional[list] = None, record: bool = True,
                  pack: str = "own", simulator_max_in_flight: int = TrafficLimits.max_in_flight,
                  simulator_requests_per_minute: int = TrafficLimits.requests_per_minute):
    """Generator of (status markdown, figure, columns HTML, finished-dialogue choices). `profiles` plays
    these profiles instead of resolving `persona_ids` (the persona editor's preview); record=False stores
    nothing. The policy and simulator are named as everywhere else (PolicySpec, SimulatorSpec)."""
    from simulator.personas.specs import resolve_personas
    from storage.recorder import DialogueRecorder
    from trainer.policies.spec import PolicySpec
    from trainer.rollout.build import SpecError, build_rollout, simulator_factory
    from trainer.rollout.build import policy_engine as build_policy
    from trainer.rollout.types import RolloutConfig

    live: dict[str, LiveDialogue] = {}
    partial = PartialReplies(int(max_new_tokens))
    decode: Any = lambda ids: ""  # noqa: E731  (the policy's, once loaded)

    def out(status: str, tick: bool = False):
        html = columns_html(live, partial, decode)
        if tick:  # only the replies in progress moved: the chart and the finished list stay as they are
            return status, gr.skip(), html, gr.skip()
        return status, figure(live), html, gr.update(choices=finished_choices(live))

    if not persona_ids and not profiles:
        yield out("**Pick at least one persona.**")
        return
    from simulator.access import current_access

    bounds = {"group": group, "max_turns": max_turns, "max_new_tokens": max_new_tokens,
              "simulator_max_in_flight": simulator_max_in_flight}
    too_much = [f"{name}: {problem}" for name, value in bounds.items()
                if (problem := current_access().bound_error(name, value))]
    if too_much:
        yield out("**Not started.** " + md("; ".join(too_much)))
        return
    with _RUNS_LOCK:
        if request_key in _RUNS:
            yield out("**A rollout is already running in this page**: stop it first.")
            return
        _RUNS[request_key] = None  # reserved; Stop before the run exists is a no-op
    policy_engine = None
    try:
        try:
            config = RolloutConfig(mode=mode, max_turns=int(max_turns), max_new_tokens=int(max_new_tokens),
                                   temperature=float(temperature), seed=int(seed)).validate()
            profiles = profiles or resolve_personas(list(persona_ids), store)
            traffic = TrafficLimits(max_in_flight=int(simulator_max_in_flight),
                                    requests_per_minute=int(simulator_requests_per_minute))
            factory = simulator_factory(SimulatorSpec(simulator.strip() or "offline", base_url=simulator_url.strip(),
                                                      pack=(pack or "own").strip(), rules=rules, seed=int(seed),
                                                      traffic=traffic))
        except (KeyError, ValueError, TypeError, ImportError) as exc:
            yield out(f"**Cannot start:** {md(exc.args[0] if exc.args else exc)}")
            return
        yield out(f"Loading policy {md(policy)} …")
        try:
            policy_engine = build_policy(PolicySpec(policy.strip(), base_url=policy_url.strip()))
        except SpecError as exc:
            yield out(f"**Cannot load the policy** {md(policy)}: {md(exc.message)}")
            return
        policy_engine.token_listener, decode = partial.listener, decode_with(policy_engine)
        rollout = build_rollout(policy_engine, factory, config, recorder=DialogueRecorder(store) if record else None)
        with _RUNS_LOCK:
            stopped_early = _RUNS.get(request_key) == "stop"
            _RUNS[request_key] = rollout
        if stopped_early:
            rollout.cancel()
        n = len(profiles) * int(group)
        yield out(f"Running {n} dialogue(s)…")
        try:
            for ev in rollout.stream(profiles, group_size=int(group), tick_s=TICK_S):
                if ev.kind != "tick":
                    apply_event(live, ev)
                if ev.kind == "finished" or (ev.kind == "turn" and (ev.turn or {}).get("role") == "assistant"):
                    partial.done(ev.key)
                done = sum(d.status != "running" for d in live.values())
                verb = "Stopping" if rollout.cancelled else "Running"
                writing = writing_words(partial, [k for k, d in live.items() if d.status == "running"])
                yield out(f"{verb}: {done} of {n} dialogue(s) ended, {progress_words(live, config.max_turns)}"
                          + (f"; {writing}" if writing else "") + ".", tick=ev.kind == "tick")
        except Exception as exc:  # a run-level failure: shown, the lab keeps working
            yield out(f"**The rollout stopped with an error:** {md(type(exc).__name__)}: {md(exc)}")
            return
        ended = [d.outcome or d.status for d in live.values()]
        yield out(("Stopped: " if rollout.cancelled else "Done: ") + outcomes_text(ended) + ".")
    finally:
        with _RUNS_LOCK:
            _RUNS.pop(request_key, None)
        if policy_engine is not None:
            policy_engine.close()


def stop_rollout(request_key: str) -> str:
    """Cancel this page's run; safe to call any number of times."""
    with _RUNS_LOCK:
        run = _RUNS.get(request_key)
        if run is None and request_key in _RUNS:
            _RUNS[request_key] = "stop"  # still loading: cancel as soon as it starts
            return "Stopping…"
    if run is None:
        return "Nothing is running."
    if run == "stop" or run.cancelled:
        return "Already stopping…"
    run.cancel()
    return "Stopping…"


def build(ctx: LabContext) -> None:
    store = ctx.store
    with gr.Row():
        with gr.Column(scale=3, min_width=320):
            personas = gr.Dropdown([], value=[], multiselect=True,  # filled on load (after any login)
                                   label="Persona(s)", elem_id="live-personas")
            policy = gr.Textbox("default", label="Policy",
                                info="default (SmolLM2-135M-Instruct) · a model or checkpoint folder · vllm:PATH · openai:MODEL",
                                elem_id="live-policy")
            policy_url = endpoint_field("Policy endpoint (openai: policies)", elem_id="live-policy-url")
            simulator = gr.Textbox("offline", label="Simulator",
                                   info="offline (scorer v3) · offline:v2 · openai:MODEL",
                                   elem_id="live-simulator")
            simulator_url = endpoint_field("Simulator endpoint (openai: simulators)", elem_id="live-simulator-url")
            with gr.Accordion("Simulator prompts and traffic", open=False):
                pack = gr.Textbox("own", label="Prompt pack", info="own · own:json · sage:DIR · rlver:DIR · v1",
                                  elem_id="live-pack")
                with gr.Row():
                    max_in_flight = gr.Number(TrafficLimits.max_in_flight, precision=0, minimum=1,
                                              label="Requests in flight", elem_id="live-max-in-flight")
                    rpm = gr.Number(TrafficLimits.requests_per_minute, precision=0, minimum=0,
                                    label="Requests per minute (0 = no limit)", elem_id="live-rpm")
            sim_note = gr.Markdown(OFFLINE_NOTE, elem_classes=["sim-note"], elem_id="live-sim-note")
            with gr.Row():
                rules = gr.Dropdown(list(RULE_SETS), value=DEFAULT_RULES, label="Emotion rules", min_width=120)
                mode = gr.Radio(["direct", "think"], value="direct", label="Mode", min_width=120)
            with gr.Row():
                group = gr.Slider(1, 8, value=2, step=1, label="Group size (per persona)", elem_id="live-group")
                max_turns = gr.Slider(1, 20, value=4, step=1, label="Max turns", elem_id="live-max-turns")
            with gr.Accordion("Sampling", open=False):
                max_new_tokens = gr.Slider(8, 1024, value=96, step=8, label="Max new tokens per turn",
                                           elem_id="live-max-new-tokens")
                temperature = gr.Slider(0.0, 2.0, value=1.0, step=0.05, label="Temperature")
                seed = gr.Number(0, precision=0, label="Seed")
            with gr.Row():
                start_btn = gr.Button("Start", variant="primary", elem_id="live-start")
                stop_btn = gr.Button("Stop", variant="stop", elem_id="live-stop")
            status = gr.Markdown(elem_id="live-status")
            stop_msg = gr.Markdown(elem_id="live-stop-status")  # separate: Stop must not overwrite the run's end
            with gr.Row():
                finished = gr.Dropdown([], label="Finished dialogue", scale=3, elem_id="live-finished")
                open_btn = gr.Button("Open in Transcripts", scale=1, elem_id="live-open")
        with gr.Column(scale=7):
            plot = gr.Plot(label="Emotion per turn", elem_id="live-plot")
            chats = gr.HTML(columns_html({}), elem_id="live-chats")

    def on_start(persona_ids, policy_, policy_url_, simulator_, simulator_url_, rules_, mode_, group_, max_turns_,
                 max_new_tokens_, temperature_, seed_, pack_, max_in_flight_, rpm_, request: gr.Request):
        yield from start_rollout(store, request.session_hash or "", persona_ids, policy_, policy_url_, simulator_,
                                 simulator_url_, rules_, mode_, group_, max_turns_, max_new_tokens_, temperature_,
                                 seed_, pack=pack_, simulator_max_in_flight=max_in_flight_,
                                 simulator_requests_per_minute=rpm_)

    start_btn.click(on_start, [personas, policy, policy_url, simulator, simulator_url, rules, mode, group, max_turns,
                               max_new_tokens, temperature, seed, pack, max_in_flight, rpm],
                    [status, plot, chats, finished])
    stop_btn.click(_stop_handler, None, stop_msg, concurrency_limit=None)
    simulator.change(lambda s: gr.update(visible=SimulatorSpec(s or "offline").kind == "offline"), simulator, sim_note)

    def fill_personas(current: Optional[list[str]]):
        choices = persona_choices(store)
        ids = [pid for _, pid in choices]
        kept = [pid for pid in current or [] if pid in ids]
        return gr.update(choices=choices, value=kept or ids[:1])

    ctx.refresh_on_show(fill_personas, personas, personas)
    ctx.unload_hooks.append(_stop_on_unload)  # a closed (or reloaded) page stops its dialogues
    open_btn.click(lambda i: ctx.open_dialogue(i), finished, ctx.link_outputs, **LINK_EVENT)


def _stop_handler(request: gr.Request) -> str:
    return stop_rollout(request.session_hash or "")


def _stop_on_unload(request: gr.Request) -> None:
    stop_rollout(request.session_hash or "")
