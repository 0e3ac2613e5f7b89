"""PolicySpec: how a run names its policy, parsed and validated in one place.

`default` (the packaged SmolLM2), a model folder, a training checkpoint folder (its `policy/` is used),
`vllm:PATH|default`, `openai:MODEL` (with a base URL and traffic limits) or `replay:FILE`. Training, the
benchmark, `trainer rollout` and the live view all build their policy engine through `PolicySpec.build()`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simulator.llm.traffic import TrafficLimits
from trainer.checkpoint_layout import model_folder
from trainer.policies import PolicyEngine, make_policy_engine

POLICY_FORMS = ("'default', a model folder, a training checkpoint folder, 'vllm:PATH|default', 'openai:MODEL' "
                "or 'replay:FILE'")


def checkpoint_model(spec: str) -> str:
    """A training checkpoint folder stands for the model in its policy/ (other specs unchanged)."""
    prefix = "vllm:" if spec.startswith("vllm:") else ""
    if spec.startswith(("openai:", "replay:")):
        return spec
    path = Path(spec[len(prefix):]).expanduser()
    model = model_folder(path)
    return prefix + str(model) if model != path else spec


@dataclass(frozen=True)
class PolicySpec:
    spec: str = "default"
    base_url: str = ""  # openai: policies (else OPENAI_BASE_URL)
    traffic: Optional[TrafficLimits] = None  # openai: policies; None: the engine's defaults
    seed: Optional[int] = None  # sent to an openai: endpoint when set

    @classmethod
    def from_config(cls, config: Any) -> "PolicySpec":
        """The spec a run config names with its `policy*` fields (BenchmarkConfig)."""
        return cls(spec=config.policy, base_url=config.policy_base_url or "",
                   traffic=TrafficLimits.from_config(config, "policy_"), seed=config.seed)

    @property
    def is_api(self) -> bool:
        return self.spec.startswith("openai:")

    def error(self) -> str:
        """Why the spec names no policy ('' when it may: a folder is only read by build())."""
        if not isinstance(self.spec, str) or not self.spec.strip():
            return f"required: {POLICY_FORMS}"
        if self.spec.startswith(("openai:", "replay:")) and not self.spec.partition(":")[2].strip():
            return f"{self.spec!r} names nothing after the colon; {POLICY_FORMS}"
        return ""

    def build(self, **engine_kw: Any) -> PolicyEngine:
        """The engine; `engine_kw` go to its constructor (device, model, ...). ValueError / OSError when the
        spec or its model cannot be loaded."""
        if problem := self.error():
            raise ValueError(problem)
        kw = dict(engine_kw)
        if self.is_api:
            kw.update(self.traffic.config_values() if self.traffic else {})
            if self.seed is not None:
                kw["seed"] = self.seed
            if self.base_url:
                kw["base_url"] = self.base_url
        return make_policy_engine(checkpoint_model(self.spec.strip()), **kw)
