"""What an open page costs: a view's poll sends only what changed (app.context.changed_only) and slows down
when nothing it shows is live (LabContext.poll_pace); no event's loading status covers the page's tabs
(LINK_EVENT); the page's first script paces Gradio's leaked animation-frame loops (app.page_script)."""
import asyncio

import gradio as gr
import plotly.graph_objects as go

from app.context import IDLE_POLL_S, LabContext, changed_only
from app.page_script import EarlyScript


def figure(ys: list[float]) -> go.Figure:
    return go.Figure(go.Scatter(x=list(range(len(ys))), y=ys))


def test_first_poll_sends_everything_and_the_next_only_what_changed():
    rows, fig = [[1, "running", "step 2/5"]], figure([0.1, 0.2])
    updates, sent = changed_only([rows, fig, "**Now:** step 2"], None)
    assert updates[0] == rows and updates[1] is fig and updates[2] == "**Now:** step 2"
    assert len(sent) == 3 and all(isinstance(d, str) for d in sent)

    # the same values, built anew (a new list, a new figure of the same data): nothing is sent
    again, same = changed_only([[[1, "running", "step 2/5"]], figure([0.1, 0.2]), "**Now:** step 2"], sent)
    assert again == [gr.skip()] * 3 and same == sent

    # only the progress line moved: the table and the plot are not redrawn
    moved, after = changed_only([[[1, "running", "step 2/5"]], figure([0.1, 0.2]), "**Now:** step 3"], sent)
    assert moved[:2] == [gr.skip(), gr.skip()] and moved[2] == "**Now:** step 3"
    assert after[:2] == sent[:2] and after[2] != sent[2]

    # a new point on the curve is sent
    grown, _ = changed_only([rows, figure([0.1, 0.2, 0.3]), "**Now:** step 3"], after)
    assert isinstance(grown[1], go.Figure) and grown[0] == gr.skip()


def test_a_reset_state_or_a_skipped_value_keeps_the_page_right():
    rows = [[1, "succeeded"]]
    _, sent = changed_only([rows, "done"], None)
    # another handler wrote the same outputs and reset the State: the next poll sends everything again
    assert changed_only([rows, "done"], None)[0] == [rows, "done"]
    # a handler's own gr.skip() keeps the digest of what the page still shows
    updates, kept = changed_only([gr.skip(), "done"], sent)
    assert updates == [gr.skip(), gr.skip()] and kept == sent
    # a State from a poll with other outputs (the view changed) is not trusted
    assert changed_only([rows, "done", "more"], sent)[0] == [rows, "done", "more"]


def test_the_pace_is_the_views_period_while_live_and_idle_otherwise():
    live, idle = LabContext.poll_pace(True, 2.0), LabContext.poll_pace(False, 2.0)
    assert live["value"] == 2.0 and idle["value"] == IDLE_POLL_S > 2.0
    _, sent = changed_only([idle], None)
    assert changed_only([LabContext.poll_pace(False, 2.0)], sent)[0] == [gr.skip()]  # sent once per change
    assert changed_only([live], sent)[0] == [live]


def test_no_event_shows_its_progress_on_a_large_part_of_the_page(tmp_path):
    """Gradio snapshots every component an event's progress ever covered, children included, on each later event:
    a link's Tabs output made that the whole page on every poll tick."""
    from app.lab import build_app, startup
    from storage import make_store

    store = make_store(f"sqlite:///{tmp_path / 'lab.db'}")
    try:
        startup(store)
        ctx = LabContext(store=store)
        config = build_app(ctx).get_config_file()
    finally:
        store.dispose()
    size: dict[int, int] = {}

    def count(node: dict) -> int:
        size[node["id"]] = 1 + sum(count(child) for child in node.get("children", []))
        return size[node["id"]]

    count(config["layout"])
    assert size[ctx.tabs._id] > 500  # the page: every view is inside the Tabs
    links = [dep for dep in config["dependencies"] if ctx.tabs._id in dep["outputs"]]
    assert len(links) >= 6  # ?dialogue=, and the links from Live rollout, Runs, Benchmark, Training, Experiments
    covered = {dep["id"]: [target for target in (dep["outputs"] if dep["show_progress_on"] is None
                                                 else dep["show_progress_on"]) if size.get(target, 1) > 10]
               for dep in config["dependencies"]}
    assert not any(covered.values()), {k: v for k, v in covered.items() if v}


async def _serve(app, path: str = "/") -> tuple[dict, bytes]:
    """Run one GET through an ASGI app; return (the response's start message, its whole body)."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": "GET", "path": path, "headers": []}, receive, send)
    return sent[0], b"".join(m.get("body", b"") for m in sent[1:])


def _responder(content_type: bytes, parts: list[bytes], extra: tuple = ()):
    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type),
                                (b"content-length", str(sum(map(len, parts))).encode()), *extra]})
        for i, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < len(parts) - 1})
    return app


def test_the_page_gets_the_script_first_and_nothing_else_is_touched():
    page = [b"<!doctype html><html><head><meta charset='utf-8'>", b"<script type=module src=x.js></script></head>",
            b"<body><head>not this one</head></body></html>"]
    start, body = asyncio.run(_serve(EarlyScript(_responder(b"text/html; charset=utf-8", page), "window.first = 1;")))
    assert body.startswith(b"<!doctype html><html><head><script>window.first = 1;</script><meta charset='utf-8'>")
    assert body.count(b"window.first") == 1 and body.endswith(b"<head>not this one</head></body></html>")
    assert dict(start["headers"])[b"content-length"] == str(len(body)).encode()
    assert [k for k, _ in start["headers"]].count(b"content-length") == 1

    for content_type, extra in ((b"application/json", ()), (b"text/html", ((b"content-encoding", b"gzip"),))):
        parts = [b'{"a": "<head>"}']
        start, body = asyncio.run(_serve(EarlyScript(_responder(content_type, parts, extra), "window.first = 1;")))
        assert body == parts[0] and dict(start["headers"])[b"content-length"] == str(len(parts[0])).encode()
