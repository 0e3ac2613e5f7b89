"""VersionedEngine: a policy engine whose weights carry a version and change only between batches.

Training counts its policy versions in updates: version v = the weights after v updates. Every Generation
this engine returns carries the version of the weights that sampled it (`Generation.policy_version`), which
the rollout stores on the reply (trainer.rollout.dialogue_steps, storage Turn.policy_version) and the
learner uses to tell stale tokens from fresh ones (trainer.learning.algorithms.decoupled_policy_loss).

A lock orders sampling and weight pushes: `push_weights` waits for the batch in flight and the next batch
waits for the push, so a batch never mixes two versions and the rollout never waits for the learner's
update, only for the copy of its result (a dialogue in flight continues under the new weights, each reply
keeping its version). Two ways to hold the weights:
- shared (max_staleness 0): the engine samples from the training model itself; nothing is pushed, the
  version is only renamed after each update (`set_version`), while no rollout runs.
- a snapshot (max_staleness >= 1, trainer.learning.overlap): the transformers engine samples from its own copy of the
  policy, the vLLM engine from its own weights; after each update the learner's weights are pushed in
  (HFEngine.load_weights: an in-place copy; VLLMEngine.load_weights: collective_rpc reload_weights), streamed
  from the learner in buckets of whole layers (trainer.policies.weight_stream).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from trainer.policies.base import Generation, PolicyEngine, SamplingConfig


class VersionedEngine(PolicyEngine):
    """Wraps a local engine (token ids); see the module docstring."""

    supports_token_ids = True

    def __init__(self, inner: PolicyEngine, version: int = 0):
        self.inner = inner
        self.name, self.model_ref, self.tokenizer = inner.name, inner.model_ref, inner.tokenizer
        self.policy_version = version
        self._lock = threading.Lock()

    # the rollout sets its Stop flag on the engine it was given; the inner engine is the one that reads it
    @property
    def stop_event(self) -> Any:  # type: ignore[override]
        return self.inner.stop_event

    @stop_event.setter
    def stop_event(self, event: Any) -> None:
        self.inner.stop_event = event

    @property
    def context_length(self) -> Optional[int]:
        return self.inner.context_length

    @property
    def eos_token_id(self) -> int:
        return self.inner.eos_token_id

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> list[Generation]:
        with self._lock:
            version = self.policy_version
            generations = self.inner.generate_ids(prompt_ids, params, seeds)
        for g in generations:
            g.policy_version = version
        return generations

    def forget_caches(self) -> None:
        with self._lock:
            self.inner.forget_caches()

    def set_version(self, version: int) -> None:
        """Rename the weights' version without copying them (shared weights, no rollout running)."""
        with self._lock:
            self.policy_version = version

    def push_weights(self, weights: Any, version: int) -> float:
        """Load new weights (a state dict or buckets, trainer.policies.weight_stream) between two batches and
        give them `version`; returns the seconds the push took (waiting for the batch in flight not included)."""
        import time

        with self._lock:
            t0 = time.monotonic()
            self.inner.load_weights(weights)
            self.policy_version = version
            return time.monotonic() - t0

    def close(self) -> None:
        self.inner.close()
