"""Policy engines behind one interface: `PolicyEngine.generate(prompts, params) -> list[Generation]`.

`make_policy_engine(spec)`: "default" | PATH (transformers) | "vllm:default" | "vllm:PATH" | "openai:MODEL" |
"replay:FILE" (a SAGE *_result.jsonl, played back).
"""
from __future__ import annotations

from typing import Any

from trainer.policies.base import LOGPROB_CONVENTION, Generation, PolicyEngine, SamplingConfig, check_messages

__all__ = ["LOGPROB_CONVENTION", "Generation", "PolicyEngine", "SamplingConfig", "check_messages",
           "make_policy_engine"]


def make_policy_engine(spec: str, **kw: Any) -> PolicyEngine:
    """Build the engine named by `spec`; keyword arguments go to the engine's constructor."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("policy must be 'default', a model folder path, 'vllm:PATH|default' or 'openai:MODEL'")
    if spec.startswith("replay:"):
        from trainer.policies.replay_engine import ReplayEngine

        return ReplayEngine(spec)
    if spec.startswith("openai:"):
        from trainer.policies.openai_engine import OpenAIEngine

        return OpenAIEngine(spec[len("openai:"):], **kw)
    if spec.startswith("vllm:"):
        from trainer.policies.vllm_engine import VLLMEngine

        return VLLMEngine(spec[len("vllm:"):] or "default", **kw)
    from trainer.policies.hf_engine import HFEngine

    return HFEngine(spec[len("transformers:"):] if spec.startswith("transformers:") else spec, **kw)
