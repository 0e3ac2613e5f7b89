"""Overlapped, staleness-bounded rollouts: the dialogues of later steps run while the learner updates.

Policy versions count updates: the learner holds version v after v updates, and step k trains at learner
version k - 1 (its update makes version k). With `max_staleness` s:

    admission  the rollout of step j starts once the sampling weights are at version >= j - 1 - s, so up to
               s + 1 steps of dialogues are in flight; s = 0 is the alternating loop (step j starts after
               update j - 1), s = 1 lets step j + 1 talk with its simulated users during update j.
    the bound  a dialogue is trained at step k only when the version of its oldest reply is >= k - 1 - s
               (`within_bound`); admission guarantees it, the check makes it a property of the batch. A
               dialogue beyond it is DROPPED with its whole group (not re-run: a re-run would make the step
               wait on the simulated users again, which is what the overlap removes, and could itself fall
               behind), and counted in the step's `dialogues_beyond_bound` metric.
    partial    a dialogue in flight during a weight push continues under the new weights; each reply keeps
               its version (trainer.policies.versioned), and the learner weighs stale tokens by their
               behaviour log-probs (trainer.learning.algorithms.decoupled_policy_loss). With
               partial_rollouts off, a push first waits for the dialogues in flight (`wait_in_flight`):
               every dialogue ends on the weights it began with, and the next step's dialogues start only
               after the slowest of the current ones (the update still overlaps; the straggler no longer).
    groups     a step's rollout returns when every dialogue of it has ended, so GRPO / RLOO groups are always
               trained whole; members may hold replies of two versions, and the group baseline uses their
               rewards as they are (the token weights above correct each member's own tokens).

Checkpoints hold the learner at step k; on resume the dialogues of later steps that were in flight belong
to the lost timeline (RLTrainer._forget_steps_after deletes them) and are run again from version k, so no
dialogue is trained twice or lost. Which reply of a partial rollout got which version depends on timing, so
an overlapped run is repeatable in its profiles, seeds and admission, not bit for bit.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any, Callable, Coroutine, Sequence

from trainer.rollout.types import RolloutSample

OFF_POLICY_ESTIMATORS = ("decoupled_ppo", "truncated_is")  # trainer.learning.algorithms.decoupled_policy_loss


def beyond_bound(samples: Sequence[RolloutSample], learner_version: int, max_staleness: int) -> set[str]:
    """Group ids with a dialogue whose oldest reply is more than `max_staleness` versions behind the learner."""
    return {s.group_id for s in samples
            if (v := s.oldest_version()) is not None and learner_version - v > max_staleness}


def within_bound(samples: Sequence[RolloutSample], learner_version: int,
                 max_staleness: int) -> tuple[list[RolloutSample], list[RolloutSample]]:
    """(trainable, dropped): whole groups are dropped when one member is beyond the bound; order is kept."""
    stale_groups = beyond_bound(samples, learner_version, max_staleness)
    return ([s for s in samples if s.group_id not in stale_groups],
            [s for s in samples if s.group_id in stale_groups])


def version_lag(samples: Sequence[RolloutSample], learner_version: int) -> dict[str, float]:
    """policy_lag_mean: mean over replies of (learner version - reply version); policy_lag_max: the largest
    lag of a dialogue's oldest reply. Replies without a version are not counted."""
    lags = [learner_version - v for s in samples for v in s.reply_versions if v is not None]
    if not lags:
        return {}
    return {"policy_lag_mean": sum(lags) / len(lags), "policy_lag_max": float(max(lags))}


class OverlappedRollouts:
    """Runs each step's rollout in a background event loop as soon as admission allows; the training loop
    collects a step's samples when it needs them. `start(step)` returns the coroutine that runs the step's
    dialogues (DialogueRollout.arun with the step's profiles and seed)."""

    def __init__(self, start: Callable[[int], Coroutine[Any, Any, list[RolloutSample]]], max_staleness: int,
                 last_step: int, version: int, cancel: Callable[[], None]):
        self.start, self.max_staleness, self.last_step, self.cancel = start, max_staleness, last_step, cancel
        self.next_step = version + 1
        self.pending: dict[int, concurrent.futures.Future] = {}
        self.rollout_s: dict[int, float] = {}  # step -> wall time of its rollout, from its start to its last dialogue
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="overlapped-rollouts", daemon=True)
        self.thread.start()
        self.admit(version)

    def admit(self, version: int) -> list[int]:
        """Start the rollouts of every step that may begin with weights at `version`; returns their steps."""
        started = []
        while self.next_step <= self.last_step and self.next_step - 1 - self.max_staleness <= version:
            step = self.next_step
            self.pending[step] = asyncio.run_coroutine_threadsafe(self._timed(step), self.loop)
            started.append(step)
            self.next_step += 1
        return started

    async def _timed(self, step: int) -> list[RolloutSample]:
        t0 = time.monotonic()
        try:
            return await self.start(step)
        finally:
            self.rollout_s[step] = time.monotonic() - t0

    def in_flight(self) -> list[int]:
        return sorted(self.pending)

    def wait_in_flight(self) -> None:
        """Block until every rollout started so far has ended (their samples stay to be collected)."""
        concurrent.futures.wait(list(self.pending.values()))

    def collect(self, step: int) -> list[RolloutSample]:
        """Block until the rollout of `step` has ended and return its samples (its errors are raised)."""
        if step not in self.pending:
            raise RuntimeError(f"step {step} was never started (in flight: {self.in_flight()})")
        return self.pending.pop(step).result()

    def close(self) -> None:
        """Stop every rollout still running (their dialogues end as cancelled) and the background loop."""
        if self.pending:
            self.cancel()
            concurrent.futures.wait(list(self.pending.values()))
            self.pending.clear()
        asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self.loop).result()  # e.g. backend batchers
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _cancel_the_rest() -> None:
    """Cancel the loop's remaining tasks and wait for them (as asyncio.run does when it ends)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def overlap_errors(config: Any) -> dict[str, str]:
    """The overlap settings' problems (TrainConfig.errors): field -> problem."""
    e = {}
    if config.max_staleness < 0:
        e["max_staleness"] = f"must be >= 0, got {config.max_staleness}"
    elif config.max_staleness and config.zero_stage == 3:
        e["max_staleness"] = "overlapped training needs whole weights to copy; use zero1/zero2 with ZeRO"
    if config.off_policy_estimator not in OFF_POLICY_ESTIMATORS:
        e["off_policy_estimator"] = (f"unknown value {config.off_policy_estimator!r}; one of "
                                     f"{', '.join(OFF_POLICY_ESTIMATORS)}")
    if not config.behaviour_weight_cap >= 1:
        e["behaviour_weight_cap"] = f"must be >= 1, got {config.behaviour_weight_cap}"
    if isinstance(config.weight_bucket_mb, bool) or not isinstance(config.weight_bucket_mb, int) \
            or config.weight_bucket_mb < 1:
        e["weight_bucket_mb"] = f"must be a whole number of MiB >= 1, got {config.weight_bucket_mb!r}"
    if not isinstance(config.partial_rollouts, bool):
        e["partial_rollouts"] = f"must be true or false, got {config.partial_rollouts!r}"
    return e
