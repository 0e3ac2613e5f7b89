"""Policy turns sampled as they become ready (the rollout's "async" schedule), and the one-call batch that
both schedules use.

- `BatchScheduler` (engines with token ids: transformers, vLLM): ready requests wait until none has
  arrived for `gather_s` (a burst of answers is processed one after another, a few ms each), at most
  `GATHER_CAP` x `gather_s` after the oldest, or until `max_batch` wait; then they go to the engine as
  one batch. One batch runs at a time (one model); requests that arrive meanwhile form the next one.
  vLLM goes through this same scheduler, not vLLM's AsyncLLM: the lab's vLLM engine is the in-process
  `vllm.LLM` whose weights training pushes in place, and a second, async engine would hold a second copy.
- `ConcurrentRequests` (chat engines: openai, replay): every request is its own call, `max_batch` at most
  in flight.
Each request carries its own seed (PolicyEngine's `seeds`), so what it samples does not depend on which
requests shared its batch (see trainer/policies/base.py for where float rounding still can).
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Union

from trainer.policies.base import Generation, PolicyEngine, SamplingConfig

GATHER_CAP = 10  # the oldest waiting request goes out at most this many gather windows after it arrived


@dataclass
class PolicyRequest:
    """One policy turn to sample."""

    prompt: Union[list[int], list[dict]]  # token ids (engines with token ids) or the chat history
    max_new_tokens: Optional[int]  # this dialogue's cap (its batch may sample further; cut to this)
    seed: int
    key: str = ""  # whose turn it is (the rollout's dialogue key): handed to the engine's token_listener


@dataclass
class PolicyResult:
    generation: Generation
    latency_s: float  # the reply's share of policy time: its batch's wall time / the batch's size
    stopped: bool  # Stop was pressed before the batch returned: the reply may be cut short, not to be used


def sample_batch(engine: PolicyEngine, requests: list[PolicyRequest], temperature: float,
                 top_p: float) -> list[PolicyResult]:
    """One engine call for `requests` (blocking); each reply cut to its own max_new_tokens."""
    caps = [r.max_new_tokens for r in requests]
    params = SamplingConfig(temperature, top_p, None if None in caps else max(caps))
    seeds = [r.seed for r in requests]
    t0 = time.monotonic()
    engine.batch_keys = [r.key for r in requests]
    if engine.supports_token_ids:
        gens = engine.generate_ids([r.prompt for r in requests], params, seeds)
    else:
        gens = engine.generate([r.prompt for r in requests], params, seeds)
    latency = (time.monotonic() - t0) / len(requests)
    stopped = engine.stop_event is not None and engine.stop_event.is_set()
    return [PolicyResult(_clip(engine, g, r.max_new_tokens), latency, stopped) for r, g in zip(requests, gens)]


def _clip(engine: PolicyEngine, g: Generation, budget: Optional[int]) -> Generation:
    """Cut a generation to its dialogue's token budget (the batch may have sampled further)."""
    if budget is None or len(g.token_ids) <= budget:
        return g
    ids = g.token_ids[:budget]
    return Generation(text=engine.decode(ids), token_ids=ids, logprobs=g.logprobs[:budget],
                      prompt_ids=g.prompt_ids, finish_reason="length",
                      policy_version=g.policy_version)


class BatchScheduler:
    """Gathers ready requests into batches for an engine with token ids; see the module docstring."""

    def __init__(self, engine: PolicyEngine, temperature: float, top_p: float, max_batch: int = 32,
                 gather_s: float = 0.005):
        self.policy_engine, self.temperature, self.top_p = engine, temperature, top_p
        self.max_batch, self.gather_s = max_batch, gather_s
        self._waiting: list[tuple[PolicyRequest, asyncio.Future, float]] = []
        self._arrived = asyncio.Event()
        self._closing = False
        self._worker: Optional[asyncio.Task] = None

    async def generate(self, request: PolicyRequest) -> PolicyResult:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting.append((request, future, loop.time()))
        self._arrived.set()
        if self._worker is None:
            self._worker = asyncio.ensure_future(self._serve())
        return await future

    async def close(self) -> None:
        """Wait for the batch in flight (its thread holds the model), then stop."""
        self._closing = True
        self._arrived.set()
        if self._worker is not None:
            await asyncio.shield(self._worker)

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._waiting:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            while not self._closing and len(self._waiting) < self.max_batch:
                oldest, newest = self._waiting[0][2], self._waiting[-1][2]
                left = min(newest + self.gather_s, oldest + GATHER_CAP * self.gather_s) - loop.time()
                if left <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
            batch = [w for w in self._waiting[:self.max_batch] if not w[1].done()]  # done: its dialogue stopped
            self._waiting = self._waiting[self.max_batch:]
            if not batch:
                continue
            try:
                results = await asyncio.to_thread(sample_batch, self.policy_engine, [r for r, _, _ in batch],
                                                  self.temperature, self.top_p)
            except Exception as exc:  # the engine failed for the whole batch: each request gets the error
                for _, future, _ in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future, _), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)


class ConcurrentRequests:
    """One call per request for a chat engine (no token ids), `max_batch` at most at once."""

    def __init__(self, engine: PolicyEngine, temperature: float, top_p: float, max_batch: int = 32):
        self.policy_engine, self.temperature, self.top_p = engine, temperature, top_p
        self._pool = ThreadPoolExecutor(max_workers=max_batch, thread_name_prefix="policy")

    async def generate(self, request: PolicyRequest) -> PolicyResult:
        loop = asyncio.get_running_loop()
        [result] = await loop.run_in_executor(self._pool, sample_batch, self.policy_engine, [request],
                                              self.temperature, self.top_p)
        return result

    async def close(self) -> None:
        """Wait for the requests in flight."""
        await asyncio.to_thread(self._pool.shutdown, True)
