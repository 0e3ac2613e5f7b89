"""The `openai` backend: any OpenAI-compatible chat endpoint (OpenAI, DeepSeek, vLLM, ...) through the
official async client.

Traffic control (simulator.llm.traffic, shared per endpoint with any other caller in the process):
a limit of requests in flight and per minute; retries with Retry-After or exponential backoff and seeded
jitter on 429, 5xx, timeouts, dropped connections and unreadable bodies (bounded by max_retries; the
`openai` client's own retries are off); no retry on a wrong key (401/403), an unknown model (404) or a
rejected request (400/422), which fail at once with a message that says so. Where the requests go and with
which key is the caller's Access (`route`, simulator.endpoints): the command line's URL and key (else
OPENAI_BASE_URL / OPENAI_API_KEY); for a web caller only an owner's endpoint with its own key, no redirects
followed. The key is never logged or stored.
"""
from __future__ import annotations

import asyncio
import json
import re
import time
import weakref
from typing import Any, Optional

import openai
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from simulator.access import Access, current_access
from simulator.endpoints import DEFAULT_BASE_URL, Route
from simulator.llm.client import BackendError, ChatBackend, Completion
from simulator.llm.hashing import endpoint_host
from simulator.llm.traffic import Traffic, TrafficLimits



class OpenAIBackend(ChatBackend):
    name = "openai"

    def __init__(self, model: str, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 temperature: float = 0.7, top_p: float = 1.0, max_tokens: int = 1024, timeout: float = 60.0,
                 max_retries: int = 4, max_in_flight: int = 32, requests_per_minute: int = 0, backoff_s: float = 0.5,
                 max_backoff_s: float = 20.0, seed: int = 0, access: Optional[Access] = None):
        """`max_in_flight` and `requests_per_minute` hold for the endpoint (base URL) across the process;
        `seed` seeds the backoff jitter. None of the limits is in the fingerprint: they change when answers
        come, not what they say. `base_url` is an endpoint name or URL, resolved by `access` (default: this
        process's caller): AccessError when the caller may not call it."""
        if not model:
            raise ValueError("openai backend: model is required (spec 'openai:MODEL')")
        limits = TrafficLimits(max_in_flight=max_in_flight, requests_per_minute=requests_per_minute,
                               max_retries=max_retries, backoff_s=backoff_s, max_backoff_s=max_backoff_s)
        problems = limits.errors()
        if problems:
            raise ValueError("openai backend: " + "; ".join(f"{k} {v}" for k, v in problems.items()))
        self.model = model
        route = (access or current_access()).route("base_url", base_url, api_key)
        self.base_url, self.route = route.url, route
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.timeout, self.limits = timeout, limits
        self.traffic = Traffic(self.base_url, limits, seed)
        # one client per event loop (an httpx client must not cross loops)
        self._per_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI]" = \
            weakref.WeakKeyDictionary()

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "endpoint": endpoint_host(self.base_url),
                "sampling": {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}}

    def _client(self) -> AsyncOpenAI:
        """The running event loop's client; max_retries=0: the retries are Traffic's."""
        loop = asyncio.get_running_loop()
        client = self._per_loop.get(loop)
        if client is None:
            client = self._per_loop[loop] = openai_client(self.route, self.route.api_key or "EMPTY", self.timeout)
        return client

    async def aclose(self) -> None:
        """Close the running loop's HTTP client (optional; it is also dropped with its loop)."""
        client = self._per_loop.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def complete(self, messages: list[dict[str, str]], response_format: Optional[dict] = None) -> Completion:
        """One chat completion; `response_format` (an OpenAI json_schema format) is sent when given."""
        client = self._client()
        start = time.perf_counter()
        # POST /chat/completions through the client's own request path (auth, timeout, errors as openai
        # exceptions) with the raw body: chat.completions.create would walk every message through the SDK's
        # TypedDict transform and build pydantic objects for one string, about a third of the client's CPU
        # per call, and one event loop makes dozens of calls at once.
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "top_p": self.top_p, "max_tokens": self.max_tokens}
        if response_format is not None:
            body["response_format"] = response_format

        async def request() -> tuple[str, Any]:
            resp = json.loads(await client.post("/chat/completions", cast_to=bytes, body=body))
            return _content(resp), resp.get("usage")

        (text, usage), attempts = await self.traffic.call(request, self._classify)
        n_tokens = int(usage.get("total_tokens") or 0) if isinstance(usage, dict) else 0
        return Completion(text=text, latency_s=time.perf_counter() - start, n_tokens=n_tokens, attempts=attempts)

    def _classify(self, exc: Exception) -> BackendError:
        where = f"{endpoint_host(self.base_url)} model {self.model!r}"
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, openai.APITimeoutError):
            return BackendError(f"simulator call to {where} timed out after {self.timeout}s", "timeout", True)
        if isinstance(exc, openai.APIConnectionError):
            return BackendError(f"cannot connect to the simulator endpoint {self.base_url} "
                                f"({exc.__cause__ or exc})", "connection", True)
        if isinstance(exc, openai.AuthenticationError) or isinstance(exc, openai.PermissionDeniedError):
            return BackendError(f"the simulator endpoint {endpoint_host(self.base_url)} rejected the API key "
                                f"(HTTP {exc.status_code}); set OPENAI_API_KEY", "auth", False)
        if isinstance(exc, openai.NotFoundError):
            return BackendError(f"the simulator endpoint {endpoint_host(self.base_url)} does not know model "
                                f"{self.model!r} (HTTP 404): {error_detail(exc, self.route)}", "model", False)
        if isinstance(exc, openai.RateLimitError):
            return BackendError(f"simulator endpoint {where} is rate limiting (HTTP 429)", "rate_limit", True)
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            overflow = _CONTEXT_OVERFLOW.search(error_detail(exc, self.route))
            if code == 400 and overflow:
                limit = overflow.group("limit")
                return BackendError(f"the simulator prompt does not fit the context of {where}"
                                    + (f" (its limit is {limit} tokens)" if limit else "") + f": {error_detail(exc, self.route)}",
                                    "context", False)
            if code >= 500 or code == 408:
                return BackendError(f"simulator endpoint {where} failed with HTTP {code}", "server", True)
            return BackendError(f"simulator endpoint {where} rejected the request (HTTP {code}): {error_detail(exc, self.route)}",
                                "rejected", False)
        if isinstance(exc, (openai.APIResponseValidationError, ValueError, KeyError, TypeError, AttributeError)):
            return BackendError(f"simulator endpoint {where} sent an unreadable response "
                                f"({type(exc).__name__}: {str(exc)[:200]})", "malformed", True)
        return BackendError(f"simulator call to {where} failed: {type(exc).__name__}: {str(exc)[:200]}",
                            "error", False)


_CONTEXT_OVERFLOW = re.compile(r"maximum context length(?: is (?P<limit>\d+))?|context length|max_model_len|"
                               r"prompt is too long|too many tokens", re.I)


def _content(resp: Any) -> str:
    """The message text of a chat completion body; a body without choices counts as unreadable."""
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise ValueError("response has no choices (not a chat completion body)")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ValueError("response message has no content")
    return content


def openai_client(route: Route, api_key: str, timeout: float) -> AsyncOpenAI:
    """The client for `route`, its retries off (Traffic's), redirects followed only where the route says. The
    URL and key are always given; for a URL a web caller typed (`route.owners` False) the library's own
    reading of the environment is undone too: it takes the organisation, project and webhook secret from
    OPENAI_ORG_ID, OPENAI_PROJECT_ID and OPENAI_WEBHOOK_SECRET when none is given, and would send the first
    two as headers to the visitor's URL."""
    no_redirects = {} if route.follow_redirects else {"http_client": DefaultAsyncHttpxClient(follow_redirects=False)}
    if not route.owners:  # no proxy or certificate setting from the environment, and only the request's headers
        no_redirects = {"http_client": DefaultAsyncHttpxClient(follow_redirects=False, trust_env=False,
                                                               event_hooks={"request": [_only_visitor_headers]})}
    client = AsyncOpenAI(api_key=api_key, base_url=route.url, timeout=timeout, max_retries=0, **no_redirects)
    if not route.owners:
        client.organization = client.project = client.webhook_secret = None
    return client


# what a request to a URL a web caller typed carries: the request itself, nothing the library adds from the
# environment (OPENAI_CUSTOM_HEADERS, the organisation ...) or about this machine (its platform headers)
VISITOR_HEADERS = frozenset({"host", "accept", "accept-encoding", "content-type", "content-length", "connection"})


async def _only_visitor_headers(request: Any) -> None:
    for name in [n for n in request.headers if n.lower() not in VISITOR_HEADERS]:
        del request.headers[name]


def error_detail(exc: Exception, route: Route) -> str:
    """What an endpoint said about a failed request, for messages: only for the owner's endpoints (the text a
    visitor's URL sends back is the visitor's to put on the lab's page, so it is not shown)."""
    if not route.owners:
        return "its answer is not shown for a URL typed in the page"
    return _detail(exc)


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc)[:300]
