"""The multi-turn dialogue rollout: many policy <-> simulated-user dialogues, run to the end.

Schedules (RolloutConfig.schedule):
- "async" (default): one asyncio task per dialogue plays it from its opening to its end; each policy turn
  is submitted as soon as the dialogue's simulated user has answered, and the policy batches whatever is
  ready (trainer.policies.scheduler: a gathering scheduler for engines with token ids, concurrent requests
  for chat engines). A slow simulated user delays only its own dialogue.
- "rounds" (as in the paper's multi-turn PPO, without the reference code's bugs): the policy turns of ALL
  active dialogues are sampled in ONE batch, then every dialogue records its reply and awaits its own
  simulated user, all concurrently; the next round waits for the slowest user.
Either way every dialogue is tracked by its key, never by a position in a shrinking list, so each reply
goes to its own simulated user, and Stop cancels the steps still waiting. A dialogue's seed comes from who
plays it (types.dialogue_seed: run seed, persona, repeat index), never its place in a list, so a resumed or
split run plays the same dialogues; each policy turn's seed comes from the dialogue's and the turn, so both
schedules sample the same replies where the engine honours per-request seeds (trainer/policies/base.py).
The rollout knows no store: a `recorder` (trainer.rollout.types.RolloutRecorder, e.g.
storage.recorder.DialogueRecorder) is told of every dialogue and turn as it happens, then events go to
`on_event`. Samples carry emotions, the final emotion and format flags; the reward is computed by the
training step (trainer.learning.algorithms.rlver_reward).
With `shared_opening` the members of a group start from one opening: the first member's simulated user
speaks and the others adopt it (RLVER clones a group's simulators from one that has already spoken).
One dialogue's steps (start, opening, policy turn, the user's answer, the rules that end it):
trainer/rollout/dialogue_steps.py; data classes: trainer/rollout/types.py; token bookkeeping: trainer/rollout/tokens.py.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
import uuid
from dataclasses import asdict
from typing import Any, Awaitable, Iterator, Optional

from simulator.personas.profile import Profile
from simulator.user.agent import SimulatorFactory
from trainer.policies.base import PolicyEngine
from trainer.policies.repetition import RepetitionRule
from trainer.policies.scheduler import BatchScheduler, ConcurrentRequests, sample_batch
from trainer.rollout import types as rollout_types
from trainer.rollout.dialogue_steps import DialogueSteps
from trainer.rollout.state import DialogueState, SharedOpenings
from trainer.rollout.types import RolloutConfig, RolloutEvent, RolloutRecorder, RolloutSample

log = logging.getLogger(__name__)


class DialogueRollout:
    """Runs dialogues between a policy engine and simulated users; see the module docstring."""

    def __init__(self, policy_engine: PolicyEngine, simulator_factory: SimulatorFactory,
                 config: Optional[RolloutConfig] = None, on_event: Optional[Any] = None,
                 recorder: Optional[RolloutRecorder] = None):
        """`on_event(RolloutEvent)`: called on every event (a failing listener is logged, not raised);
        `recorder`: told of every dialogue and turn first (see RolloutRecorder)."""
        self.policy_engine = policy_engine
        self.simulator_factory = simulator_factory
        self.recorder = recorder
        self.config = (config or RolloutConfig()).validate()
        self.on_event = on_event
        self._cancel = threading.Event()

    # ---- control -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop: every running dialogue ends as "cancelled" at the next step. Safe to call twice."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self, profiles: list[Profile], group_size: int = 1, **overrides: Any) -> list[RolloutSample]:
        """Run profiles x group_size dialogues to the end (blocking); see `arun`."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(profiles, group_size, **overrides))
        raise RuntimeError("DialogueRollout.run() was called inside an event loop; await arun() instead")

    def stream(self, profiles: list[Profile], group_size: int = 1, tick_s: Optional[float] = None,
               **overrides: Any) -> Iterator[RolloutEvent]:
        """Run in a background thread and yield events as they happen (for UIs such as the live view), a "tick"
        after each `tick_s` seconds without one; ends after the last "finished". An error that stops the whole
        run is raised here. Closing the generator early (e.g. the browser went away) cancels."""
        events: queue.Queue = queue.Queue()
        previous = self.on_event

        def forward(ev: RolloutEvent) -> None:
            events.put(ev)
            if previous is not None:
                previous(ev)

        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["samples"] = asyncio.run(self.arun(profiles, group_size, **overrides))
            except BaseException as exc:  # handed to the consumer below
                outcome["error"] = exc
            finally:
                events.put(None)

        self.on_event = forward
        thread = threading.Thread(target=work, name="rollout", daemon=True)
        thread.start()
        try:
            while (ev := rollout_types.next_event(events, tick_s)) is not None:
                yield ev
        finally:
            if thread.is_alive():
                self.cancel()
                thread.join()
            self.on_event = previous
        if "error" in outcome:
            raise outcome["error"]

    async def arun(self, profiles: list[Profile], group_size: int = 1, **overrides: Any) -> list[RolloutSample]:
        """Samples in the order profiles x group members. `overrides` replace RolloutConfig fields."""
        cfg = RolloutConfig(**{**asdict(self.config), **overrides}).validate()
        if not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        profiles = [p.validate() for p in profiles]
        if not profiles:
            raise ValueError("no profiles: pass at least one persona")
        if self.policy_engine.supports_token_ids and not (cfg.max_tokens or self.policy_engine.context_length):
            raise ValueError("max_tokens: the policy engine does not say its context length; set max_tokens")
        self.policy_engine.stop_event = self._cancel
        self.policy_engine.repetition_rule = RepetitionRule() if cfg.stop_on_repetition else None
        steps = DialogueSteps(self.policy_engine, self.simulator_factory, cfg, self.recorder, self._deliver)
        run_tag = uuid.uuid4().hex[:8]
        dialogues: dict[str, DialogueState] = {}
        times_played: dict[str, int] = {}  # a persona listed twice plays its next repeats, not the same seeds
        for i, profile in enumerate(profiles):
            group_id, first = f"{run_tag}-{i}", times_played.get(profile.id, 0)
            times_played[profile.id] = first + group_size
            for j in range(group_size):
                key = f"{group_id}-{j}"
                seed = rollout_types.dialogue_seed(cfg.seed, profile.id, first + j)
                dialogues[key] = steps.start(key, profile, group_id, seed)
        openings = SharedOpenings(dialogues.values(), cfg.shared_opening)
        running = {k: d for k, d in dialogues.items() if d.sample.status == "running"}
        if cfg.schedule == "async":
            await self._run_async(running, steps, openings)
        else:
            await self._concurrently(running, {k: steps.open(d, openings) for k, d in running.items()}, steps)
            await self._run_rounds(running, steps)
        return [d.sample for d in dialogues.values()]

    async def _run_async(self, dialogues: dict[str, DialogueState], steps: DialogueSteps,
                         openings: SharedOpenings) -> None:
        cfg = steps.config
        policy: BatchScheduler | ConcurrentRequests
        if self.policy_engine.supports_token_ids:
            policy = BatchScheduler(self.policy_engine, cfg.temperature, cfg.top_p, cfg.max_batch, cfg.gather_ms / 1000)
        else:
            policy = ConcurrentRequests(self.policy_engine, cfg.temperature, cfg.top_p, cfg.max_batch)
        try:
            await self._concurrently(dialogues, {k: self._play(d, steps, openings, policy)
                                                 for k, d in dialogues.items()}, steps)
        finally:
            await policy.close()

    async def _play(self, d: DialogueState, steps: DialogueSteps, openings: SharedOpenings,
                    policy: BatchScheduler | ConcurrentRequests) -> None:
        """One dialogue from its opening to its end, each policy turn submitted as soon as it can be."""
        await steps.open(d, openings)
        while d.sample.status == "running":
            if self.cancelled:
                steps.finish(d, "cancelled", "cancelled", "stopped by the user")
                return
            request = steps.request(d)
            if request is None:
                return
            try:
                result = await policy.generate(request)
            except Exception as exc:  # the engine failed for the whole batch
                steps.finish(d, "failed", "error", f"policy generation failed: {type(exc).__name__}: {exc}")
                return
            if result.stopped:  # Stop during generation: the cut reply is not recorded
                steps.finish(d, "cancelled", "cancelled", "stopped by the user")
                return
            await steps.turn_step(d, result.generation, result.latency_s)

    async def _run_rounds(self, dialogues: dict[str, DialogueState], steps: DialogueSteps) -> None:
        cfg = steps.config
        while True:
            active = [d for d in dialogues.values() if d.sample.status == "running"]
            if not active:
                return
            if self.cancelled:
                for d in active:
                    steps.finish(d, "cancelled", "cancelled", "stopped by the user")
                return
            requests = {d.key: r for d in active if (r := steps.request(d)) is not None}
            if not requests:
                continue
            try:  # every active dialogue's policy turn in one batch
                results = await asyncio.to_thread(sample_batch, self.policy_engine, list(requests.values()),
                                                  cfg.temperature, cfg.top_p)
            except Exception as exc:  # the engine failed for the whole batch: every dialogue of it fails
                for key in requests:
                    steps.finish(dialogues[key], "failed", "error",
                                 f"policy generation failed: {type(exc).__name__}: {exc}")
                continue
            if self.cancelled:  # Stop during generation: the cut replies are not recorded
                continue
            # each dialogue records its reply and asks its own simulated user, all at the same time
            await self._concurrently(dialogues, {key: steps.turn_step(dialogues[key], r.generation, r.latency_s)
                                                 for key, r in zip(requests, results)}, steps)

    # ---- the steps of all dialogues at once ----------------------------------------------------
    async def _concurrently(self, dialogues: dict[str, DialogueState], coroutines: dict[str, Awaitable],
                            steps: DialogueSteps) -> None:
        """Run one step coroutine per dialogue concurrently; Stop cancels those still running."""
        if not coroutines:
            return
        tasks = {}
        for key, step in coroutines.items():
            tasks[asyncio.ensure_future(step)] = key
            # Let each step run up to its first request before starting the next: HTTP clients send the
            # body from a callback queued behind every task already ready, so 32 tasks started at once
            # would all build their requests before the first one leaves and the round waits that long.
            await asyncio.sleep(0)
        watcher = asyncio.ensure_future(self._wait_cancel())
        pending = set(tasks)
        while pending:
            done, _ = await asyncio.wait(pending | {watcher}, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if watcher in done:
                break
        watcher.cancel()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task, key in tasks.items():
            d = dialogues[key]
            if d.sample.status != "running":
                continue
            if task.cancelled():
                steps.finish(d, "cancelled", "cancelled", "stopped by the user")
            elif task.exception() is not None:  # a bug or a store failure: this dialogue only
                exc = task.exception()
                steps.finish(d, "failed", "error", f"rollout step failed: {type(exc).__name__}: {exc}")

    async def _wait_cancel(self) -> None:
        while not self._cancel.is_set():
            await asyncio.sleep(0.05)

    def _deliver(self, event: RolloutEvent) -> None:
        """Hand an event to the current listener (`on_event` may change between runs, as stream() does)."""
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a broken listener (e.g. a closed browser tab) must not stop the rollout
            log.exception("rollout event listener failed")
