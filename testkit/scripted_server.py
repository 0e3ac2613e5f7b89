"""A real OpenAI-compatible HTTP server on 127.0.0.1 with scripted answers, for tests and benchmarks.

POST /v1/chat/completions answers in the OpenAI wire format; GET /v1/models lists the model. It plays
both sides of a dialogue:
  * the simulator: a request is a simulator step when its messages contain the output sections the
    simulator prompts ask for -- "[Emotion change]" / "[情绪变化]" (emotion step), "[Plan]" / "[回复规划]"
    (reply step), "[Opening]" / "[开场白]" (opening). Emotion answers score the partner's reply found
    between the prompt's <<< >>> markers with a few transparent word rules and come in SAGE's bracketed
    format, with the format drift real models show (markdown, full-width colons, "5分"); reply answers
    follow the tier named in the prompt and say goodbye at S and F. Prompts in SAGE's own format (one user
    message asking for "Content: ... Change:" or "Thinking: ... Response:", as the `sage:DIR` pack sends)
    get answers in that format: the change scores the last message of the prompt's JSON history;
  * the social-cognition judge: its requests get JSON ratings, or the garbage, refusal or hang of
    `judge_mode` (testkit/scripted_judge.py);
  * the persona generator: its requests get JSON profiles, or the invalid, duplicate or leaking ones a
    `gen-mode:MODE` token asks for (testkit/scripted_persona_gen.py);
  * the policy: any other request gets a short assistant reply (with a <think> block when the system
    prompt mentions <think>).
Configurable: latency per call (fixed, or lognormal with a median and p99: testkit.server_latency), a
share of HTTP 429 answers carrying a Retry-After header (sent at once, before any latency, as a gateway
refuses), an API key check, a model allow-list and fault injection (HTTP 429 without Retry-After / 500,
hangs past the client timeout, malformed JSON bodies, wrong-format content) at a rate. Latencies, 429s and
faults each come from their own stream seeded by `seed`. The server keeps its own statistics: every delay
it drew (`latencies`) and the receive time and status of every request (`timeline`, time.monotonic()).

`python -m testkit.scripted_server [--port 8000] [--latency-median-s 0.8 --latency-p99-s 6]
[--rate-limit-share 0.05 --retry-after-s 2]` serves it until Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Sequence

from testkit import scripted_judge, scripted_persona_gen
from testkit.scripted_user import as_json, classify_request, emotion_text, reply_text, score_reply, tier_message
from testkit.server_latency import LatencyModel

FAULTS = ("429", "500", "timeout", "malformed", "wrong_format")
_POLICY = ["That sounds really hard. What happened next?", "I'm here and listening. How are you holding up?",
           "It makes sense that this weighs on you. Tell me more about it."]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # listen() backlog, read when binding: a rollout connects 32+ clients at once


STATS_KEPT = 100_000  # latencies and timeline entries kept (the most recent)


class ScriptedServer:
    judge_mode = "json"  # how the social-cognition judge's requests are answered (testkit.scripted_judge)

    def __init__(self, latency_s: float = 0.0, fault_rate: float = 0.0, seed: int = 0,
                 faults: Sequence[str] = FAULTS, hang_s: float = 30.0, api_key: Optional[str] = None,
                 models: Optional[Sequence[str]] = None, host: str = "127.0.0.1", port: int = 0,
                 context_tokens: Optional[int] = None, latency_median_s: Optional[float] = None,
                 latency_p99_s: Optional[float] = None, rate_limit_share: float = 0.0, retry_after_s: float = 1.0):
        """`latency_s`: a fixed delay per answered call, or with `latency_median_s` and `latency_p99_s` a
        lognormal one. `rate_limit_share`: the share of requests answered HTTP 429 with `Retry-After:
        retry_after_s` (fractions written as such). `context_tokens`: refuse a prompt longer than this
        (4 characters a token) with HTTP 400, worded as vLLM's OpenAI server words it."""
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(FAULTS)}")
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be in [0, 1], got {fault_rate}")
        if not 0.0 <= rate_limit_share <= 1.0:
            raise ValueError(f"rate_limit_share must be in [0, 1], got {rate_limit_share}")
        if not retry_after_s >= 0:
            raise ValueError(f"retry_after_s must be >= 0, got {retry_after_s}")
        self.latency = LatencyModel(latency_s, latency_median_s, latency_p99_s)
        self.fault_rate, self.faults, self.hang_s = fault_rate, tuple(faults), hang_s
        self.rate_limit_share, self.retry_after_s = rate_limit_share, retry_after_s
        self.api_key, self.models = api_key, list(models) if models else None
        self.context_tokens = context_tokens
        self._rng = random.Random(seed)
        self._latency_rng = random.Random(f"latency-{seed}")
        self._rate_limit_rng = random.Random(f"rate-limit-{seed}")
        self.latencies: deque[float] = deque(maxlen=STATS_KEPT)  # every delay drawn, in seconds
        self.timeline: deque[tuple[float, int]] = deque(maxlen=STATS_KEPT)  # (received, status) per request
        self.rate_limited = 0  # 429 answers with Retry-After sent
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.calls = 0
        self.roles: Counter = Counter()
        self.injected: Counter = Counter()
        self.in_flight = 0
        self.max_in_flight = 0  # most requests handled at the same time
        self.requests: list[dict] = []  # the most recent request bodies (up to 500)
        self.persona_writer = scripted_persona_gen.PersonaWriter()
        self.httpd = _HTTPServer((host, port), _make_handler(self))
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ScriptedServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="scripted-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------ request logic (runs in handler threads)
    def _draw(self) -> tuple[str, random.Random]:
        """The fault for this call ('' for none) and a Random for its wording, both from the seeded stream."""
        with self._lock:
            fault = self._rng.choice(self.faults) if self._rng.random() < self.fault_rate else ""
            if fault:
                self.injected[fault] += 1
            return fault, random.Random(self._rng.random())

    def answer(self, body: dict, authorization: Optional[str] = None) -> tuple[int, bytes, dict[str, str]]:
        """HTTP status, body and extra headers for a chat-completions request (`authorization`: the
        request's header)."""
        received = time.monotonic()
        status = 500
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests = self.requests[-499:] + [body]
        try:
            if self.api_key is not None and authorization != f"Bearer {self.api_key}":
                status = 401
                return 401, _error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), {}
            if self._draw_rate_limit():
                status = 429
                return 429, _error("Rate limit reached for requests", "rate_limit_error", "rate_limit_exceeded"), \
                    {"Retry-After": f"{self.retry_after_s:g}"}
            status, payload = self._answer(body)
            return status, payload, {}
        finally:
            with self._lock:
                self.in_flight -= 1
                self.timeline.append((received, status))

    def _draw_rate_limit(self) -> bool:
        if not self.rate_limit_share:
            return False
        with self._lock:
            hit = self._rate_limit_rng.random() < self.rate_limit_share
            self.rate_limited += hit
            return hit

    def _delay(self) -> None:
        """Sleep one delay of the latency model (a fixed zero sleeps not at all)."""
        with self._lock:
            delay = self.latency.draw(self._latency_rng)
            if delay or self.latency.median_s is not None:
                self.latencies.append(delay)
        if delay:
            time.sleep(delay)

    def _answer(self, body: dict) -> tuple[int, bytes]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, _error("'messages' must be a non-empty list", "invalid_request_error")
        model = str(body.get("model", ""))
        if self.models is not None and model not in self.models:
            return 404, _error(f"The model `{model}` does not exist", "invalid_request_error", "model_not_found")
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict)) // 4
        if self.context_tokens is not None and prompt_tokens > self.context_tokens:
            return 400, _error(f"This model's maximum context length is {self.context_tokens} tokens. However, "
                               f"you requested {prompt_tokens} tokens in the messages. Please reduce the length "
                               "of the messages.", "BadRequestError")
        fault, rng = self._draw()
        self._delay()
        if fault == "429":
            return 429, _error("Rate limit reached, retry later", "rate_limit_error")
        if fault == "500":
            return 500, _error("The server had an error while processing your request", "server_error")
        if fault == "timeout":
            self._stopping.wait(self.hang_s)
        if fault == "malformed":
            return 200, b'{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"index": 0, "mess'
        role = ("persona_gen" if scripted_persona_gen.is_generation_request(body, messages)
                else classify_request(messages))
        with self._lock:
            self.roles[role] += 1
        content = ("I would rather not answer in any format today." if fault == "wrong_format"
                   else self._content(role, messages, rng))
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and role.startswith("sage_") and not fault:
            content = as_json(content)  # as a server that constrains decoding to the schema would answer
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict))
        usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(content) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return 200, json.dumps({
            "id": f"chatcmpl-{self.calls}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage}, ensure_ascii=False).encode("utf-8")

    def _content(self, role: str, messages: list, rng: random.Random) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        zh = "[情绪变化]" in text or "[回复规划]" in text or "[开场白]" in text
        if role == "persona_gen":
            with self._lock:
                return self.persona_writer.answer(messages)
        if role == "judge":
            mode = scripted_judge.judge_mode(messages, self.judge_mode)
            if mode == "hang":
                self._stopping.wait(self.hang_s)
            return scripted_judge.judge_answer(messages, mode)
        if role == "emotion":
            found = re.findall(r"<<<\n?(.*?)\n?>>>", text, re.S)
            change = score_reply(found[-1] if found else "")
            return emotion_text(change, zh, rng)
        if role == "reply":
            m = re.search(r"(?:tier|等级)\s*([SABCF])", text)
            return reply_text(m.group(1) if m else "B", zh, rng)
        if role == "sage_emotion":
            start = text.rfind("[\n  {")
            try:
                last = json.loads(text[start:].strip())[-1]["content"] if start >= 0 else ""
            except (ValueError, IndexError, KeyError, TypeError):
                last = ""
            change = score_reply(last)
            return (f"Content:\n[对方的意思]\nTargetCompletion:\n[{'贴合' if change > 3 else '没有贴合'}]\n"
                    f"Activity:\n[我在琢磨对方的话。]\nAnalyse:\n[说不上来。]\nChange:\n{change:+d}")
        if role == "sage_reply":
            found = re.findall(r"Emotion-([SABCF])", text)
            t = found[-1] if found else "B"
            zh = bool(re.search(r"[\u4e00-\u9fff]", text[:300]))
            msg = tier_message(t, zh, rng)
            return f"Thinking:\n[tier {t}]\nOrigin:\n[{msg}]\nChange:\n[more casual]\nResponse:\n{msg}"
        if role == "opening":
            return "[开场白]\n最近有件事一直压在我心里……" if zh else "[Opening]\nHey. Got a minute? Something's been bugging me."
        reply = rng.choice(_POLICY)
        system = str(messages[0].get("content", "")) if isinstance(messages[0], dict) else ""
        return f"<think>They sound upset; acknowledge it and invite more.</think>{reply}" if "<think>" in system else reply


def _error(message: str, kind: str, code: Optional[str] = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def _make_handler(server: ScriptedServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, payload: bytes, headers: Optional[dict[str, str]] = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                names = server.models or ["scripted"]
                self._send(200, json.dumps({"object": "list", "data": [{"id": n, "object": "model"} for n in names]}).encode())
            else:
                self._send(404, _error(f"no route {self.path}", "invalid_request_error"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, _error(f"no route {self.path}", "invalid_request_error"))
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                return self._send(400, _error(f"request body is not JSON: {exc}", "invalid_request_error"))
            self._send(*server.answer(body if isinstance(body, dict) else {}, self.headers.get("Authorization")))

    return Handler


def start_server(latency_s: float = 0.0, fault_rate: float = 0.0, seed: int = 0, **kw: Any) -> ScriptedServer:
    """Start a ScriptedServer in a background thread; use `.base_url`, `.calls`, `.stop()` or `with`."""
    return ScriptedServer(latency_s=latency_s, fault_rate=fault_rate, seed=seed, **kw).start()


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testkit.scripted_server", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--latency-s", type=float, default=0.0, help="fixed delay per call")
    p.add_argument("--latency-median-s", type=float, default=None,
                   help="lognormal delay: median (with --latency-p99-s)")
    p.add_argument("--latency-p99-s", type=float, default=None, help="lognormal delay: 99th percentile")
    p.add_argument("--rate-limit-share", type=float, default=0.0, help="share of requests answered 429 + Retry-After")
    p.add_argument("--retry-after-s", type=float, default=1.0, help="the Retry-After of those 429s")
    p.add_argument("--fault-rate", type=float, default=0.0, help="share of calls given a fault of --fault")
    p.add_argument("--fault", action="append", choices=FAULTS, default=None, help="fault kinds (default: all)")
    p.add_argument("--api-key", default=None, help="require this key (default: any)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        server = ScriptedServer(latency_s=args.latency_s, latency_median_s=args.latency_median_s,
                                latency_p99_s=args.latency_p99_s, rate_limit_share=args.rate_limit_share,
                                retry_after_s=args.retry_after_s, fault_rate=args.fault_rate,
                                faults=args.fault or FAULTS, api_key=args.api_key, seed=args.seed,
                                host=args.host, port=args.port)
    except (ValueError, OSError) as e:
        p.error(str(e))
    print(f"scripted server at {server.base_url}; latency {server.latency.describe()}, "
          f"429 share {args.rate_limit_share:g} (Retry-After {args.retry_after_s:g}s); Ctrl-C stops", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
