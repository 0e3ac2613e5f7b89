"""Policy engines behind one interface: `PolicyEngine.generate(prompts, params) -> list[Generation]`.

`make_policy_engine(spec)`: any policy spec (trainer.policies.spec.POLICY_FORMS), read by PolicySpec.
"""
from __future__ import annotations

from typing import Any

from trainer.policies.base import LOGPROB_CONVENTION, Generation, PolicyEngine, SamplingConfig, check_messages

__all__ = ["LOGPROB_CONVENTION", "Generation", "PolicyEngine", "SamplingConfig", "check_messages",
           "make_policy_engine"]


def make_policy_engine(spec: str, **kw: Any) -> PolicyEngine:
    """Build the engine named by `spec` (trainer.policies.spec.PolicySpec reads it); keyword arguments go to
    the engine's constructor."""
    from trainer.policies.spec import PolicySpec

    return PolicySpec(spec).build(**kw)
