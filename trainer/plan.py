"""A plan before launch: per-GPU (or, on CPU, per-process) memory of a training config, part by part.

Sources of every number (each plan repeats the ones it used in its notes):
- Parameter counts, model states under DeepSpeed ZeRO (or torch AdamW without it) and vLLM's weights and KV
  cache: trainer.plan_shapes, from the model's shape and the hardware's.
- Transient parts (activations, torch AdamW's step temporaries, the transformers engine's sampling: KV cache,
  prefill, logits) and how phases combine: trainer.plan_memory. The sampling copy of the policy that the
  overlapped rollout (max_staleness >= 1) samples from: one more copy of the weights in the dtype
  (trainer.learning.rl_trainer: a deep copy of the merged policy); the frozen reference when kl_coef > 0 likewise.
  The static decode path keeps its KV cache and its captured graph's pool between calls
  (trainer.policies.static_decode), so on GPUs they are held during the update as well; so are torch's cuBLAS
  workspaces (`cuda_workspaces`, trainer.plan_memory).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from simulator.user.spec import SimulatorSpec
from trainer.config import TrainConfig
from trainer.plan_memory import (
    DTYPE_BYTES,
    GIB,
    activation_bytes,
    cuda_workspace_bytes,
    decode_graph_bytes,
    dialogue_tokens,
    kv_bytes_per_token,
    micro_batch_tokens,
    optimizer_step_bytes,
    sampling_bytes,
    transient_notes,
    transient_peak,
)
from trainer.plan_shapes import (
    VLLM_GPU_MEMORY_UTILIZATION,
    Hardware,
    ModelShape,
    model_shape,
    model_state_bytes,
    vllm_bytes,
)

__all__ = ["DTYPE_BYTES", "GIB", "activation_bytes", "kv_bytes_per_token", "make_plan", "plan_config"]
PAPER_GPU_MEMORY_GIB = 80.0  # assumed for a GPU plan when neither --gpu-memory nor a local GPU says


@dataclass
class Plan:
    per_gpu_gib: float
    parts: dict[str, float]
    fits: bool
    seconds_per_step: Optional[float]
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"per_gpu_gib": self.per_gpu_gib, "parts": self.parts, "fits": self.fits,
                "seconds_per_step": self.seconds_per_step, "notes": self.notes, **self.extra}


def offload_settings(config: TrainConfig) -> tuple[bool, bool]:
    """(optimizer offloaded, parameters offloaded) from the config's DeepSpeed JSON, if it names one."""
    if not config.deepspeed_config:
        return False, False
    import json

    from simulator.access import current_access

    path = current_access().path("deepspeed_config", config.deepspeed_config)  # checked before it is opened
    zero = json.loads(path.read_text()).get("zero_optimization", {})
    on = lambda key: (zero.get(key) or {}).get("device", "none") not in ("none", None)  # noqa: E731
    return on("offload_optimizer"), on("offload_param")


def resolve_hardware(config: TrainConfig, gpus: Optional[int], nodes: Optional[int],
                     memory_gib: Optional[float]) -> tuple[Hardware, bool]:
    """(Hardware, whether its memory was given or read rather than assumed). device 'auto' plans for GPUs
    when --gpus is given or the dtype is 16-bit (the lab trains 16-bit only on GPUs), else for this CPU."""
    device = config.device if config.device != "auto" else \
        ("cuda" if gpus is not None or config.dtype != "float32" else "cpu")
    gpus, nodes = gpus or 1, nodes or 1
    if memory_gib is not None:
        return Hardware(device, gpus, nodes, float(memory_gib), "--gpu-memory"), True
    if device == "cpu":
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
        return Hardware(device, gpus, nodes, round(ram, 1), "this machine's RAM"), True
    import torch

    if torch.cuda.is_available():
        total = torch.cuda.get_device_properties(0).total_memory / GIB
        return Hardware(device, gpus, nodes, round(total, 1), "this machine's GPU 0"), True
    return Hardware(device, gpus, nodes, PAPER_GPU_MEMORY_GIB, "assumed (no --gpu-memory, no local GPU)"), False


def _gib(n: float) -> float:
    return round(n / GIB, 2)


def make_plan(config: TrainConfig, policy: ModelShape, critic: Optional[ModelShape], hw: Hardware,
              memory_known: bool = True, seconds_per_step: Optional[float] = None,
              first_prompt: Optional[int] = None, simulator_bytes: int = 0) -> Plan:
    """The memory plan of `config` on `hw`; `critic` is the critic's base model (PPO only); first_prompt: the
    longest first prompt's tokens, which bounds a one-turn dialogue; simulator_bytes: the offline simulator's
    models in the process (trainer.plan_offline)."""
    prompt, row = dialogue_tokens(config, first_prompt)
    dtype_bytes = DTYPE_BYTES[config.dtype]
    offload_opt, offload_params = offload_settings(config)
    stage = config.zero_stage
    trainable = policy.lora_params if config.lora else policy.total_params

    def states(shape: ModelShape, train: int, off_opt: bool, off_params: bool, zero: int) -> tuple[int, int]:
        return model_state_bytes(shape.total_params, train, shape.largest_layer_params, zero, hw, dtype_bytes,
                                 off_opt, off_params)

    parts: dict[str, int] = {}
    parts["policy_weights"], parts["policy_grads_optimizer"] = states(policy, trainable, offload_opt,
                                                                      offload_params, stage)
    critic_total = 0
    if config.algorithm == "ppo" and critic is not None:  # the backbone without its LM head, plus a value head
        critic_total = critic.total_params - critic.lm_head_params + critic.hidden + 1
        crit = replace(critic, total_params=critic_total,
                       largest_layer_params=min(critic.largest_layer_params, critic_total))
        parts["critic_weights"], parts["critic_grads_optimizer"] = states(crit, critic_total, offload_opt,
                                                                          offload_params, stage)
    if config.kl_coef > 0:
        parts["reference_weights"] = policy.total_params * dtype_bytes
    overlapped = config.max_staleness > 0
    if overlapped and config.rollout_backend == "transformers":
        parts["sampling_policy_copy"] = policy.total_params * dtype_bytes
    if config.rollout_backend == "vllm":
        parts["vllm_weights"], parts["vllm_kv_cache"] = vllm_bytes(policy, config, hw, memory_known)
    act = {ck: activation_bytes(policy, config, hw.device, ck, row) for ck in (True, False)}
    if critic is not None and critic is not policy and config.algorithm == "ppo":  # another critic model
        act = {ck: max(v, activation_bytes(critic, config, hw.device, ck, row)) for ck, v in act.items()}
    critic_trainable = critic_total if config.algorithm == "ppo" else 0
    transients = {"activations": act[config.gradient_checkpointing],
                  "optimizer_step_temp": optimizer_step_bytes(policy, max(trainable, critic_trainable), config,
                                                              hw.device)}
    if config.rollout_backend == "transformers":
        transients.update(sampling_bytes(policy, config, hw.device, hw.total_gpus, prompt))
        if hw.device == "cuda":  # the static path keeps its cache (and graph) between calls
            parts["sampling_kv_cache"] = transients.pop("sampling_kv_cache")
            parts["sampling_decode_graph"] = decode_graph_bytes(policy, config, hw.total_gpus)
    if hw.device == "cuda":
        parts["cuda_workspaces"] = cuda_workspace_bytes(config.rollout_backend == "transformers")
    if simulator_bytes:
        parts["simulator_models"] = simulator_bytes
    parts["transient_peak"] = transient_peak(transients, overlapped)
    total = sum(parts.values())
    fits = total <= hw.memory_gib * GIB
    notes = _notes(config, policy, hw, memory_known, stage, offload_opt, offload_params, trainable, parts, row)
    notes += transient_notes(config, overlapped)
    if config.rollout_backend == "vllm":
        need = kv_bytes_per_token(policy) * config.max_dialogue_tokens
        if parts["vllm_kv_cache"] < need:
            fits = False
            notes.append(f"does not fit: vLLM's KV cache ({_gib(parts['vllm_kv_cache'])} GiB) cannot hold one "
                         f"dialogue of max_dialogue_tokens ({_gib(need)} GiB); vLLM would refuse to start")
    if total > hw.memory_gib * GIB:
        biggest = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        notes.append(f"does not fit: {_gib(total)} GiB needed per {'GPU' if hw.device == 'cuda' else 'process'} "
                     f"of {hw.memory_gib:g} GiB; largest parts: "
                     + ", ".join(f"{k} {_gib(v)} GiB" for k, v in biggest))
    trained = [(policy, trainable)] + ([(crit, critic_total)] if critic_total else [])
    by_zero = {}
    for label, zero, off_opt, off_par in (("none", 0, False, False), ("zero1", 1, False, False),
                                          ("zero2", 2, False, False), ("zero2+offload", 2, True, False),
                                          ("zero3", 3, False, False), ("zero3+offload", 3, True, True)):
        by_zero[label] = _gib(sum(sum(states(s, t, off_opt, off_par, zero)) for s, t in trained))
    extra = {"device": hw.device, "gpus": hw.total_gpus, "memory_gib": hw.memory_gib,
             "params": {"policy": policy.total_params, "trainable": trainable, "critic": critic_total},
             "model_states_by_zero_gib": by_zero,
             "activations_gib": {"gradient_checkpointing": _gib(act[True]), "none": _gib(act[False])},
             "transients": {k: _gib(v) for k, v in transients.items()}}
    return Plan(_gib(total), {k: _gib(v) for k, v in parts.items()}, fits, seconds_per_step, notes, extra)


def _notes(config: TrainConfig, policy: ModelShape, hw: Hardware, memory_known: bool, stage: int,
           offload_opt: bool, offload_params: bool, trainable: int, parts: dict[str, int], row: int) -> list[str]:
    where = (f"{hw.nodes} node(s) x {hw.gpus_per_node} GPU(s) of {hw.memory_gib:g} GiB ({hw.memory_source})"
             if hw.device == "cuda" else f"this CPU, one process, {hw.memory_gib:g} GiB ({hw.memory_source}); "
                                         "the parts are per process, in RAM")
    length = ("max_dialogue_tokens, an upper bound" if row == config.max_dialogue_tokens
              else "the longest first prompt and its reply")
    batch = (f"micro-batches of at most {micro_batch_tokens(config, row)} padded tokens"
             if config.max_tokens_per_micro_batch else f"b={config.micro_batch_size}")
    notes = [f"planned for {where}",
             f"parameters: {policy.name} {policy.total_params:,} ({trainable:,} trained"
             f"{', LoRA r=' + str(config.lora_r) if config.lora else ''}); from {policy.source}",
             "model states: " + ("torch AdamW without DeepSpeed, in " + config.dtype if stage == 0 else
                                 f"DeepSpeed ZeRO-{stage} estimator (offload optimizer: {offload_opt}, "
                                 f"parameters: {offload_params})"),
             f"activations: the tensors autograd keeps per decoder layer (RMSNorm, attention, gated MLP of width "
             f"{policy.intermediate}), s={row} ({length}), "
             f"{batch}, gradient checkpointing {'on' if config.gradient_checkpointing else 'off'}, "
             "plus the loss's logits at the policy's tokens"]
    if config.algorithm == "ppo":
        notes.append("the critic's activations come after the policy's backward and are not added")
    if config.advantage != "dialogue":
        notes.append(f"advantage {config.advantage}: per-turn arithmetic on [dialogues, replies] tensors, no memory "
                     "part of its own; a step's time is the probe's (it trains with this estimator)")
    if config.rollout_backend == "vllm":
        notes.append(f"vLLM KV cache: {VLLM_GPU_MEMORY_UTILIZATION:g} of the GPU (gpu_memory_utilization) less "
                     "its weights" if hw.device == "cuda" and memory_known else
                     f"vLLM KV cache: {-(-config.dialogues_per_step // hw.total_gpus)} dialogue(s) per rank x "
                     f"{config.max_dialogue_tokens} tokens x {kv_bytes_per_token(policy)} bytes per token")
    if hw.device == "cuda":
        notes.append("cuda_workspaces: torch's cuBLAS workspace of every (handle, stream) pair the learner and the "
                     "sampler use; sampling_decode_graph: the static decode step's CUDA-graph pool and static inputs "
                     "(trainer.plan_memory)")
    if not memory_known:
        notes.append(f"GPU memory {hw.memory_gib:g} GiB is assumed: pass --gpu-memory")
    if SimulatorSpec(config.simulator).kind == "offline" and hw.device == "cpu" and "simulator_models" not in parts:
        notes.append("the offline simulator's own models (SmolLM2, MiniLM) are not counted: not on this machine")
    return notes


def plan_config(config: TrainConfig, gpus: Optional[int] = None, nodes: Optional[int] = None,
                memory_gib: Optional[float] = None, probe: bool = True, probe_limit_s: Optional[float] = None) -> Plan:
    """The whole plan of a config: shapes from the model configs, the hardware, and on CPU the one-step
    probe's seconds_per_step (trainer.plan_probe; only against the offline simulator, where it costs no
    API calls). ValueError when a model's parameters cannot be counted."""
    hw, known = resolve_hardware(config, gpus, nodes, memory_gib)
    targets = tuple(config.lora_target_modules) if config.lora else ()
    policy = model_shape(config.model, config.lora_r if config.lora else 0, targets)
    critic = None
    if config.algorithm == "ppo":
        critic = model_shape(config.critic_model) if config.critic_model else policy
    from trainer.plan_offline import longest_first_prompt, simulator_model_bytes

    first = longest_first_prompt(config) if config.max_turns == 1 else None
    simulator = simulator_model_bytes(config) if hw.device == "cpu" else None
    seconds, probe_note = None, "seconds_per_step: null on a GPU plan (no probe is run)"
    if hw.device == "cpu":
        if not probe:
            probe_note = "seconds_per_step not measured (probe turned off)"
        elif SimulatorSpec(config.simulator).kind != "offline":
            probe_note = "seconds_per_step not measured: the simulator is an API and a probe would spend calls"
        else:
            from trainer.plan_probe import PROBE_LIMIT_S, ProbeTimeLimit, measure_seconds_per_step

            try:
                result = measure_seconds_per_step(config, probe_limit_s or PROBE_LIMIT_S)
                seconds, probe_note = result.seconds_per_step, result.note
                measured_on = {"threads": result.threads, "load_during": result.load_during}
            except ProbeTimeLimit as exc:
                probe_note = f"seconds_per_step not measured: {exc}"
            except (RuntimeError, OSError, ValueError) as exc:
                probe_note = f"seconds_per_step not measured: the probe step failed ({exc})"
    plan = make_plan(config, policy, critic, hw, known, seconds, first[0] if first else None,
                     simulator[0] if simulator else 0)
    plan.notes += ([f"sampling and activations at {first[0]} prompt tokens, not max_dialogue_tokens: {first[1]}"]
                   if first else []) + ([f"simulator_models: {simulator[1]}"] if simulator else [])
    if seconds is not None:
        from trainer.plan_probe import measured_step_memory

        measured_step_memory(plan, result.step_memory_bytes)
        plan.extra["measured_on"] = measured_on
    plan.notes.append(probe_note)
    plan.extra["steps"] = config.steps
    plan.extra["estimated_hours"] = round(seconds * config.steps / 3600, 2) if seconds is not None else None
    return plan
