"""The lab's Gradio Blocks: one tab per view, startup of the store, launch with optional login.

Views are modules under app/views exposing `build(ctx: LabContext) -> None`, called inside their gr.Tab.
A view module that is not present is left out; one that fails to build shows its error in its tab.

Opening a dialogue from another view (Live rollout, Runs, Benchmark ...):
  - in Python: `outputs=ctx.link_outputs, **LINK_EVENT`, handler returns `ctx.open_dialogue(dialogue_id)`
    (switches to the Transcripts tab and selects the dialogue; see app.context.LabContext);
  - by URL: `http://HOST:PORT/?dialogue=ID` opens the lab on that dialogue.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
import time
import traceback
from typing import Any, Iterable, Optional

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# A closed page is noticed when its heartbeat connection fails to take the next beat; every 3 s (Gradio's
# default is 15) lets a closed Live rollout page stop its dialogues within seconds.
os.environ.setdefault("GRADIO_HEARTBEAT_INTERVAL", "3")

import gradio as gr
import httpx
from gradio import networking as gradio_networking
from gradio.routes import App, ORJSONResponse

from app.context import LINK_EVENT, TRANSCRIPTS_TAB, LabContext
from app.page_script import EarlyScript
from app.render import CSS, md
from app.trust import HostOriginGuard, LoginGate, allowed_hosts
from storage import Store

log = logging.getLogger("rlver.app")

MAX_UPLOAD_MB = 100  # the largest file the page takes (Gradio refuses a bigger upload with HTTP 413)
TOUR_START_TAB = "live"  # the tab the lab opens on: the first step of the README's five-minute tour
# (tab id, label, module). Order is the tab order.
VIEWS: list[tuple[str, str, str]] = [
    ("personas", "Personas", "app.views.personas"),
    ("live", "Live rollout", "app.views.live_rollout"),
    ("training", "Training", "app.views.training"),
    ("runs", "Runs", "app.views.runs"),
    ("benchmark", "Benchmark", "app.views.benchmark"),
    ("compare", "Compare", "app.views.compare"),
    (TRANSCRIPTS_TAB, "Transcripts", "app.views.transcripts"),
    ("experiments", "Experiments", "app.views.experiments"),
    ("play", "Play the user", "app.views.people.play"),
    ("rate", "Rate the simulator", "app.views.people.rate"),
    ("people", "People", "app.views.people.corpora"),
]


def startup(store: Store) -> dict[str, Any]:
    """Seed the built-in personas and reap dead jobs (marked interrupted under their lock, so a job whose
    process died with the last app, a persona generation say, shows as interrupted and resumable). Returns
    what was done."""
    done: dict[str, Any] = {}
    from simulator.personas.store import seed_builtin

    try:
        done["seeded"] = seed_builtin(store)
    except ModuleNotFoundError as exc:  # a checkout without the built-in library still serves the lab
        if exc.name != "simulator.personas.builtin":
            raise
        log.warning("no built-in persona library (simulator.personas.builtin); nothing seeded")
        done["seeded"] = 0
    try:
        from trainer.jobs.liveness import reap_dead_jobs
    except ImportError:  # the jobs module is optional for the personas/transcripts-only lab
        reap_dead_jobs = None
    if reap_dead_jobs is not None:
        done["interrupted"] = reap_dead_jobs(store)
    return done


def _build_view(module_name: str, ctx: LabContext) -> None:
    try:
        module = importlib.import_module(module_name)
        module.build(ctx)
    except Exception as exc:  # one broken view must not take the whole lab down
        log.error("view %s failed to build:\n%s", module_name, traceback.format_exc())
        gr.Markdown(f"**This view failed to load:** {md(type(exc).__name__)}: {md(exc)}")


def available_views() -> list[tuple[str, str, str]]:
    return [v for v in VIEWS if importlib.util.find_spec(v[2]) is not None]


def build_app(ctx: LabContext) -> gr.Blocks:
    """The Blocks of the lab. Call `launch()` on the result (see `launch` below for the settings)."""
    with gr.Blocks(title="RLVER Lab", analytics_enabled=False) as demo:
        gr.Markdown("## RLVER Lab · empathetic-dialogue RL with a simulated user")
        ctx.dialogue_link = gr.State(None)
        ctx.job_link, ctx.experiment_link = gr.State(None), gr.State(None)
        views = available_views()
        # the README's tour starts on TOUR_START_TAB; without that view, on the first tab
        ctx.first_tab = next((v[0] for v in views if v[0] == TOUR_START_TAB), views[0][0] if views else None)
        with gr.Tabs(selected=ctx.first_tab) as tabs:
            ctx.tabs = tabs
            for tab_id, label, module_name in views:
                with gr.Tab(label, id=tab_id, elem_id=f"tab-{tab_id}") as tab:
                    ctx.current_tab = tab
                    _build_view(module_name, ctx)
            ctx.current_tab = None
        for fn, inputs, outputs in ctx.load_hooks:
            demo.load(fn, inputs, outputs)
        for fn in ctx.unload_hooks:  # Gradio calls them when the page's heartbeat connection drops
            demo.unload(fn)
        _timers_follow_the_open_tab(ctx, {label: tab_id for tab_id, label, _ in views})

        def _from_query(request: gr.Request):
            dialogue = (request.query_params.get("dialogue") or "").strip() if request else ""
            return ctx.open_dialogue(int(dialogue)) if dialogue.isdigit() else (gr.update(), gr.update())

        demo.load(_from_query, outputs=ctx.link_outputs, **LINK_EVENT)
    return demo


def _timers_follow_the_open_tab(ctx: LabContext, tab_of_label: dict[str, str]) -> None:
    """Switch each view's `ctx.poll` timer on while its tab is open and off otherwise: on a tab click, and
    on the links that open a tab from another view (a dialogue, a job, an experiment)."""
    if not ctx.timers:
        return
    timers = [timer for _, timer in ctx.timers]

    def open_only(tab_id: Optional[str]) -> list:
        return [gr.Timer(active=owner == tab_id) for owner, _ in ctx.timers]

    def on_select(evt: gr.SelectData) -> list:
        return open_only(tab_of_label.get(evt.value))

    ctx.tabs.select(on_select, None, timers, queue=False, show_progress="hidden")
    for link, tab_id in ((ctx.dialogue_link, TRANSCRIPTS_TAB), (ctx.job_link, "training"),
                         (ctx.experiment_link, "experiments")):
        link.change(functools.partial(open_only, tab_id), None, timers, queue=False, show_progress="hidden")


class GuardedApp(App):
    """Gradio's App with app.trust.HostOriginGuard in front of its whole middleware stack: a request from
    another site or for another host name gets 403 before any of Gradio's code (its CORS included) sees it.
    Behind the guard, app.page_script.EarlyScript puts the frame-pacing script first in the page."""

    def __init__(self, hosts: Iterable[str] = (), behind_proxy: bool = False, **kwargs: Any):
        super().__init__(openapi_url=None, **kwargs)  # no FastAPI schema: nothing to describe before a login
        self.guard_hosts, self.behind_proxy = frozenset(hosts), behind_proxy

    def logged_in(self, cookies: dict[str, str]) -> bool:
        """True without a login, else whether the cookies hold one of Gradio's live login tokens."""
        if self.auth is None and self.auth_dependency is None:
            return True
        token = cookies.get(f"access-token-{self.cookie_id}") or cookies.get(f"access-token-unsecure-{self.cookie_id}")
        return bool(token) and token in self.tokens

    def build_middleware_stack(self) -> Any:
        inner = LoginGate(EarlyScript(super().build_middleware_stack()), self.logged_in)
        return HostOriginGuard(inner, self.guard_hosts, self.behind_proxy)


def page_answers(url: str, wait_s: float = 60.0) -> bool:
    """Whether the served page answers within `wait_s`: Gradio's own start-up check (networking.url_ok) gives up
    at its first 3 s time-out, which a loaded machine's first render can exceed, and then refuses to start."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if httpx.head(url, timeout=5).status_code in (200, 401, 301, 302, 303, 307, 308):
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def launch(demo: gr.Blocks, host: str = "127.0.0.1", port: int = 7860,
           auth: Optional[tuple[str, str]] = None, prevent_thread_lock: bool = False, quiet: bool = False,
           extra_hosts: Iterable[str] = (), behind_proxy: str = "", max_upload_mb: int = MAX_UPLOAD_MB):
    """Launch with the lab's settings: theme/css here (Gradio 6), no SSR, no outside connections, and only
    requests for loopback, `host` or `extra_hosts` (--allowed-host) from pages of those sites answered.
    `behind_proxy`: the addresses of the reverse proxies whose X-Forwarded-* headers are believed ('' none:
    uvicorn, which Gradio starts, then rewrites neither the client address nor the scheme)."""
    os.environ["FORWARDED_ALLOW_IPS"] = behind_proxy  # uvicorn reads it when Gradio makes its Config
    gradio_networking.url_ok = page_answers
    app = GuardedApp(allowed_hosts(host, extra_hosts), bool(behind_proxy), default_response_class=ORJSONResponse)
    return demo.launch(
        server_name=host, server_port=port, auth=auth, prevent_thread_lock=prevent_thread_lock, quiet=quiet,
        _app=app, max_file_size=f"{int(max_upload_mb)}mb",
        # show_error=False: an unexpected exception reaches the page as one word, its text and traceback only the
        # log; the lab's own messages (gr.Error) are shown as written
        theme=gr.themes.Soft(), css=CSS, ssr_mode=False, show_error=False, footer_links=["settings"],
        auth_message="RLVER Lab: log in with the user and password given to --auth or RLVER_LAB_AUTH." if auth else None,
    )
