"""Which values each setting of a TrainConfig takes, and the rules between settings: field -> problem."""
from __future__ import annotations

from typing import Any

from simulator.access import config_errors as access_errors
from simulator.personas.specs import spec_error as persona_spec_error
from simulator.user.rules import RULE_SETS
from simulator.user.spec import SimulatorSpec
from trainer.learning.overlap import overlap_errors
from trainer.learning.tracking import report_to_error
from trainer.rollout.types import SCHEDULES

ALGORITHMS = ("ppo", "grpo", "rloo", "reinforce_pp")
# how a dialogue's reward becomes token advantages (trainer.learning.algorithms): dialogue (the algorithm's own
# estimator, the paper) | turn_grpo (grpo only) | turn_gae (ppo only); each turn estimator's algorithm:
ADVANTAGES = {"dialogue": ALGORITHMS, "turn_grpo": ("grpo",), "turn_gae": ("ppo",)}
GROUP_ALGORITHMS = ("grpo", "rloo")  # advantages need several rollouts of the same profile
MODES = ("think", "direct")
ROLLOUT_BACKENDS = ("transformers", "vllm")  # the policy engine that samples the rollouts: HFEngine | VLLMEngine
DEEPSPEED = ("none", "zero1", "zero2", "zero3")
DTYPES = ("float32", "bfloat16", "float16")
SCHEDULERS = ("constant", "linear", "cosine")
SIMULATOR_RULE_SETS = tuple(RULE_SETS)  # the names simulator_preset takes


def config_errors(cfg: Any, check_paths: bool = True) -> dict[str, str]:
    """Field -> problem for every invalid setting (empty when valid). check_paths: also check that the
    model folders and profile files exist."""
    e: dict[str, str] = {}

    def choice(name: str, allowed: tuple) -> None:
        if getattr(cfg, name) not in allowed:
            e[name] = f"unknown value {getattr(cfg, name)!r}; one of {', '.join(allowed)}"

    choice("algorithm", ALGORITHMS)
    choice("mode", MODES)
    choice("rollout_backend", ROLLOUT_BACKENDS)
    choice("rollout_schedule", SCHEDULES)
    choice("deepspeed", DEEPSPEED)
    choice("dtype", DTYPES)
    choice("lr_scheduler", SCHEDULERS)
    choice("simulator_preset", SIMULATOR_RULE_SETS)
    # the simulated user's spec, pack, sampling and traffic limits (its preset is checked just above)
    e.update({k: v for k, v in SimulatorSpec.from_config(cfg).errors().items() if k != "rules"})
    choice("kl_estimator", ("k1", "k3"))
    choice("device", ("auto", "cpu", "cuda"))
    for name in ("actor_lr", "critic_lr"):
        if not getattr(cfg, name) > 0:
            e[name] = f"must be positive, got {getattr(cfg, name)}"
    for name in ("weight_decay", "entropy_coef", "kl_coef", "value_clip_eps", "reward_length_penalty",
                 "max_grad_norm", "turn_weight", "gpus"):
        if getattr(cfg, name) < 0:
            e[name] = f"must be >= 0, got {getattr(cfg, name)}"
    for name in ("actor_warmup_ratio", "critic_warmup_ratio"):
        if not 0 <= getattr(cfg, name) < 1:
            e[name] = f"must be in [0, 1), got {getattr(cfg, name)}"
        elif getattr(cfg, name) and cfg.warmup_steps:
            e[name] = f"set warmup_steps ({cfg.warmup_steps}) or the warmup ratios, not both"
    if not 0 < cfg.clip_eps < 1:
        e["clip_eps"] = f"must be in (0, 1), got {cfg.clip_eps}"
    for name in ("gamma", "lam", "turn_gamma"):
        if not 0 <= getattr(cfg, name) <= 1:
            e[name] = f"must be in [0, 1], got {getattr(cfg, name)}"
    if not cfg.adv_eps > 0:
        e["adv_eps"] = f"must be positive, got {cfg.adv_eps}"
    if not cfg.temperature > 0:
        e["temperature"] = f"must be positive for RL sampling, got {cfg.temperature}"
    if not 0 < cfg.top_p <= 1:
        e["top_p"] = f"must be in (0, 1], got {cfg.top_p}"
    for name in ("steps", "dialogues_per_step", "minibatch_size", "micro_batch_size", "ppo_epochs",
                 "max_turns", "max_new_tokens", "max_dialogue_tokens", "lora_r", "lora_alpha", "nodes"):
        if getattr(cfg, name) < 1:
            e[name] = f"must be at least 1, got {getattr(cfg, name)}"
    for name in ("save_every", "keep_checkpoints", "warmup_steps", "seed", "reward_length_target",
                 "max_tokens_per_micro_batch"):
        if getattr(cfg, name) < 0:
            e[name] = f"must be >= 0, got {getattr(cfg, name)}"
    if cfg.algorithm in GROUP_ALGORITHMS:
        if cfg.group_size < 2:
            e["group_size"] = (f"{cfg.algorithm} compares rollouts of the same profile: group_size must "
                               f"be at least 2, got {cfg.group_size}")
        elif cfg.dialogues_per_step % cfg.group_size:
            e["dialogues_per_step"] = (f"must be a multiple of group_size ({cfg.group_size}), "
                                       f"got {cfg.dialogues_per_step}")
    elif cfg.group_size < 1:
        e["group_size"] = f"must be at least 1, got {cfg.group_size}"
    if "minibatch_size" not in e and "dialogues_per_step" not in e:
        if cfg.dialogues_per_step % cfg.minibatch_size:
            e["minibatch_size"] = (f"must divide dialogues_per_step ({cfg.dialogues_per_step}), "
                                   f"got {cfg.minibatch_size}")
        elif cfg.minibatch_size % cfg.micro_batch_size:
            e["micro_batch_size"] = (f"must divide minibatch_size ({cfg.minibatch_size}), "
                                     f"got {cfg.micro_batch_size}")
    if cfg.max_new_tokens > cfg.max_dialogue_tokens:
        e["max_new_tokens"] = f"exceeds max_dialogue_tokens ({cfg.max_dialogue_tokens})"
    if not 0 <= cfg.lora_dropout < 1:
        e["lora_dropout"] = f"must be in [0, 1), got {cfg.lora_dropout}"
    if cfg.lora and not cfg.lora_target_modules:
        e["lora_target_modules"] = "must name at least one module when lora is on"
    if cfg.lora and cfg.zero_stage == 3:
        e["lora"] = "LoRA with ZeRO-3 is not supported; use zero1/zero2"
    if report_to_error(cfg.report_to):
        e["report_to"] = report_to_error(cfg.report_to)
    e.update(overlap_errors(cfg))
    if cfg.reward not in ("final_emotion", "emotion_deltas"):
        from simulator.user.outside import target_error

        e["reward"] = (target_error(cfg.reward, field="reward") if cfg.reward.startswith("python:") else
                       f"unknown reward {cfg.reward!r}; final_emotion, emotion_deltas or python:MODULE:FUNCTION")
        if not e["reward"]:
            del e["reward"]
    e.update(advantage_errors(cfg))
    e.update(persona_set_errors(cfg, check_paths))
    e.update(model_errors(cfg, check_paths))
    e.update(access_errors(cfg))  # every declared path and endpoint, refused before anything is opened
    return e

def advantage_errors(cfg: Any) -> dict[str, str]:
    if cfg.advantage not in ADVANTAGES:
        return {"advantage": f"unknown value {cfg.advantage!r}; one of {', '.join(ADVANTAGES)}"}
    if cfg.algorithm not in ADVANTAGES[cfg.advantage]:
        return {"advantage": f"{cfg.advantage} needs algorithm {' or '.join(ADVANTAGES[cfg.advantage])}, "
                             f"got {cfg.algorithm}"}
    return {}

def persona_set_errors(cfg: Any, check_paths: bool) -> dict[str, str]:
    problem = persona_spec_error(cfg.persona_set, check_paths)
    return {"persona_set": problem} if problem else {}

def model_errors(cfg: Any, check_paths: bool) -> dict[str, str]:
    """The model folders' problems (PolicySpec: the caller's Access first; with check_paths, the folder's
    content too)."""
    from simulator.llm.models import default_gguf_path
    from trainer.learning.logits.processing import model_problem
    from trainer.policies.spec import PolicySpec

    e = {}
    for name in ("model", "critic_model"):
        spec = getattr(cfg, name)
        if name == "critic_model" and not spec:
            continue
        try:
            if spec == "default" and check_paths:
                default_gguf_path()
            elif problem := (PolicySpec(spec).error() if not check_paths else  # the policy's logits too
                             name == "model" and model_problem(PolicySpec(spec).local_model())):
                e[name] = problem
        except (OSError, ValueError) as exc:
            e[name] = str(exc)
    return e
