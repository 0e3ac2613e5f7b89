"""Traffic control for OpenAI-compatible endpoints, shared by the simulator backend and the API policy.

One `EndpointLimiter` per endpoint (base URL) in the process holds:
  * a limit of requests in flight: callers queue first come, first served (asyncio tasks of any event loop);
  * a limit of requests per minute, as evenly spaced starts: at R a minute a request starts at least 60/R s
    after the one before, so no 60-second window holds more than R starts (and nothing bursts);
  * a pause after a 429 or 503 whose Retry-After asks for one: no request to the endpoint starts before it.
Two callers of one endpoint built with different limits share it under the stricter of each.

`Traffic(base_url, limits, seed).call(request, classify)` sends one request under those limits and retries
what `classify` marks retryable (429, 408, 5xx, dropped connections, unreadable bodies) up to `max_retries`
times: after Retry-After when the server sent one (seconds or an HTTP date; `retry-after-ms` too), else after
`min(max_backoff_s, backoff_s * 2**(retry-1))` times a jitter in [0.5, 1.5) from a Random seeded with
`seed`. The `openai` client's own retries must be off (max_retries=0) under it, or retries multiply.

An endpoint whose last STOP_AFTER requests in a row failed for want of a key or a connection (401, 403, a
refused or dropped connection) is not called for STOP_FOR_S: every call to it, and every one queued for it,
fails at once with EndpointStopped naming the cause, so a run on a wrong key or a dead server ends within a
few requests instead of sending each of its calls (and their retries). A success clears the count; after
the pause one request goes out again, and one more such failure stops the endpoint again.

`snapshot()` counts per endpoint: in flight, waiting (queued on a limit or a pause, or backing off), sent,
retried, 429s, gave up. A job process writes it into its folder (`write_snapshot`) and the views read it from there.
None of this changes what a simulator or policy answers, so none of it is in the simulator fingerprint.
"""
from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, TypeVar

from simulator.llm.client import BackendError
from simulator.llm.hashing import endpoint_host

T = TypeVar("T")
TRAFFIC_FILE = "traffic.json"  # the snapshot in a job's folder
PAUSE_STATUSES = (429, 503)  # statuses whose Retry-After pauses the whole endpoint
CONFIG_FIELDS = ("max_in_flight", "requests_per_minute", "max_retries")  # the limits a run's config sets
STOP_AFTER = 3  # auth or connection failures in a row after which an endpoint is not called for a while
STOP_FOR_S = 60.0
STOPPING_STATUSES = (401, 403)
STOPPING_REASONS = ("auth", "connection")


class EndpointStopped(BackendError):
    """A call not made: the endpoint's last requests failed for want of a key or a connection (see above)."""


@dataclass(frozen=True)
class TrafficLimits:
    max_in_flight: int = 32  # requests sent and not yet answered, per endpoint
    requests_per_minute: int = 0  # per endpoint; 0 = no limit
    max_retries: int = 4  # retries of one call after its first attempt
    backoff_s: float = 0.5  # first backoff (doubles each retry)
    max_backoff_s: float = 20.0
    max_retry_after_s: float = 600.0  # a longer Retry-After fails the call at once, saying so

    @classmethod
    def from_config(cls, config: Any, prefix: str) -> "TrafficLimits":
        """The limits a run config sets as prefixed fields (`simulator_max_in_flight`, ...)."""
        return cls(**{name: getattr(config, prefix + name) for name in CONFIG_FIELDS})

    def config_values(self) -> dict[str, int]:
        """The limits a config sets, by their own names (also the openai backend's and engine's keywords)."""
        return {name: getattr(self, name) for name in CONFIG_FIELDS}

    def errors(self, prefix: str = "") -> dict[str, str]:
        """{prefix + field: problem} for every invalid limit (empty when valid)."""
        e: dict[str, str] = {}
        for name, low, note in (("max_in_flight", 1, ""), ("requests_per_minute", 0, " (0 = no limit)"),
                                ("max_retries", 0, "")):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                e[prefix + name] = f"must be an integer >= {low}{note}, got {v!r}"
        for name in ("backoff_s", "max_backoff_s", "max_retry_after_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                e[prefix + name] = f"must be a number >= 0, got {v!r}"
        return e


@dataclass
class TrafficCounters:
    in_flight: int = 0  # sent, not yet answered
    waiting: int = 0  # queued on the in-flight limit, the rate limit or a Retry-After pause, or backing off
    sent: int = 0  # attempts sent
    retried: int = 0  # attempts that were retries
    rate_limited: int = 0  # HTTP 429 answers seen
    gave_up: int = 0  # calls that failed after their last retry


class _Waiter:
    __slots__ = ("loop", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.future = loop, loop.create_future()


def _grant(future: asyncio.Future) -> None:
    if not future.done():  # a waiter cancelled meanwhile gives its slot back itself
        future.set_result(None)


class EndpointLimiter:
    """The limits and counters of one endpoint; safe to share between threads and event loops."""

    def __init__(self, endpoint: str, max_in_flight: int, requests_per_minute: int = 0):
        self.endpoint = endpoint
        self.max_in_flight, self.requests_per_minute = max_in_flight, requests_per_minute
        self.counters = TrafficCounters()
        self._lock = threading.Lock()
        self._slots_used = 0  # slots held: waiting for the start time or in flight
        self._waiters: deque[_Waiter] = deque()
        self._next_start = 0.0  # time.monotonic() before which no further request may start (rate limit)
        self._paused_until = 0.0  # time.monotonic() of the end of a Retry-After pause
        self._failures_in_row = 0  # auth or connection failures since the last success
        self._stopped: Optional[tuple[float, str, str]] = None  # (until, message, reason) once STOP_AFTER is hit

    def stopped(self) -> Optional[EndpointStopped]:
        """The error a call gets while the endpoint is stopped; None when it may be called."""
        with self._lock:
            if self._stopped is None or time.monotonic() >= self._stopped[0]:
                return None
            return EndpointStopped(self._stopped[1], self._stopped[2])

    def outcome(self, error: Optional[BackendError], status: Optional[int]) -> None:
        """Note how a request ended: a success clears the count of auth or connection failures in a row, such a
        failure adds one (at STOP_AFTER the endpoint stops for STOP_FOR_S), any other failure changes nothing."""
        with self._lock:
            if error is None:
                self._failures_in_row, self._stopped = 0, None
                return
            if status not in STOPPING_STATUSES and error.reason not in STOPPING_REASONS:
                return
            self._failures_in_row += 1
            if self._failures_in_row >= STOP_AFTER:
                self._stopped = (time.monotonic() + STOP_FOR_S,
                                 f"{error} [{self.endpoint} is not called for {STOP_FOR_S:g}s: its last "
                                 f"{self._failures_in_row} requests in a row failed ({error.reason})]", error.reason)

    def tighten(self, max_in_flight: int, requests_per_minute: int) -> None:
        """Apply the stricter of the current and the given limits."""
        with self._lock:
            self.max_in_flight = min(self.max_in_flight, max_in_flight)
            rates = [r for r in (self.requests_per_minute, requests_per_minute) if r]
            self.requests_per_minute = min(rates) if rates else 0

    def pause(self, seconds: float) -> None:
        """No request starts within `seconds` from now (a Retry-After)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    def count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one request slot: returns once the request may be sent; the request is in flight inside."""
        self.count(waiting=1)
        try:
            await self._take_slot()
            try:
                await self._wait_start()
            except BaseException:
                self._give_slot()
                raise
        finally:
            self.count(waiting=-1)
        self.count(in_flight=1, sent=1)
        try:
            yield
        finally:
            self.count(in_flight=-1)
            self._give_slot()

    async def _take_slot(self) -> None:
        with self._lock:
            if self._slots_used < self.max_in_flight and not self._waiters:
                self._slots_used += 1
                return
            waiter = _Waiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except BaseException:
            with self._lock:
                queued = waiter in self._waiters
                if queued:
                    self._waiters.remove(waiter)
            if not queued:  # the slot was handed over while this waiter was cancelled
                self._give_slot()
            raise

    def _give_slot(self) -> None:
        with self._lock:
            while self._waiters and self._slots_used <= self.max_in_flight:
                waiter = self._waiters.popleft()
                try:
                    waiter.loop.call_soon_threadsafe(_grant, waiter.future)
                    return  # the slot passes to the waiter
                except RuntimeError:  # its event loop is closed
                    continue
            self._slots_used -= 1

    async def _wait_start(self) -> None:
        """Wait out any Retry-After pause, then this request's turn under the rate limit."""
        while True:
            while (pause := self._paused_until - time.monotonic()) > 0:
                await asyncio.sleep(pause)
            with self._lock:
                start = max(time.monotonic(), self._next_start)
                if self.requests_per_minute:
                    self._next_start = start + 60.0 / self.requests_per_minute
            if start > time.monotonic():
                await asyncio.sleep(start - time.monotonic())
            if self._paused_until <= time.monotonic():
                return  # else a pause began while this request waited its turn: take a new turn after it


_LIMITERS: dict[str, EndpointLimiter] = {}
_REGISTRY_LOCK = threading.Lock()


def limiter_for(base_url: str, max_in_flight: int, requests_per_minute: int = 0) -> EndpointLimiter:
    """The process's limiter of an endpoint (made on first use; later callers tighten its limits)."""
    key = base_url.rstrip("/")
    with _REGISTRY_LOCK:
        limiter = _LIMITERS.get(key)
        if limiter is None:
            limiter = _LIMITERS[key] = EndpointLimiter(endpoint_host(key) or key, max_in_flight, requests_per_minute)
        else:
            limiter.tighten(max_in_flight, requests_per_minute)
        return limiter


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a Retry-After value: delay-seconds (fractions accepted) or an HTTP date
    (`now`: the current Unix time, default time.time()). None when absent or unreadable."""
    if not value or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def http_status(exc: BaseException) -> Optional[int]:
    """The HTTP status of a failed request's exception (openai.APIStatusError), None without one."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def retry_after_s(exc: BaseException) -> Optional[float]:
    """The wait an error response asks for (`retry-after-ms`, else `Retry-After`), None when it asks none."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    ms = parse_retry_after(headers.get("retry-after-ms"))
    return ms / 1000.0 if ms is not None else parse_retry_after(headers.get("retry-after"))


class Traffic:
    """One caller of an endpoint: the endpoint's shared limiter, its own retry policy and seeded jitter."""

    def __init__(self, base_url: str, limits: TrafficLimits = TrafficLimits(), seed: int = 0):
        problems = limits.errors()
        if problems:
            raise ValueError("; ".join(f"{k}: {v}" for k, v in problems.items()))
        self.base_url, self.limits = base_url, limits
        self.limiter = limiter_for(base_url, limits.max_in_flight, limits.requests_per_minute)
        self._rng = random.Random(seed)

    def backoff_s(self, retry: int) -> float:
        """The wait before retry number `retry` (1, 2, ...) when the server named none."""
        base = min(self.limits.max_backoff_s, self.limits.backoff_s * 2 ** (retry - 1))
        return base * (0.5 + self._rng.random())

    async def call(self, request: Callable[[], Awaitable[T]],
                   classify: Callable[[Exception], BackendError]) -> tuple[T, int]:
        """(request()'s result, attempts made). A failure `classify` calls not retryable is raised at once;
        after the last retry a BackendError names the attempts and the last status."""
        limiter = self.limiter
        for attempt in range(1, self.limits.max_retries + 2):
            async with limiter.slot():
                if stopped := limiter.stopped():  # also for a call queued while the endpoint stopped
                    raise stopped
                try:
                    result = await request()
                except Exception as exc:  # CancelledError is not an Exception
                    failure, error = exc, classify(exc)
                else:
                    limiter.outcome(None, None)
                    return result, attempt
            status = http_status(failure)
            limiter.outcome(error, status)
            if status == 429:
                limiter.count(rate_limited=1)
            if not error.retryable:
                raise error from failure
            if attempt > self.limits.max_retries:
                break
            wait = retry_after_s(failure) if status in PAUSE_STATUSES else None
            if wait is not None and wait > self.limits.max_retry_after_s:
                limiter.count(gave_up=1)
                raise BackendError(f"{error} (it asks to wait {wait:.0f}s before a retry, more than the "
                                   f"{self.limits.max_retry_after_s:g}s allowed)", error.reason) from failure
            limiter.count(retried=1)
            if wait is not None:
                limiter.pause(wait)  # the next slot() waits it out, and every other caller too
            else:
                limiter.count(waiting=1)
                try:
                    await asyncio.sleep(self.backoff_s(attempt))
                finally:
                    limiter.count(waiting=-1)
        limiter.count(gave_up=1)
        last = f"HTTP {status}" if status is not None else f"no HTTP status ({error.reason})"
        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        raise BackendError(f"{error} (gave up after {tries}; last status: {last})", error.reason) from failure


# ----------------------------------------------------------------------------------------- the snapshot
def snapshot() -> dict[str, dict[str, int]]:
    """{endpoint host: counters} of every endpoint this process has called."""
    with _REGISTRY_LOCK:
        limiters = list(_LIMITERS.values())
    out: dict[str, dict[str, int]] = {}
    for lim in limiters:
        with lim._lock:
            counts = asdict(lim.counters)
        total = out.setdefault(lim.endpoint, dict.fromkeys(counts, 0))
        for k, v in counts.items():
            total[k] += v
    return out


def traffic_text(snap: Optional[dict[str, dict[str, int]]]) -> str:
    """One line for progress displays: 'host: 4 in flight · 12 waiting · 3 retried · 2×429', '' for none."""
    parts = []
    for host, c in sorted((snap or {}).items()):
        line = f"{c.get('in_flight', 0)} in flight · {c.get('waiting', 0)} waiting · {c.get('retried', 0)} retried"
        if c.get("rate_limited"):
            line += f" · {c['rate_limited']}×429"
        if c.get("gave_up"):
            line += f" · {c['gave_up']} gave up"
        parts.append(f"{host}: {line}" if len(snap or {}) > 1 else line)
    return "; ".join(parts)


def write_snapshot(folder: str | Path) -> None:
    """Write the snapshot to folder/TRAFFIC_FILE (atomically); nothing when no endpoint was called."""
    snap = snapshot()
    if not snap or not folder:
        return
    path = Path(folder) / TRAFFIC_FILE
    tmp = path.with_name(f".{TRAFFIC_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps({"at": time.time(), "endpoints": snap}))
    os.replace(tmp, path)


def read_snapshot(folder: Any) -> dict[str, dict[str, int]]:
    """The snapshot a job process last wrote into `folder` ({} when none or unreadable)."""
    if not folder:
        return {}
    try:
        data = json.loads((Path(folder) / TRAFFIC_FILE).read_text())
    except (OSError, ValueError):
        return {}
    endpoints = data.get("endpoints") if isinstance(data, dict) else None
    return endpoints if isinstance(endpoints, dict) else {}
