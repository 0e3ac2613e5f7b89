"""A script the lab's page runs before any of Gradio's: `FRAME_PACING`, put at the top of every HTML page's <head>
by the `EarlyScript` ASGI middleware (app.lab.GuardedApp installs it).

Why: Gradio 6.31's StatusTracker refreshes its elapsed-time label from a requestAnimationFrame loop while its
status is pending, and a tracker unmounted while pending never stops that loop. The page's own loading screen
always is, and so is a view's tracker whose tab is closed during a tick: an idle lab page drew 60 frames a second
for nothing, ~2.5 s of Chromium CPU in every 30 s (a tenth of a core, in every open tab). The script paces the
calls whose caller is in that module with a 250 ms timer: a live label still moves four times a second, a leaked
loop costs a timer tick and no frame, and every other caller (plots, transitions) keeps its frames.

It has to run first because the module keeps its own reference to requestAnimationFrame when it loads, and
Gradio adds a `head=` script to the page only after its modules have loaded.
"""
from __future__ import annotations

from typing import Any

FRAME_PACING = """(() => {
  const frame = window.requestAnimationFrame.bind(window), cancel = window.cancelAnimationFrame.bind(window);
  const paced = new Map();
  let next = 0;
  window.requestAnimationFrame = (callback) => {
    const caller = (new Error().stack || "").split("\\n")[2] || "";
    if (!caller.includes("/statustracker-")) return frame(callback);
    const id = -(++next);
    paced.set(id, setTimeout(() => { paced.delete(id); callback(performance.now()); }, 250));
    return id;
  };
  window.cancelAnimationFrame = (id) => {
    if (id < 0) { clearTimeout(paced.get(id)); paced.delete(id); } else cancel(id);
  };
})();"""


class EarlyScript:
    """ASGI middleware: an HTML response gets `<script>SCRIPT</script>` right after its first `<head>`; every
    other response (JSON, files, event streams) passes through untouched."""

    def __init__(self, app: Any, script: str = FRAME_PACING):
        self.app = app
        self.tag = f"<script>{script}</script>".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start: dict[str, Any] = {}
        body: list[bytes] = []

        async def send_with_script(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or ())
                if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                    start.update(message)  # held until the whole body is here
                    return
            elif message["type"] == "http.response.body" and start:
                body.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                page = b"".join(body).replace(b"<head>", b"<head>" + self.tag, 1)
                headers = [(k, v) for k, v in start.get("headers") or () if k != b"content-length"]
                await send({**start, "headers": headers + [(b"content-length", str(len(page)).encode())]})
                message = {"type": "http.response.body", "body": page}
            await send(message)

        return await self.app(scope, receive, send_with_script)
