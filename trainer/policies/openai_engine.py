"""An API model as the policy (for benchmarking API models): replies only, no token ids or logprobs.

Where the requests go and with which key is the caller's Access (`route`, simulator.endpoints): from the
command line the URL given (else OPENAI_BASE_URL) and OPENAI_API_KEY; from the web only an owner's endpoint
with its own key, no redirects followed. The key is never stored. The requests of one batch run concurrently on an event loop of their own, under the
endpoint's traffic control (simulator.llm.traffic: shared with a simulator on the same endpoint;
the `openai` client's own retries are off so retries are not doubled).
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import Any, Optional

import openai

from simulator.access import Access, current_access
from simulator.endpoints import DEFAULT_BASE_URL
from simulator.llm.client import BackendError
from simulator.llm.hashing import endpoint_host
from simulator.llm.openai_client import error_detail, openai_client
from simulator.llm.traffic import Traffic, TrafficLimits
from trainer.policies.base import Generation, PolicyEngine, SamplingConfig, check_messages



class OpenAIEngine(PolicyEngine):
    name = "openai"
    supports_token_ids = False

    def __init__(self, model: str, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout_s: float = 120.0, max_retries: int = 4, max_in_flight: int = 32,
                 requests_per_minute: int = 0, seed: int = 0, access: Optional[Access] = None):
        if not model:
            raise ValueError("openai policy needs a model name: openai:MODEL")
        self.model = model
        route = (access or current_access()).route("policy_base_url", base_url, api_key or None)
        self.base_url, self.route = route.url, route
        key = route.api_key
        if not key:
            if route.url == DEFAULT_BASE_URL:
                raise ValueError("openai policy: set OPENAI_API_KEY (or a base URL of a local server)")
            key = "unused"  # local OpenAI-compatible servers ignore the key
        self._key, self.timeout_s = key, timeout_s
        self.limits = TrafficLimits(max_in_flight=max_in_flight, requests_per_minute=requests_per_minute,
                                    max_retries=max_retries)
        problems = self.limits.errors("policy_")
        if problems:
            raise ValueError("openai policy: " + "; ".join(f"{k} {v}" for k, v in problems.items()))
        self.traffic = Traffic(self.base_url or DEFAULT_BASE_URL, self.limits, seed)
        self.model_ref = f"openai:{model}@{endpoint_host(self.base_url or DEFAULT_BASE_URL)}"

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> list[Generation]:
        raise NotImplementedError("the openai engine has no token access; call generate() with chat histories")

    def encode_chat(self, messages: list[dict]) -> list[int]:
        return []

    def generate(self, prompts: list[list[dict]], params: SamplingConfig,
                 seeds: Optional[list[int]] = None) -> list[Generation]:
        """One request per prompt, concurrently; `seeds` (one per prompt) go out as each request's seed."""
        params.validate()
        for p in prompts:
            check_messages(p)
        if not prompts:
            return []
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"seeds: {len(seeds)} seeds for {len(prompts)} prompts")
        each = [params if seeds is None else replace(params, seed=s) for s in (seeds or [None] * len(prompts))]
        return _run(self._generate(prompts, each))

    async def _generate(self, prompts: list[list[dict]], each: list[SamplingConfig]) -> list[Generation]:
        client = openai_client(self.route, self._key, self.timeout_s)
        try:
            return list(await asyncio.gather(*[self._one(client, p, q) for p, q in zip(prompts, each)]))
        finally:
            await client.close()

    async def _one(self, client: openai.AsyncOpenAI, messages: list[dict], params: SamplingConfig) -> Generation:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": params.temperature,
                                  "top_p": params.top_p}
        if params.max_new_tokens is not None:
            kwargs["max_tokens"] = params.max_new_tokens
        if params.seed is not None:
            kwargs["seed"] = params.seed
        try:
            resp, _ = await self.traffic.call(lambda: client.chat.completions.create(**kwargs), self._classify)
        except BackendError as exc:  # network / API errors become a failed generation, not a crash
            return Generation(text="", finish_reason="error", error=str(exc)[:500])
        choice = resp.choices[0]
        return Generation(text=choice.message.content or "", finish_reason=choice.finish_reason or "stop")

    def _classify(self, exc: Exception) -> BackendError:
        """Transient failures (429, 408, 5xx, timeouts, dropped connections) are retried; others are not."""
        where = f"policy endpoint {endpoint_host(self.base_url or DEFAULT_BASE_URL)} model {self.model!r}"
        if isinstance(exc, openai.APITimeoutError):
            return BackendError(f"{where} timed out after {self.timeout_s}s", "timeout", True)
        if isinstance(exc, openai.APIConnectionError):
            return BackendError(f"cannot connect to the {where} ({exc.__cause__ or exc})", "connection", True)
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            retry = code in (408, 429) or code >= 500
            return BackendError(f"{where} answered HTTP {code}: {type(exc).__name__}: {error_detail(exc, self.route)}",
                                "rate_limit" if code == 429 else "server" if retry else "rejected", retry)
        return BackendError(f"{where} failed: {type(exc).__name__}: {str(exc)[:200]}", "error", False)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.model_ref,
                "traffic": self.limits.config_values()}


def _run(coro: Any) -> Any:
    """Run a coroutine to the end from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            out["error"] = e

    t = threading.Thread(target=target, name="openai-policy")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]
