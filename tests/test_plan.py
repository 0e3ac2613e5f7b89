"""The plan before launch (trainer.plan, trainer.plan_probe, `python -m trainer plan`) and the presets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import tiny_train_config

from trainer import plan as memory_plan
from trainer import plan_memory, plan_shapes
from trainer.config import ConfigError, TrainConfig

REPO = Path(__file__).resolve().parent.parent
PAPER_PPO = str(REPO / "configs" / "paper-ppo-qwen2.5-7b.yaml")


def _plan_cli(*args: str) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "trainer", "plan", *args, "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)  # stdout is the plan alone


@pytest.mark.process
def test_paper_ppo_fits_the_papers_hardware_and_not_one_24_gib_gpu():
    paper = _plan_cli("--config", PAPER_PPO, "--gpus", "8", "--nodes", "4", "--gpu-memory", "80")
    # the loss's logits go through the LM head a chunk of positions at a time (trainer.learning.head_logprobs):
    # the learner's phase is the layers' activations at 15,000 tokens plus one chunk, not [15,000, 152,064] floats
    assert paper["fits"] is True and paper["seconds_per_step"] is None
    assert 5 < paper["transients"]["activations"] < 12 and paper["transients"]["optimizer_step_temp"] == 0
    assert set(paper) >= {"per_gpu_gib", "parts", "fits", "seconds_per_step", "notes"}
    assert set(paper["parts"]) == {"policy_weights", "policy_grads_optimizer", "critic_weights",
                                   "critic_grads_optimizer", "transient_peak", "vllm_weights", "vllm_kv_cache",
                                   "cuda_workspaces"}  # issue 33: the learner's cuBLAS workspaces
    assert paper["per_gpu_gib"] == pytest.approx(sum(paper["parts"].values()), abs=0.05) and paper["per_gpu_gib"] <= 80
    assert paper["params"]["policy"] == 7_615_616_512  # Qwen2.5-7B's published parameter count
    assert any("published config.json" in n for n in paper["notes"])  # says where the numbers come from
    assert any("ZeRO-3" in n for n in paper["notes"])
    one = _plan_cli("--config", PAPER_PPO, "--gpus", "1", "--gpu-memory", "24")
    assert one["fits"] is False and one["per_gpu_gib"] > 24
    verdict = next(n for n in one["notes"] if n.startswith("does not fit: ") and "largest parts" in n)
    assert "policy_grads_optimizer" in verdict and "critic_grads_optimizer" in verdict
    # ZeRO-3 partitions the model states: 32 GPUs hold far less of them each than one does
    assert paper["parts"]["policy_grads_optimizer"] * 20 < one["parts"]["policy_grads_optimizer"]


@pytest.mark.process
def test_the_plan_has_the_shape_the_job_runs():
    """No --nodes / --gpus: the config's `nodes` and `gpus`, the shape its job runs on the ray backend (nodes x
    gpus ranks); flags that differ from the config are planned, and a note says how to train that shape."""
    own = _plan_cli("--config", PAPER_PPO, "--set", "nodes=4", "--set", "gpus=8", "--gpu-memory", "80")
    flags = _plan_cli("--config", PAPER_PPO, "--gpus", "8", "--nodes", "4", "--gpu-memory", "80")
    assert own["shape"] == flags["shape"] == {"nodes": 4, "gpus_per_node": 8, "ranks": 32}
    assert own["per_gpu_gib"] == flags["per_gpu_gib"] and own["gpus"] == 32
    assert not any("the config trains" in n for n in own["notes"])
    assert any("the config trains nodes: 1, gpus: 0" in n and "--set nodes=4 --set gpus=8" in n
               for n in flags["notes"])


@pytest.mark.process
def test_plan_cli_refuses_bad_input_naming_the_flag():
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for args, expected in ((["--preset", "cpu-demo", "--gpus", "0"], "--gpus: must be at least 1"),
                           (["--gpus", "1"], "--config")):
        done = subprocess.run([sys.executable, "-m", "trainer", "plan", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and expected in done.stderr, done.stderr[-1000:]


def _hw(gpus: int = 1, nodes: int = 1, memory: float = 80.0, device: str = "cuda") -> plan_shapes.Hardware:
    return plan_shapes.Hardware(device, gpus, nodes, memory, "test")


@pytest.mark.process
def test_zero_stages_partition_what_deepspeed_says():
    total, largest = 1_000_000_000, 100_000_000
    eight = _hw(8)
    w3, s3 = plan_shapes.model_state_bytes(total, total, largest, 3, eight, 2)
    assert w3 == 4 * largest + 2 * total // 8  # the gathered layer and this GPU's share of 16-bit weights
    assert s3 == 18 * total // 8 - 2 * total // 8
    w2, s2 = plan_shapes.model_state_bytes(total, total, largest, 2, eight, 2)
    assert w2 == 2 * total and s2 == 18 * total // 8  # ZeRO-2 keeps all weights, partitions the rest
    w1, s1 = plan_shapes.model_state_bytes(total, total, largest, 1, eight, 2)
    assert w1 == w2 and s1 == s2 + int(2 * total * 7 / 8)  # ZeRO-1 also keeps full 16-bit gradients
    assert plan_shapes.model_state_bytes(total, total, largest, 2, eight, 2, offload_optimizer=True)[1] == 0
    assert plan_shapes.model_state_bytes(total, total, largest, 3, eight, 2, True, True) == (4 * largest, 0)
    w0, s0 = plan_shapes.model_state_bytes(total, 1000, largest, 0, _hw(), 4)  # plain AdamW, LoRA: 1000 trained
    assert (w0, s0) == (4 * total, 3 * 4 * 1000)


def test_shape_counts_what_the_model_holds(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    shape = plan_shapes.model_shape(str(tiny_model_dir), lora_r=4, lora_targets=("q_proj", "v_proj"))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert shape.total_params == sum(p.numel() for p in model.parameters())
    assert shape.largest_layer_params == max(p.numel() for p in model.parameters())
    assert "config.json of" in shape.source
    lora = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    assert shape.lora_params == sum(p.numel() for p in lora.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="no config.json"):
        plan_shapes.model_shape("/nowhere/SomeModel-3B")


def test_activations_formula_follows_checkpointing_batch_and_the_token_budget(tiny_model_dir):
    shape = plan_shapes.model_shape(str(tiny_model_dir))
    cfg = TrainConfig(model=str(tiny_model_dir), micro_batch_size=2, max_dialogue_tokens=1024)
    full = memory_plan.activation_bytes(shape, cfg, "cuda", checkpointing=False)
    assert memory_plan.activation_bytes(shape, cfg, "cuda", checkpointing=True) < full
    # the learner drops the padding mask, so SDPA's fused kernel keeps no s x s scores on CPU either
    assert memory_plan.activation_bytes(shape, cfg, "cpu", False) == full
    h, inter, a = shape.hidden, shape.intermediate, shape.heads  # per token and layer, float32
    layer = 1024 * 2 * (2 * (4 + 4) * h + 5 * 4 * h + 4 * 4 * inter + 4 * a)
    positions = min(cfg.max_turns * cfg.max_new_tokens, 1024) * 2
    logits = positions * shape.vocab * 16 + positions * (2 * 4 * h + 12)  # one chunk holds them all here
    assert full == layer * shape.layers + (4 + 4) * 1024 * 2 * h + logits
    # a token budget bounds the micro-batch by its tokens, not by micro_batch_size x max_dialogue_tokens
    budget = TrainConfig(model=str(tiny_model_dir), micro_batch_size=8, max_dialogue_tokens=1024,
                         max_tokens_per_micro_batch=2048)
    assert memory_plan.activation_bytes(shape, budget, "cuda", False) == full - logits + \
        plan_memory.logit_chunk_bytes(shape, 2048, 4)
    long_rows = TrainConfig(model=str(tiny_model_dir), max_dialogue_tokens=4096, max_new_tokens=512,
                            max_tokens_per_micro_batch=1024)
    assert plan_memory.micro_batch_tokens(long_rows) == 4096  # a row longer than the budget goes alone


def test_probe_config_keeps_the_step_shape_and_shrinks_the_batch():
    demo = TrainConfig(algorithm="grpo", group_size=4, dialogues_per_step=32, minibatch_size=8, micro_batch_size=4)
    small = __import__("trainer.plan_probe", fromlist=["probe_config"]).probe_config(demo)
    assert (small.dialogues_per_step, small.minibatch_size, small.micro_batch_size) == (8, 4, 4)
    assert small.errors(check_paths=False) == {}  # two minibatches: the old-log-prob pass is kept
    one = TrainConfig(algorithm="ppo", dialogues_per_step=4, minibatch_size=4, micro_batch_size=2)
    assert __import__("trainer.plan_probe", fromlist=["probe_config"]).probe_config(one).dialogues_per_step == 2


@pytest.mark.model
def test_cpu_plan_measures_a_step_of_the_tiny_model(tiny_model_dir, tmp_path):
    path = tiny_train_config(tmp_path, tiny_model_dir, steps=50, dialogues_per_step=8, minibatch_size=4)
    plan = memory_plan.plan_config(TrainConfig.from_yaml(path), memory_gib=16)
    assert plan.extra["device"] == "cpu" and plan.seconds_per_step > 0
    # one memory figure: the count (what the job's admission and log use); the probe's measure stands beside it
    assert "transient_peak" in plan.parts and plan.fits and plan.extra["measured_gib"] > 0
    counted = memory_plan.plan_config(TrainConfig.from_yaml(path), memory_gib=16, probe=False)
    assert plan.per_gpu_gib == counted.per_gpu_gib
    assert any(n.startswith(f"measured by the probe: {plan.extra['measured_gib']:g} GiB") for n in plan.notes)
    probe_note = plan.notes[-1]
    assert "one real step of 8 dialogue(s)" in probe_note and "after two warm-up steps of 4" in probe_note
    assert "torch thread(s)" in probe_note and plan.extra["measured_on"]["threads"] >= 1
    assert plan.extra["estimated_hours"] == pytest.approx(plan.seconds_per_step * 50 / 3600, abs=0.01)
    tiny = memory_plan.plan_config(TrainConfig.from_yaml(path), memory_gib=0.001, probe=False)
    assert not tiny.fits and tiny.seconds_per_step is None and "not measured" in tiny.notes[-1]


# ------------------------------------------------------------------------------------------- presets
@pytest.mark.model
def test_every_preset_is_a_valid_config_from_its_file():
    from trainer.presets import PRESETS, preset_dict

    for name, preset in PRESETS.items():
        config = TrainConfig.from_dict(preset_dict(name))
        assert config.errors(check_paths=False) == {}, name
        on_file = yaml.safe_load((REPO / "configs" / preset.config_file).read_text())
        assert preset_dict(name) == {**on_file, **preset.overrides}
    assert preset_dict("cpu-demo")["steps"] == 46 and preset_dict("cpu-demo")["model"] == "default"
    assert preset_dict("paper-ppo-7b")["mode"] == "direct" and preset_dict("paper-ppo-think-7b")["mode"] == "think"
    assert preset_dict("paper-grpo-7b")["algorithm"] == "grpo"
    with pytest.raises(ValueError, match="unknown preset 'nope'; one of cpu-demo"):
        preset_dict("nope")


def test_train_config_from_a_preset_with_a_file_over_it(tmp_path):
    from trainer.cli.train import load_config

    override = tmp_path / "short.yaml"
    override.write_text("steps: 3\nseed: 7\n")
    config = load_config(str(override), ["save_every=1"], preset="cpu-demo")
    assert (config.steps, config.seed, config.save_every) == (3, 7, 1)  # the file, then --set, over the preset
    assert (config.algorithm, config.lora, config.max_new_tokens) == ("grpo", True, 48)  # the rest: the preset's
    assert load_config(None, [], preset="paper-grpo-think-7b").dialogues_per_step == 128
    with pytest.raises(ConfigError) as err:
        load_config(None, [])
    assert "--config" in err.value.errors


@pytest.mark.model
def test_probe_runs_for_a_web_caller_prints_its_stages_and_stops_at_its_limit(tiny_model_dir, tmp_path, monkeypatch,
                                                                              capsys):
    """From the web, paths must lie in the lab's folders: the probe's trainer folder is made under the lab home
    (not in /tmp), so the Training view gets a measured time. Past its time limit the probe starts no step and the
    plan says the time was not measured, and why."""
    from simulator.access import ACCESS_ENV, Access, current_access
    from storage.db import lab_home
    from trainer.plan_probe import ProbeTimeLimit, measure_seconds_per_step

    web = Access.web(logged_in=True, allowed_paths=(str(tiny_model_dir),))
    monkeypatch.setenv(ACCESS_ENV, web.to_json())
    assert current_access().from_web
    config = TrainConfig.from_yaml(tiny_train_config(tmp_path, tiny_model_dir, dialogues_per_step=4, minibatch_size=4))
    result = measure_seconds_per_step(config)
    assert result.seconds_per_step > 0
    stages = [line for line in capsys.readouterr().err.splitlines() if line.startswith("probe: ")]
    assert any("warm-up step of 2 dialogue(s)" in s for s in stages) and "took" in stages[-1], stages  # probe_config
    assert (lab_home() / "plan-probes").is_dir() and not list((lab_home() / "plan-probes").iterdir())  # cleaned
    with pytest.raises(ProbeTimeLimit, match="time limit of 0.001 s"):
        measure_seconds_per_step(config, time_limit_s=0.001)
    plan = memory_plan.plan_config(config, memory_gib=16, probe_limit_s=0.001)
    assert plan.seconds_per_step is None and "not measured: the probe passed its time limit" in plan.notes[-1]
    assert "transient_peak" in plan.parts  # without a measured step the plan keeps its bound


@pytest.mark.model
def test_every_preset_fits_the_hardware_it_is_made_for():
    """The paper presets on 4 nodes x 8 GPUs of 80 GiB, the one-GPU presets on their GPU, cpu-demo (without its
    probe; its variants too) in the 23.5 GiB of the machine it is made for; the Training view plans each for the
    same hardware."""
    from app.services.plans.training_plan import PRESET_HARDWARE
    from trainer.presets import PRESETS, preset_dict

    expected = {"one-gpu-lora-grpo-7b": (1, 1, 80.0), "one-gpu-grpo-1.5b": (1, 1, 24.0),
                **{name: (8, 4, 80.0) for name in PRESETS if name.startswith("paper-")}}
    assert {k: v for k, v in PRESET_HARDWARE.items()} == expected
    for name in PRESETS:
        gpus, nodes, gib = PRESET_HARDWARE.get(name, (None, None, 23.5))
        plan = memory_plan.plan_config(TrainConfig.from_dict(preset_dict(name)), gpus, nodes, gib, probe=False)
        assert plan.fits and plan.per_gpu_gib <= gib, (name, plan.per_gpu_gib, plan.parts)
        assert plan.extra["device"] == ("cpu" if name.startswith("cpu-") else "cuda"), name
