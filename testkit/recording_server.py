"""A real HTTP listener on 127.0.0.1 that records every request it gets (method, path, headers, body) and
answers like an OpenAI-compatible endpoint: a chat completion with a fixed reply, or, with `redirect_to`,
an HTTP 307 to another URL. Security tests point the lab at it to see exactly what leaves the lab: which
URL was called and which key came with it."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

REPLY = "I hear you. What happened next?"


class RecordingServer:
    def __init__(self, redirect_to: Optional[str] = None, reply: str = REPLY):
        self.redirect_to, self.reply = redirect_to, reply
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
