"""What a hostile visitor uses against a served lab, for the security tests: every event of the app called
over its own HTTP API as a page would call it, the list read from the app's /config (its components and
dependencies), so a test covers every view and every handler, including ones added later, instead of a
hand-picked few (`sweep`, inputs chosen by the component's kind and label); and `RecordingServer`, a real
listener on 127.0.0.1 that records every request it gets and answers like an OpenAI-compatible endpoint (a
chat completion, with `redirect_to` an HTTP 307 elsewhere, with `status` an error), to see exactly what leaves the lab: which
URL was called and which key came with it."""
from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

import httpx

Chooser = Callable[[dict[str, Any]], Any]


def read_config(base: str, client: Optional[httpx.Client] = None) -> dict[str, Any]:
    return (client or httpx).get(base.rstrip("/") + "/config", timeout=60).json()


def label(component: dict[str, Any]) -> str:
    return str((component.get("props") or {}).get("label") or "").lower()


def default_value(component: dict[str, Any]) -> Any:
    """What the page holds in the component before anyone types (None for states and files)."""
    if component["type"] in ("state", "file"):
        return None
    return (component.get("props") or {}).get("value")


def call(base: str, dependency: dict[str, Any], data: list[Any], client: httpx.Client,
         timeout: float = 120.0, session: Optional[str] = None) -> dict[str, Any]:
    """Run one dependency through the queue (as the page does) and return its last message: `output` on
    success, `success: False` and a `title`/`output.error` when it failed. `session`: the page's session
    (a new one when None); the choices a load event gave a dropdown hold for its session only."""
    base, session = base.rstrip("/"), session or uuid.uuid4().hex[:12]
    trigger = dependency["targets"][0][0] if dependency.get("targets") else None
    joined = client.post(base + "/gradio_api/queue/join", timeout=timeout,
                         json={"data": data, "fn_index": dependency["id"], "trigger_id": trigger,
                               "session_hash": session, "event_data": None})
    if joined.status_code != 200:
        return {"msg": "refused", "status": joined.status_code, "text": joined.text[:500]}
    last: dict[str, Any] = {}
    with client.stream("GET", base + "/gradio_api/queue/data", params={"session_hash": session},
                       timeout=timeout) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            last = json.loads(line[5:])
            if last.get("msg") in ("process_completed", "close_stream", "unexpected_error"):
                break
    return last


def sweep(base: str, choose: Chooser, client: httpx.Client, skip: Callable[[dict[str, Any]], bool] = lambda d: False
          ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Call every dependency of the app once, each input filled by `choose(component)`; [(dependency, last
    message)]."""
    config = read_config(base, client)
    components = {c["id"]: c for c in config["components"]}
    answers = []
    for dependency in config["dependencies"]:
        if not dependency.get("backend_fn") or skip(dependency):
            continue
        data = [choose(components[i]) if i in components else None for i in dependency["inputs"]]
        answers.append((dependency, call(base, dependency, data, client)))
    return answers


# ------------------------------------------------------------------------------ a listener standing in for an endpoint
REPLY = "I hear you. What happened next?"


class RecordingServer:
    def __init__(self, redirect_to: Optional[str] = None, reply: str = REPLY, status: int = 200,
                 error: str = "invalid api key"):
        """`status` other than 200: every request is answered so, with OpenAI's error body holding `error`."""
        self.redirect_to, self.reply, self.status, self.error = redirect_to, reply, status, error
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _record(self, body: bytes) -> None:
                with server._lock:
                    server.requests.append({"method": self.command, "path": self.path, "body": body.decode("latin-1"),
                                            "headers": {k.lower(): v for k, v in self.headers.items()}})

            def do_GET(self) -> None:
                self._record(b"")
                self._answer()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._record(self.rfile.read(length) if length else b"")
                self._answer()

            def _answer(self) -> None:
                if server.redirect_to:
                    self.send_response(307)
                    self.send_header("Location", server.redirect_to + self.path.split("/v1", 1)[-1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if server.status != 200:
                    body = json.dumps({"error": {"message": server.error, "type": "invalid_request_error"}}).encode()
                    self.send_response(server.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                body = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                                   "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                                              "message": {"role": "assistant",
                                                                          "content": server.reply}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def everything(self) -> str:
        """Every recorded request as one text (to look for a secret anywhere in it)."""
        with self._lock:
            return json.dumps(self.requests)

    def __enter__(self) -> "RecordingServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
