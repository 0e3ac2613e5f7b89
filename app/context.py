"""LabContext: what every view needs (the store, settings) and the cross-view link to Transcripts."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from storage import Store

TRANSCRIPTS_TAB = "transcripts"


@dataclass
class LabContext:
    """Built once per app by app.lab.build_app and handed to each view's `build(ctx)`.

    `tabs` and `dialogue_link` are set by build_app before any view is built. To open a dialogue in the
    Transcripts view from another view, make an event output `ctx.link_outputs` and return
    `ctx.open_dialogue(dialogue_id)` from its handler, e.g.
        btn.click(lambda i: ctx.open_dialogue(i), inputs=[id_box], outputs=ctx.link_outputs)
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

    def open_experiment(self, experiment_id: Optional[int]) -> tuple:
        """Updates for `[tabs, experiment_link]`: switch to the Experiments view showing `experiment_id`."""
        return self._open("experiments", experiment_id)

    @staticmethod
    def _open(tab: str, item_id: Optional[int]) -> tuple:
        import gradio as gr

        if item_id in (None, ""):
            return gr.update(), gr.update()
        return gr.Tabs(selected=tab), {"id": int(item_id), "at": time.time()}
