"""TrainConfig: every setting of a training run, with the RLVER paper's hyperparameters as defaults.

Defaults follow RLVER (arXiv 2507.03112, see ../shared/docs/rlver-reference.md): actor lr 1e-6, critic lr
5e-6, clip 0.2, entropy coefficient 0.001, 1 PPO epoch, 32 dialogues per step, no KL penalty, temperature
1.0, 9 judged policy replies against the "rlver-hard" simulator preset (RLVER's released training simulator:
start 30, unclamped changes; its rollout's `turns > max_turns` with max_turns 8 judges 9 replies), GAE with
gamma = lambda = 1, GRPO with 4 rollouts per profile sharing one generated opening and eps 1e-6. The paper's
warmup (actor 0.02, critic 0.05 of the updates) is in its configs (configs/paper-*.yaml), off by default.
Settings that depart from the paper (reward shaping, LoRA) are off by default and say so.

Simulator presets: "training" (old name of "rlver-hard") loads as "rlver-hard" with a warning
(simulator.user.rules.RULE_SET_ALIASES); settings renamed since (RENAMED_SETTINGS: `engine` is now
`rollout_backend`) are read under their new name with a warning, so stored runs and old YAML files load.

YAML: `TrainConfig.from_yaml(path)`, `cfg.to_yaml(path)`; `validate()` raises ConfigError, `errors`: field -> problem.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from simulator.access import path_field
from simulator.user.rules import RULE_SET_ALIASES
from trainer.config_rules import GROUP_ALGORITHMS, config_errors

log = logging.getLogger(__name__)

RECORDED_KEYS = ("personas", "ray_ranks")  # written on a job's config by its run (what it resolved), never settings
# settings given under an old name: read under the new one, with a warning (both given: an error)
RENAMED_SETTINGS = {"engine": "rollout_backend"}


class ConfigError(ValueError):
    """Invalid config: `errors` maps field name -> problem."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("invalid training config: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))


@dataclass
class TrainConfig:
    # --- what is trained, against what
    model: str = path_field("policy", "default")  # 'default' = SmolLM2-135M-Instruct, or a local Hugging Face folder
    critic_model: str = path_field("policy")  # PPO critic: '' = a copy of the policy with a value head, or a folder
    persona_set: Union[str, list[str]] = path_field("personas", "builtin:train")  # a persona spec (simulator.personas.specs): builtin |
    # builtin:train | builtin:heldout | built-in id(s) | [id, ...] | file:PATH (profiles JSONL, lab or RLVER format)
    simulator: str = path_field("simulator", "offline")  # offline (scorer v3) | offline:v2 | openai:MODEL
    simulator_base_url: str = path_field("endpoint")  # an endpoint name or URL (simulator.endpoints)
    prompt_pack: str = path_field("pack", "own")  # openai simulator prompts: own | own:json | sage:DIR | rlver:DIR | v1
    calibration: str = ""  # a calibration of the simulator's changes by name (python -m simulator calibrate)
    simulator_temperature: Optional[float] = None  # openai simulator sampling (None: the backend's default)
    simulator_max_tokens: Optional[int] = None
    # openai simulator traffic per endpoint (simulator.llm.traffic); not in the fingerprint: they change
    # when answers come, not what they say
    simulator_max_in_flight: int = 32  # requests in flight
    simulator_requests_per_minute: int = 0  # 0 = no limit
    simulator_max_retries: int = 4  # retries of a call on 429, 5xx, timeouts, dropped connections
    simulator_preset: str = "rlver-hard"  # RLVER's released training simulator (start 30, unclamped); which
    # simulator trained the paper's best model is not settled (rlver-moderate: the benchmark's start and clamp)
    # (a rule set of simulator.user.rules.RULE_SETS; the setting keeps its old name, stored in every run)
    algorithm: str = "ppo"  # ppo | grpo | rloo | reinforce_pp
    mode: str = "direct"  # think (think-then-say) | direct
    rollout_backend: str = "transformers"  # what samples the rollouts: transformers (HFEngine) | vllm (VLLMEngine)
    rollout_schedule: str = "async"  # async (each dialogue at its own pace) | rounds (every round waits for all)
    # --- schedule
    steps: int = 1000
    dialogues_per_step: int = 32  # rollouts per step (profiles per step = dialogues_per_step / group_size)
    group_size: int = 4  # rollouts per profile for grpo / rloo (ppo and reinforce_pp use 1)
    minibatch_size: int = 32  # dialogues per optimizer step (32: one update per rollout batch)
    micro_batch_size: int = 4  # dialogues per forward/backward (gradient accumulation; memory only)
    max_tokens_per_micro_batch: int = 0  # > 0: micro-batches by padded tokens instead (trainer.learning.batch)
    ppo_epochs: int = 1
    # --- optimisation
    actor_lr: float = 1e-6
    critic_lr: float = 5e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lr_scheduler: str = "constant"  # constant | linear | cosine (after the warmup)
    warmup_steps: int = 0  # linear warmup of both optimizers, in updates (0: use the ratios below)
    actor_warmup_ratio: float = 0.0  # policy warmup as a share of all updates (the paper: 0.02)
    critic_warmup_ratio: float = 0.0  # critic warmup as a share of all updates (the paper: 0.05)
    clip_eps: float = 0.2  # PPO ratio clip
    value_clip_eps: float = 0.2
    entropy_coef: float = 0.001
    kl_coef: float = 0.0  # KL penalty to a frozen copy of the initial policy (0 = off, as in the paper)
    kl_estimator: str = "k3"  # k1 | k3
    gamma: float = 1.0
    lam: float = 1.0
    adv_eps: float = 1e-6  # GRPO: (r - mean) / (std + eps)
    whiten_advantages: bool = True  # PPO: GAE advantages normalised over the batch's policy tokens (the paper's verl)
    # --- rollout
    temperature: float = 1.0
    top_p: float = 1.0
    max_turns: int = 8  # policy replies per dialogue (rlver-hard judges up to 9: RLVER's released rollout)
    max_new_tokens: int = 256  # per policy turn
    max_dialogue_tokens: int = 4096  # whole dialogue (prompt + every turn)
    shared_opening: bool = True  # grpo / rloo: a group's rollouts share one generated opening (RLVER clones
    # the group's simulators from one that has spoken); matters only for profiles without a scripted first line
    # the reward of a finished dialogue: final_emotion (the paper's max(final emotion / 100, 0), with the shaping
    # below) | emotion_deltas (per-turn credit, a deviation: each reply earns the emotion change it caused,
    # trainer.learning.algorithms.emotion_delta_rewards) | python:MODULE:FUNCTION or python:PATH.py:FUNCTION (outside
    # code: f(RolloutSample) -> float, or a list with one reward per policy turn; its file's hash is recorded
    # with the job, simulator.user.outside)
    reward: str = "final_emotion"
    # advantages (docs/training.md#turn-level-advantages; a DEVIATION unless 'dialogue'): dialogue (the algorithm's
    # own, per dialogue) | turn_grpo (grpo: plus turn_weight x each reply's emotion change normalised in its group
    # at that turn) | turn_gae (ppo: GAE across turns, the critic read where each reply starts)
    advantage: str = "dialogue"
    turn_weight: float = 1.0  # turn_grpo: weight of the per-turn term against the dialogue's advantage
    turn_gamma: float = 1.0  # turn_gae: discount per turn (lam is GAE's lambda across turns too)
    # --- reward shaping: DEVIATIONS from the paper (reward = max(final emotion / 100, 0)); all off
    reward_turn_delta_coef: float = 0.0
    reward_length_penalty: float = 0.0
    reward_length_target: int = 0
    # --- LoRA (peft): a deviation for small machines; the paper fine-tuned every weight
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    # --- systems
    deepspeed: str = "none"  # none | zero1 | zero2 | zero3 (launch with the `deepspeed` launcher)
    deepspeed_config: str = path_field("file")  # optional JSON file merged over the generated DeepSpeed config
    dtype: str = "float32"  # training dtype (bfloat16 on GPUs)
    gradient_checkpointing: bool = False
    device: str = "auto"  # auto | cpu | cuda
    gpus: int = 0  # GPUs of one node the job asks for (the ray backend: through Ray, one rank each); 0 = none asked
    nodes: int = 1  # nodes the job spans (the ray backend): gpus ranks on each, one CPU rank each with gpus 0
    seed: int = 0
    output_dir: str = path_field("folder")  # '' = the job's folder (lab_home()/jobs/ID)
    save_every: int = 50  # checkpoint every K steps (and at the last step); 0 = only at the end
    keep_checkpoints: int = 3  # newest checkpoints kept on disk (0 = all)
    store_dialogues: bool = True  # write every rollout dialogue and turn to the store
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])  # tensorboard | wandb | mlflow |
    # trackio | none: where each step's metrics and sample dialogues also go (trainer/learning/tracking.py)
    # --- overlapped training (trainer/learning/overlap.py, docs/training-overlap.md); a DEVIATION from the paper when on
    max_staleness: int = 0  # 0: roll out, then update (on-policy, the paper). k >= 1: the dialogues of the next
    # k steps keep talking with their simulated users while the learner updates; a dialogue is trained only
    # when its oldest reply was sampled at most k updates before the learner's weights
    off_policy_estimator: str = "decoupled_ppo"  # how stale tokens (max_staleness >= 1) are weighed:
    # decoupled_ppo (AReaL: clip against the update's start, times pi_prox / pi_behaviour, tokens whose weight
    # exceeds the cap left out) | truncated_is (verl's TIS: the weight truncated at the cap)
    behaviour_weight_cap: float = 2.0  # the cap on pi_prox / pi_behaviour of stale tokens
    weight_bucket_mb: int = 512  # weights pushed into a separate sampling engine (vllm, or the overlap's copy)
    # travel in buckets of whole layers up to this size (trainer/policies/weight_stream.py), not as a full copy
    partial_rollouts: bool = True  # max_staleness >= 1: a dialogue in flight during a weight push continues
    # under the new weights, each reply keeping its version; False: every dialogue ends on the weights it
    # started with (a push waits until the dialogues in flight have ended, so the slowest no longer overlaps)

    def __post_init__(self) -> None:
        old = self.simulator_preset
        if isinstance(old, str) and old in RULE_SET_ALIASES:
            self.simulator_preset = RULE_SET_ALIASES[old]
            log.warning("simulator_preset %r is the old name of %r; using %r", old, self.simulator_preset,
                        self.simulator_preset)

    # ------------------------------------------------------------------------------------------ derived
    def warmup_updates(self, ratio: float, total_updates: int) -> int:
        """Warmup length in updates: warmup_steps when set, else int(ratio * total_updates) (as verl)."""
        return self.warmup_steps or int(ratio * total_updates)

    @property
    def effective_group_size(self) -> int:
        return self.group_size if self.algorithm in GROUP_ALGORITHMS else 1

    @property
    def profiles_per_step(self) -> int:
        return max(1, self.dialogues_per_step // self.effective_group_size)

    @property
    def zero_stage(self) -> int:
        """0 when DeepSpeed is off, else the ZeRO stage."""
        return 0 if self.deepspeed == "none" else int(self.deepspeed[-1])

    # ------------------------------------------------------------------------------------------- I/O
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """Build from a dict; unknown keys and wrong types are errors naming the field."""
        if not isinstance(data, dict):
            raise ConfigError({"config": f"must be a mapping, got {type(data).__name__}"})
        names = {f.name: f for f in fields(cls)}
        data = {k: v for k, v in data.items() if k not in RECORDED_KEYS}
        errors: dict[str, str] = {}
        for old, new in RENAMED_SETTINGS.items():
            if old in data:
                if new in data:
                    errors[old] = f"the old name of {new}; give only {new}"
                else:
                    log.warning("setting %r is the old name of %r; read as %r", old, new, new)
                    data = {(new if k == old else k): v for k, v in data.items()}
        errors.update({k: "unknown setting" for k in data if k not in names and k not in errors})
        if "deepspeed" in data and isinstance(data["deepspeed"], (int, type(None))) and \
                not isinstance(data["deepspeed"], bool):
            data = dict(data, deepspeed="none" if not data["deepspeed"] else f"zero{data['deepspeed']}")
        kwargs = {}
        defaults = cls()
        for key, value in data.items():
            if key not in names:
                continue
            default = getattr(defaults, key)
            if default is None:  # optional settings: empty, or checked by errors()
                ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            elif isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, float):
                if isinstance(value, str):  # YAML 1.1 reads 1e-6 (no dot) as text
                    try:
                        value = float(value)
                    except ValueError:
                        pass
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                value = float(value) if ok else value
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif key == "persona_set":
                ok = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
            elif isinstance(default, list):
                ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            else:
                ok = isinstance(value, str)
            if not ok:
                kind = "a number or empty" if default is None else type(default).__name__
                errors[key] = f"must be {kind}, got {type(value).__name__} {value!r:.60}"
            else:
                kwargs[key] = value
        if errors:
            raise ConfigError(errors)
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path: Union[str, Path]) -> "TrainConfig":
        path = Path(path)
        if not path.is_file():
            raise ConfigError({"config": f"file {str(path)!r} not found"})
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError({"config": f"{path} is not valid YAML ({exc})"}) from None
        return cls.from_dict(data)

    def to_yaml(self, path: Optional[Union[str, Path]] = None) -> str:
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        if path is not None:
            Path(path).write_text(text)
        return text

    def errors(self, check_paths: bool = True) -> dict[str, str]:
        """Field -> problem for every invalid setting (empty when valid). check_paths: also check that the
        model folders and profile files exist (trainer.config_rules)."""
        return config_errors(self, check_paths)

    def validate(self, check_paths: bool = True) -> "TrainConfig":
        errs = self.errors(check_paths)
        if errs:
            raise ConfigError(errs)
        return self
