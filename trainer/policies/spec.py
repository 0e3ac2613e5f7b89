"""PolicySpec: how a run names its policy, read and validated in one place.

`default` (the packaged SmolLM2), a model folder (also written `transformers:PATH`), a training checkpoint
folder (its `policy/` is used), `vllm:PATH|default`, `openai:MODEL` (with a base URL and traffic limits)
or `replay:FILE`. Training, the benchmark, `trainer rollout` and the live view all build their policy
engine through `PolicySpec.build()`, and every config check asks `PolicySpec.error()`. A path the spec
names is checked by the caller's Access (simulator.access: from the web it must lie inside the lab's
folders) before anything is read.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simulator.access import Access, AccessError, current_access, register_kind
from simulator.llm.traffic import TrafficLimits
from trainer.checkpoint_layout import model_folder
from trainer.policies.base import POLICY_FORMS, PolicyEngine, resolve_policy

__all__ = ["POLICY_FORMS", "PolicySpec", "checkpoint_model", "read_spec", "resolve_policy"]

# spec kinds: what the text before the first colon selects ("folder": no known prefix, a model folder)
KINDS = {"openai:": "openai", "replay:": "replay", "vllm:": "vllm", "transformers:": "folder"}


def read_spec(spec: str) -> tuple[str, str]:
    """(kind, target) of a policy spec: ("default", "default"), ("folder", PATH), ("vllm", PATH|"default"),
    ("openai", MODEL) or ("replay", FILE). The one reader of policy strings."""
    text = spec.strip()
    if text == "default":
        return "default", "default"
    for prefix, kind in KINDS.items():
        if text.startswith(prefix):
            target = text[len(prefix):].strip()
            return kind, (target or "default") if kind == "vllm" else target
    return "folder", text


def checkpoint_model(spec: str) -> str:
    """A training checkpoint folder stands for the model in its policy/ (other specs unchanged)."""
    kind, target = read_spec(spec)
    if kind not in ("folder", "vllm") or target == "default":
        return spec
    path = Path(target).expanduser()
    model = model_folder(path)
    return ("vllm:" if kind == "vllm" else "") + str(model) if model != path else spec


@dataclass(frozen=True)
class PolicySpec:
    spec: str = "default"
    base_url: str = ""  # openai: policies (else OPENAI_BASE_URL)
    traffic: Optional[TrafficLimits] = None  # openai: policies; None: the engine's defaults
    seed: Optional[int] = None  # sent to an openai: endpoint when set
    access: Optional[Access] = None  # who asks (None: this process's caller, simulator.access)

    @classmethod
    def from_config(cls, config: Any) -> "PolicySpec":
        """The spec a run config names with its `policy*` fields (BenchmarkConfig)."""
        return cls(spec=config.policy, base_url=config.policy_base_url or "",
                   traffic=TrafficLimits.from_config(config, "policy_"), seed=config.seed)

    @property
    def kind(self) -> str:
        return read_spec(self.spec)[0]

    @property
    def is_api(self) -> bool:
        return self.kind == "openai"

    def path(self) -> Optional[Path]:
        """The file or folder the spec names (None for default, vllm:default and openai:), checked by the
        caller's Access: AccessError (a ValueError) when the caller may not name it."""
        kind, target = read_spec(self.spec)
        if kind in ("default", "openai") or target == "default":
            return None
        return (self.access or current_access()).path("policy", target)

    def error(self) -> str:
        """Why the spec names no policy ('' when it may: a folder is only read by build())."""
        if not isinstance(self.spec, str) or not self.spec.strip():
            return f"policy must be {POLICY_FORMS}"
        kind, target = read_spec(self.spec)
        if not target:
            what = "a model name" if kind == "openai" else "a file" if kind == "replay" else "a folder"
            return f"{kind}:{'MODEL' if kind == 'openai' else 'FILE' if kind == 'replay' else 'PATH'} needs " \
                   f"{what}; policy must be {POLICY_FORMS}"
        try:
            self.path()
        except ValueError as exc:
            return getattr(exc, "message", str(exc))
        return ""

    def endpoint_error(self) -> str:
        """Why the caller may not send an openai: policy's requests to `base_url` ('' when it may, or for a
        policy that calls no endpoint): from the web only the owner's endpoints (simulator.endpoints)."""
        if self.kind != "openai":
            return ""
        return (self.access or current_access()).endpoint_error("policy_base_url", self.base_url)

    def model_spec(self) -> str:
        """The spec with a checkpoint folder standing for its policy/ (checkpoint_model), checked again: a
        policy/ that links out of the caller's folders is refused too."""
        spec = checkpoint_model(self.spec.strip())
        if problem := PolicySpec(spec, access=self.access).error():
            raise ValueError(problem)
        return spec

    def local_model(self) -> Path:
        """The Hugging Face folder of a local spec (default, a model or checkpoint folder): what training
        loads. ValueError / OSError when it is none."""
        if problem := self.error():
            raise ValueError(problem)
        if self.kind not in ("default", "folder"):
            raise ValueError(f"{self.spec!r} is not a local model; a model must be 'default' or a model folder")
        return resolve_policy(read_spec(self.model_spec())[1])

    def build(self, **engine_kw: Any) -> PolicyEngine:
        """The engine; `engine_kw` go to its constructor (device, model, ...). ValueError / OSError when the
        spec or its model cannot be loaded."""
        if problem := self.error():
            raise ValueError(problem)
        kw = dict(engine_kw)
        kind, target = read_spec(self.model_spec())
        if kind == "openai":
            from trainer.policies.openai_engine import OpenAIEngine

            kw.update(self.traffic.config_values() if self.traffic else {})
            if self.seed is not None:
                kw["seed"] = self.seed
            if self.base_url:
                kw["base_url"] = self.base_url
            return OpenAIEngine(target, access=self.access, **kw)
        if kind == "replay":
            from trainer.policies.replay_engine import ReplayEngine

            return ReplayEngine(self.spec.strip())
        if kind == "vllm":
            from trainer.policies.vllm_engine import VLLMEngine

            return VLLMEngine(target, **kw)
        from trainer.policies.hf_engine import HFEngine

        return HFEngine(target, **kw)


def _policy_refusal(access: Access, name: str, value: object) -> str:
    """Why the caller may not name the file or folder of policy spec `value` ('' when it may)."""
    if not isinstance(value, str):
        return ""
    try:
        PolicySpec(value, access=access).path()
    except AccessError as exc:
        return exc.message
    return ""


register_kind("policy", _policy_refusal)
