"""Check before spending: every input of a benchmark or comparison, checked before one dialogue is played.

`benchmark_problems(store, config)` -> {field: problem} for everything wrong with a BenchmarkConfig at once:
its settings, the persona spec (read), the prompt pack (read), the simulated user (built and asked for its
fingerprint on the first persona it accepts) and the policy (the spec parsed and, for a model folder or a
replay file, the path looked at; no model is loaded). A comparison checks both sides the same way (fields
`a` and `b` for the policies) so a missing B is reported before A plays.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from simulator.personas.profile import Profile
from simulator.personas.specs import PersonaSpecError, resolve_personas
from simulator.user.packs import load_pack
from simulator.user.spec import SimulatorSpec
from trainer.benchmarking.protocol import protocol_rules
from trainer.policies.base import resolve_policy
from trainer.policies.spec import PolicySpec, checkpoint_model

API_PREFIXES = ("openai:",)


def first_profiles(spec: str, limit: int = 0, store: Any = None) -> list[Profile]:
    """The personas of a persona spec (simulator.personas.specs), the first `limit` (0 = all);
    PersonaSpecError listing every problem of a file by line."""
    profiles = resolve_personas(spec, store)
    return profiles[:limit] if limit else profiles


def policy_problem(spec: str) -> str:
    """Why `spec` names no usable policy ('' when it may): the spec's own check, then the model folder
    (a Hugging Face folder with config.json, or a training checkpoint with one in policy/) or the replay
    file must exist. `default` and `vllm:default` are the packaged model; API models are not called."""
    if problem := PolicySpec(spec=spec).error():
        return problem
    spec = spec.strip()
    if spec.startswith(API_PREFIXES) or spec in ("default", "vllm:default", "vllm:"):
        return ""
    if spec.startswith("replay:"):
        path = Path(spec[len("replay:"):]).expanduser()
        return "" if path.is_file() else f"replay file {path} not found"
    path = Path(checkpoint_model(spec).removeprefix("vllm:").removeprefix("transformers:")).expanduser()
    if not path.exists():
        return f"model folder {path} not found"
    try:
        resolve_policy(str(path))  # config.json, a causal LM, tokenizer files: read, nothing loaded
    except (ValueError, OSError) as e:
        return f"{e} (nor a training checkpoint with a model in policy/)"
    return ""


def simulator_problem(config: Any, profiles: list[Profile]) -> tuple[str, str]:
    """(field, problem) of the simulated user under the benchmark rules ('' problem when it plays at least
    one of the personas): built, then asked for its fingerprint on the first persona it accepts."""
    spec = SimulatorSpec.from_config(config, rules=protocol_rules())
    if errors := spec.errors():
        return next(iter(errors.items()))
    try:
        load_pack(config.prompt_pack)
    except ValueError as e:
        return "prompt_pack", str(e)
    try:
        factory = spec.factory()
    except (ValueError, RuntimeError, ImportError, OSError) as e:
        return "simulator", str(e)
    first = ""
    for p in profiles:
        try:
            factory(p, 0).fingerprint()
            return "simulator", ""
        except (ValueError, RuntimeError) as e:
            first = first or str(e)
    return "simulator", f"it cannot play any of the {len(profiles)} profile(s): {first}" if profiles else ""


def benchmark_problems(store: Any, config: Any, policy_field: str = "policy") -> dict[str, str]:
    """Everything wrong with a BenchmarkConfig, each problem under its field; empty when it can run."""
    problems = dict(config.errors())
    if "policy" in problems:
        problems[policy_field] = problems.pop("policy")
    elif problem := policy_problem(config.policy):
        problems[policy_field] = problem
    profiles: Optional[list[Profile]] = None
    if "profiles" not in problems and "limit" not in problems:
        try:
            profiles = first_profiles(config.profiles, config.limit, store)
        except PersonaSpecError as e:
            problems["profiles"] = str(e)
    if not any(k.startswith("simulator") or k == "prompt_pack" for k in problems):
        field, problem = simulator_problem(config, profiles or [])
        if problem:
            problems[field] = problem
    return problems


def problems_text(what: str, problems: dict[str, str]) -> str:
    """One message naming every problem: 'field: problem' alone, else 'invalid WHAT: field: problem; ...'."""
    text = "; ".join(f"{k}: {v}" for k, v in problems.items())
    return text if len(problems) == 1 else f"invalid {what}: {text}"
