"""LabContext: what every view needs (the store, settings) and the cross-view link to Transcripts; and
`changed_only`, which keeps a view's poll from redrawing what the page already shows."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from storage import Store

TRANSCRIPTS_TAB = "transcripts"
# A view's poll while nothing it shows is moving. Every tick costs the browser a pass over the whole page
# (Gradio updates each component's loading state): ~0.6 s of a core in headless Chromium on the 2-core machine,
# whatever the tick sends: a Training tab ticking every 2 s with no job cost Chromium 14 s of CPU per 30 s.
IDLE_POLL_S = 10.0
# The keyword arguments of an event whose outputs include `tabs` (a link that opens another view): no loading
# status on its outputs. Gradio's front end keeps every component an event's progress ever covered and, on each
# later event of the page (every poll tick), snapshots it with all its children: with the Tabs among them (the
# page's load event opens ?dialogue= links) that was the whole page, 626 components, on every tick.
LINK_EVENT: dict[str, Any] = {"show_progress_on": []}


@dataclass
class LabContext:
    """Built once per app by app.lab.build_app and handed to each view's `build(ctx)`.

    `tabs` and `dialogue_link` are set by build_app before any view is built. To open a dialogue in the
    Transcripts view from another view, make an event output `ctx.link_outputs` and return
    `ctx.open_dialogue(dialogue_id)` from its handler, e.g.
        btn.click(lambda i: ctx.open_dialogue(i), inputs=[id_box], outputs=ctx.link_outputs, **LINK_EVENT)
    """

    store: Store
    store_url: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    url: str = ""  # where the lab is served, once launched
    tabs: Any = None  # gr.Tabs holding every view
    dialogue_link: Any = None  # gr.State: {"id": dialogue_id, "at": nonce}; Transcripts listens to it
    current_tab: Any = None  # the gr.Tab whose view is being built
    load_hooks: list = field(default_factory=list)  # (fn, inputs, outputs) run on every page load
    job_link: Any = None  # gr.State {"id": job_id, "at": nonce}: the Training view follows that job
    experiment_link: Any = None  # gr.State {"id": experiment_id, "at": nonce}: the Experiments view shows it
    first_tab: Optional[str] = None  # the tab the page opens on
    timers: list = field(default_factory=list)  # (tab id, gr.Timer) made by `poll`; app.lab switches them
    unload_hooks: list = field(default_factory=list)  # fn(request) run when a page is closed or reloaded

    def poll(self, seconds: float) -> Any:
        """A gr.Timer for the current view that ticks only while the view's tab is open: app.lab.build_app
        switches every view's timer on when its tab is opened (a click or a link) and off when another is.
        A page left open on one view then does not re-read and redraw the other views' tables and plots
        every few seconds (server queries and browser work for nothing)."""
        import gradio as gr

        tab_id = getattr(self.current_tab, "id", None)
        timer = gr.Timer(seconds, active=self.current_tab is None or tab_id == self.first_tab)
        if self.current_tab is not None:
            self.timers.append((tab_id, timer))
        return timer

    @staticmethod
    def poll_pace(live: bool, seconds: float) -> Any:
        """The update of a `poll` timer from its own tick: every `seconds` while something the view shows is
        live (a job running, a plan being made), every IDLE_POLL_S otherwise. Put it through `changed_only`
        with the tick's other outputs, so it is sent only when the pace changes."""
        import gradio as gr

        return gr.update(value=seconds if live else IDLE_POLL_S)

    def refresh_on_show(self, fn: Any, inputs: Any, outputs: Any) -> None:
        """Run `fn` when the page loads and whenever the current view's tab is opened (for lists that other
        views, jobs or the CLI change: personas, collections, ...). Call inside a view's build()."""
        self.load_hooks.append((fn, inputs, outputs))
        if self.current_tab is not None:
            self.current_tab.select(fn, inputs, outputs)

    @property
    def link_outputs(self) -> list:
        return [self.tabs, self.dialogue_link]

    def open_dialogue(self, dialogue_id: Optional[int]) -> tuple:
        """Updates for `link_outputs`: switch to Transcripts and select `dialogue_id` (None: no change)."""
        import gradio as gr

        if dialogue_id in (None, ""):
            return gr.update(), gr.update()
        # The nonce makes opening the same dialogue twice still fire the State's change event.
        return gr.Tabs(selected=TRANSCRIPTS_TAB), {"id": int(dialogue_id), "at": time.time()}

    def open_job(self, job_id: Optional[int]) -> tuple:
        """Updates for `[tabs, job_link]`: switch to the Training view following `job_id`."""
        return self._open("training", job_id)

    def jobs_button(self, elem_id: str) -> None:
        """A button opening the one jobs list (the Training view's: every kind, started here or from a shell),
        for a view that starts jobs. Call inside the view's build()."""
        import gradio as gr

        if self.tabs is None:
            return
        button = gr.Button("All jobs (every kind) →", size="sm", elem_id=elem_id)
        button.click(lambda: gr.Tabs(selected="training"), None, self.tabs, **LINK_EVENT)

    def open_experiment(self, experiment_id: Optional[int]) -> tuple:
        """Updates for `[tabs, experiment_link]`: switch to the Experiments view showing `experiment_id`."""
        return self._open("experiments", experiment_id)

    @staticmethod
    def _open(tab: str, item_id: Optional[int]) -> tuple:
        import gradio as gr

        if item_id in (None, ""):
            return gr.update(), gr.update()
        return gr.Tabs(selected=tab), {"id": int(item_id), "at": time.time()}


def _digest(value: Any) -> str:
    to_json = getattr(value, "to_json", None)  # a plotly figure
    text = to_json() if callable(to_json) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def changed_only(values: list[Any], sent: Optional[list[Optional[str]]]) -> tuple[list[Any], list[Optional[str]]]:
    """A poll's updates: each value equal to the one this poll sent last time (`sent`: its digests, kept in a
    gr.State) becomes gr.skip(), so the page redraws only what changed. Returns (updates, the digests to keep).
    A Training tab left open with no job re-sent three plots and a table every 2 s. Another handler that writes
    the same outputs resets the State to None, so the next poll sends everything. A value that is itself
    gr.skip() keeps its old digest."""
    import gradio as gr

    sent = list(sent) if sent and len(sent) == len(values) else [None] * len(values)
    skip = gr.skip()
    updates, digests = [], []
    for value, before in zip(values, sent):
        digest = before if isinstance(value, dict) and value == skip else _digest(value)
        updates.append(skip if digest == before and before is not None else value)
        digests.append(digest)
    return updates, digests
