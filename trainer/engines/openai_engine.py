"""An API model as the policy (for benchmarking API models): replies only, no token ids or logprobs.

The key comes from OPENAI_API_KEY and is never stored; the base URL from the argument or
OPENAI_BASE_URL. Requests of one batch run concurrently on a small thread pool.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Optional
from urllib.parse import urlparse

from trainer.engines.base import Generation, PolicyEngine, SamplingConfig, check_messages


class OpenAIEngine(PolicyEngine):
    name = "openai"
    supports_token_ids = False

    def __init__(self, model: str, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout_s: float = 120.0, max_retries: int = 2, concurrency: int = 32):
        from openai import OpenAI

        if not model:
            raise ValueError("openai policy needs a model name: openai:MODEL")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not self.base_url:
                raise ValueError("openai policy: set OPENAI_API_KEY (or a base URL of a local server)")
            key = "unused"  # local OpenAI-compatible servers ignore the key
        self.client = OpenAI(api_key=key, base_url=self.base_url, timeout=timeout_s, max_retries=max_retries)
        self.concurrency = concurrency
        host = urlparse(self.base_url).netloc if self.base_url else "api.openai.com"
        self.model_ref = f"openai:{model}@{host}"

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
        if len(prompts) == 1:  # no pool for a single request (the async rollout sends them one by one)
            return [self._one(prompts[0], each[0])]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(pool.map(self._one, prompts, each))

    def _one(self, messages: list[dict], params: SamplingConfig) -> Generation:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": params.temperature,
                                  "top_p": params.top_p}
        if params.max_new_tokens is not None:
            kwargs["max_tokens"] = params.max_new_tokens
        if params.seed is not None:
            kwargs["seed"] = params.seed
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except Exception as exc:  # network / API errors become a failed generation, not a crash
            return Generation(text="", finish_reason="error", error=f"{type(exc).__name__}: {exc}"[:500])
        choice = resp.choices[0]
        return Generation(text=choice.message.content or "", finish_reason=choice.finish_reason or "stop")

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.model_ref}
