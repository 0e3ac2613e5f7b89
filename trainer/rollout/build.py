"""The one way an entry point gets its rollout: a policy and a simulated user named by their specs.

Training, the benchmark, `trainer rollout` and the live view call `build_rollout`; a spec that cannot be
built raises SpecError naming the field (`policy` or `simulator`) and nothing has started.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from simulator.user.agent import SimulatorFactory
from simulator.user.spec import SimulatorSpec
from trainer.policies.base import PolicyEngine
from trainer.policies.spec import PolicySpec
from trainer.rollout.dialogue_rollout import DialogueRollout
from trainer.rollout.types import RolloutConfig, RolloutRecorder


class SpecError(ValueError):
    """A policy or simulator spec that cannot be built; `field` names which."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def simulator_factory(simulator: Union[SimulatorSpec, SimulatorFactory]) -> SimulatorFactory:
    """The factory of a spec (built here, SpecError on a bad one), or the factory itself."""
    if not isinstance(simulator, SimulatorSpec):
        return simulator
    if problems := simulator.errors():
        field, message = next(iter(problems.items()))
        raise SpecError(field, message)
    try:
        return simulator.factory()
    except (ValueError, RuntimeError, ImportError, OSError) as e:
        raise SpecError("simulator", str(e)) from None


def policy_engine(policy: Union[PolicySpec, PolicyEngine]) -> PolicyEngine:
    """The engine of a spec (built here, SpecError when it cannot be loaded), or the engine itself."""
    if not isinstance(policy, PolicySpec):
        return policy
    try:
        return policy.build()
    except (ValueError, OSError, RuntimeError, ImportError) as e:
        raise SpecError("policy", str(e)) from None


def build_rollout(policy: Union[PolicySpec, PolicyEngine], simulator: Union[SimulatorSpec, SimulatorFactory],
                  config: Optional[RolloutConfig] = None, on_event: Optional[Any] = None,
                  recorder: Optional[RolloutRecorder] = None) -> DialogueRollout:
    """A DialogueRollout between the policy and the simulated user. The simulator is built first (cheap,
    and its errors need no model loaded); a policy engine passed in is the caller's to close."""
    factory = simulator_factory(simulator)
    return DialogueRollout(policy_engine(policy), factory, config=config, on_event=on_event, recorder=recorder)
