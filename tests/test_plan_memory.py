"""New for issue 33 (GPU truth): the memory plan is an upper bound of what a step holds (trainer.plan_memory).

Measured reference points (benchmarks/gpu_check.py and tests/test_gpu.py on one H200, torch 2.11 cu130, transformers
5.19.0, commit 5e83a50, 2026-11-26, and three cases again at 9e13f41, 2026-11-28; docs/presets-and-plan.md has
the table): random Qwen2 of Qwen2.5-1.5B's shape,
16 dialogues x 3 turns x 96 new tokens, max_dialogue_tokens 1024, micro-batch 4, bf16; and tests/test_gpu.py's
0.12 B model (8 dialogues x 2 turns x 32 new tokens, max_dialogue_tokens 512, micro-batch 2). The plan must lie
between the peak allocated and 1.25 x the peak reserved memory (torch.cuda.max_memory_allocated / _reserved).
"""
from __future__ import annotations

import pytest
import torch

from trainer import plan as memory_plan
from trainer import plan_memory, plan_shapes
from trainer.config import TrainConfig

GPU_RUN = dict(max_turns=3, max_new_tokens=96, max_dialogue_tokens=1024, dialogues_per_step=16, minibatch_size=8,
               micro_batch_size=4, dtype="bfloat16", device="cuda", rollout_backend="transformers")
SMALL_RUN = dict(max_turns=2, max_new_tokens=32, max_dialogue_tokens=512, dialogues_per_step=8, minibatch_size=4,
                 micro_batch_size=2, dtype="bfloat16", device="cuda", rollout_backend="transformers", group_size=4)
QWEN_1P5B = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2)  # benchmarks/gpu_check.FULL_SHAPE
SMALL = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=8, num_attention_heads=8,
             num_key_value_heads=2)  # tests/test_gpu.SMALL
# (case, run, settings, shape, peak allocated GiB, peak reserved GiB) measured on the H200
H200_MEASURED = [
    ("ppo-full", GPU_RUN, {"algorithm": "ppo"}, QWEN_1P5B, 27.16, 31.34),
    ("grpo-full", GPU_RUN, {"algorithm": "grpo", "group_size": 4}, QWEN_1P5B, 17.32, 19.82),
    ("grpo-overlap", GPU_RUN, {"algorithm": "grpo", "group_size": 4, "max_staleness": 1}, QWEN_1P5B, 19.96, 23.25),
    ("ppo-lora-gc", GPU_RUN, {"algorithm": "ppo", "lora": True, "gradient_checkpointing": True}, QWEN_1P5B,
     15.25, 16.80),
    # measured again 2026-11-28 at commit 9e13f41 (static decode path, kept caches; docs/results.md)
    ("ppo-full-9e13f41", GPU_RUN, {"algorithm": "ppo"}, QWEN_1P5B, 26.61, 33.42),
    ("ppo-overlap-9e13f41", {**GPU_RUN, "steps": 3}, {"algorithm": "ppo", "max_staleness": 1}, QWEN_1P5B, 29.50, 36.27),
    ("grpo-full-9e13f41", GPU_RUN, {"algorithm": "grpo", "group_size": 4}, QWEN_1P5B, 16.84, 22.88),
    ("small-ppo", SMALL_RUN, {"algorithm": "ppo"}, SMALL, 2.35, 2.45),
    ("small-grpo", SMALL_RUN, {"algorithm": "grpo"}, SMALL, 1.43, 1.49),
]


def _shape(dims: dict, lora_r: int = 0, targets: tuple[str, ...] = ()) -> plan_shapes.ModelShape:
    from transformers import Qwen2Config

    cfg = Qwen2Config(vocab_size=512, tie_word_embeddings=False, **dims)
    return plan_shapes.shape_from_config(cfg, "qwen2-shape", "benchmarks/gpu_check's config numbers", lora_r, targets)


def _qwen_1p5b_shape() -> plan_shapes.ModelShape:
    return _shape(QWEN_1P5B)


def _hw(device: str = "cuda", memory: float = 139.8) -> plan_shapes.Hardware:
    return plan_shapes.Hardware(device, 1, 1, memory, "test")


@pytest.mark.parametrize("case, run, extra, dims, allocated, reserved", H200_MEASURED,
                         ids=[c[0] for c in H200_MEASURED])
def test_plan_lies_between_the_measured_h200_peaks(monkeypatch, case: str, run: dict, extra: dict, dims: dict,
                                                   allocated: float, reserved: float):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    config = TrainConfig(**{**run, **extra})
    targets = tuple(config.lora_target_modules) if config.lora else ()
    shape = _shape(dims, config.lora_r if config.lora else 0, targets)
    if dims is QWEN_1P5B:
        assert shape.total_params == 1_311_913_472  # the 1.31 B gpu_check reports
    plan = memory_plan.make_plan(config, shape, _shape(dims) if config.algorithm == "ppo" else None, _hw())
    assert allocated <= plan.per_gpu_gib <= 1.25 * reserved, (plan.per_gpu_gib, plan.parts)
    assert plan.per_gpu_gib == pytest.approx(sum(plan.parts.values()), abs=0.05)
    assert {"sampling_kv_cache", "sampling_decode_graph", "cuda_workspaces"} <= set(plan.parts)
    assert set(plan.extra["transients"]) == {"activations", "optimizer_step_temp", "sampling_prefill",
                                             "sampling_logits", "sampling_kept_kv"}
    assert any(n.startswith("transient_peak: ") for n in plan.notes)
    assert any(n.startswith("cuda_workspaces: ") for n in plan.notes)


def test_cublas_workspaces_follow_torch_defaults_and_the_environment(monkeypatch):
    assert plan_memory.cublas_workspace_bytes(None, (9, 0)) == 32 * 2 ** 20  # Hopper
    assert plan_memory.cublas_workspace_bytes(None, (8, 0)) == (4096 * 2 + 16 * 8) * 1024  # ":4096:2:16:8" before it
    assert plan_memory.cublas_workspace_bytes(None, None) == 32 * 2 ** 20  # no GPU at hand: the larger
    assert plan_memory.cublas_workspace_bytes(":4096:1", (9, 0)) == 4 * 2 ** 20
    assert plan_memory.cublas_workspace_bytes(":16:8", (9, 0)) == 128 * 1024
    assert plan_memory.cublas_workspace_bytes("bogus", (8, 6)) == (4096 * 2 + 16 * 8) * 1024  # torch ignores it too
    shape = _shape(QWEN_1P5B)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    none = memory_plan.make_plan(TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4), shape, None, _hw())
    assert none.parts["cuda_workspaces"] == 0
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    vllm = memory_plan.make_plan(TrainConfig(**{**GPU_RUN, "rollout_backend": "vllm"}, algorithm="grpo", group_size=4),
                                 shape, None, _hw())
    static = memory_plan.make_plan(TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4), shape, None, _hw())
    pair = 32 * 2 ** 20 / memory_plan.GIB
    assert vllm.parts["cuda_workspaces"] == pytest.approx(plan_memory.LEARNER_BLAS_PAIRS * pair, abs=0.01)
    assert static.parts["cuda_workspaces"] == pytest.approx(
        (plan_memory.LEARNER_BLAS_PAIRS + plan_memory.SAMPLING_BLAS_PAIRS + plan_memory.STATIC_GRAPH_BLAS_PAIRS) * pair, abs=0.01)
    assert "sampling_decode_graph" not in vllm.parts


def test_decode_graph_grows_with_the_batch_and_the_cache_length():
    shape = _shape(QWEN_1P5B)
    base = TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4)
    one = plan_memory.decode_graph_bytes(shape, base, 1)
    assert plan_memory.static_graph_batch_length(base, 1) == (16, 1280)  # 1024 + 96 rounded up to 5 x 256
    assert plan_memory.decode_graph_bytes(shape, base, 2) == one // 2  # 8 rows per GPU
    longer = TrainConfig(**{**GPU_RUN, "max_dialogue_tokens": 2048}, algorithm="grpo", group_size=4)
    assert plan_memory.decode_graph_bytes(shape, longer, 1) > one


def test_lora_dropout_keeps_its_inputs_and_masks():
    shape = _shape(QWEN_1P5B, 16, ("q_proj", "k_proj", "v_proj", "o_proj"))
    plain = TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4, lora=True)
    dropped = TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4, lora=True, lora_dropout=0.1)
    s, b, h = 1024, 4, 1536
    extra = plan_memory.activation_bytes(shape, dropped, "cuda", False) - plan_memory.activation_bytes(shape, plain, "cuda", False)
    assert extra == 28 * s * b * 4 * h * (2 + 1)  # 28 layers x 4 projections of input width h, bf16 copy + mask


def test_overlap_kl_and_engine_add_the_parts_they_hold():
    shape = _qwen_1p5b_shape()
    base = TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4)
    on_policy = memory_plan.make_plan(base, shape, None, _hw())
    overlapped = memory_plan.make_plan(TrainConfig(**{**GPU_RUN, "max_staleness": 1}, algorithm="grpo", group_size=4),
                             shape, None, _hw())
    assert overlapped.parts["sampling_policy_copy"] == pytest.approx(shape.total_params * 2 / memory_plan.GIB, abs=0.01)
    t = on_policy.extra["transients"]
    phases = max(t["activations"], t["optimizer_step_temp"], t["sampling_prefill"] + t["sampling_logits"])
    assert on_policy.parts["transient_peak"] == pytest.approx(phases, abs=0.02)
    # overlapped: sampling (twice the rows) runs during the update, so the phases add up
    assert overlapped.parts["transient_peak"] > on_policy.parts["transient_peak"] + t["sampling_prefill"]
    with_kl = memory_plan.make_plan(TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4, kl_coef=0.1), shape, None, _hw())
    assert with_kl.parts["reference_weights"] == overlapped.parts["sampling_policy_copy"]
    on_cpu = memory_plan.make_plan(TrainConfig(**{**GPU_RUN, "device": "cpu"}, algorithm="grpo", group_size=4), shape, None,
                         _hw("cpu", 24))
    assert "sampling_kv_cache" not in on_cpu.parts and "sampling_kv_cache" in on_cpu.extra["transients"]
    zero2 = memory_plan.make_plan(TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4, deepspeed="zero2"), shape, None, _hw())
    assert zero2.extra["transients"]["optimizer_step_temp"] == 0  # DeepSpeed steps in place


def test_gradient_checkpointing_and_lora_shrink_the_learner_phase():
    shape = _qwen_1p5b_shape()
    full = memory_plan.make_plan(TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4), shape, None, _hw())
    light = memory_plan.make_plan(TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4, lora=True, gradient_checkpointing=True),
                        _shape(QWEN_1P5B, 16, ("q_proj", "k_proj", "v_proj", "o_proj")),
                        None, _hw())
    assert light.extra["transients"]["activations"] < full.extra["transients"]["activations"] / 5
    assert light.extra["transients"]["optimizer_step_temp"] * 50 < full.extra["transients"]["optimizer_step_temp"]


def test_a_trained_16bit_heads_float32_gradient_sum_is_counted():
    """The head's backward sums its weight's gradient in a float32 [V, H] buffer (trainer.learning.head_logprobs):
    counted for a trained bfloat16 head, not for a float32 one (the buffer is the gradient) nor a frozen one."""
    shape = _qwen_1p5b_shape()
    v_h = 4 * shape.vocab * shape.hidden
    assert plan_memory.head_grad_bytes(shape, 2) == v_h and plan_memory.head_grad_bytes(shape, 4) == 0
    assert plan_memory.logit_chunk_bytes(shape, 4096, 2, trained_head=True) == \
        plan_memory.logit_chunk_bytes(shape, 4096, 2) + v_h
    config = TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4)
    assert config.dtype == "bfloat16" and not config.lora
    lora = TrainConfig(**GPU_RUN, algorithm="grpo", group_size=4, lora=True, lora_dropout=0.0)
    tokens = plan_memory.micro_batch_tokens(config)
    lora_part = plan_memory.layer_activation_bytes(shape, tokens, 1, 2, "cuda", lora.lora_r, 4) - \
        plan_memory.layer_activation_bytes(shape, tokens, 1, 2, "cuda", 0, 0)  # lora_A's outputs, one layer
    trained = plan_memory.activation_bytes(shape, config, "cuda", True)
    assert trained - plan_memory.activation_bytes(shape, lora, "cuda", True) == v_h - lora_part


def test_static_cache_bucket_matches_the_engine():
    from trainer.policies.kept_caches import MAX_KEPT
    from trainer.policies.static_decode import CACHE_BUCKET, PREFILL_TOKENS

    assert plan_memory.STATIC_CACHE_BUCKET == CACHE_BUCKET
    assert plan_memory.STATIC_PREFILL_TOKENS == PREFILL_TOKENS
    assert plan_memory.KEPT_DIALOGUES == MAX_KEPT


def test_the_caches_kept_between_turns_are_a_sampling_part_on_both_decode_paths():
    shape = _qwen_1p5b_shape()
    config = TrainConfig(**{**GPU_RUN, "device": "cpu"}, algorithm="grpo", group_size=4)
    rows = min(config.dialogues_per_step, plan_memory.KEPT_DIALOGUES)
    per_dialogue = config.max_dialogue_tokens * plan_memory.kv_bytes_per_token(shape, 2)
    assert plan_memory.sampling_bytes(shape, config, "cpu", 1)["sampling_kept_kv"] == rows * per_dialogue
    # the static path copies each row's cache into its static cache as it is made: two rows in flight
    assert plan_memory.sampling_bytes(shape, config, "cuda", 1)["sampling_kept_kv"] == (rows + 2) * per_dialogue
    one_reply = TrainConfig(**{**GPU_RUN, "device": "cpu", "max_turns": 1}, algorithm="grpo", group_size=4)
    for device in ("cpu", "cuda"):
        assert "sampling_kept_kv" not in plan_memory.sampling_bytes(shape, one_reply, device, 1)


def test_activation_formula_bounds_what_autograd_keeps(tiny_model_dir):
    """On CPU, the bytes of every tensor autograd saves in the learner's forward of the tiny Qwen2 (counted once
    per storage), with a right-padded row, stay under the formula, which is not looser than 3x."""
    from trainer.learning.learner import Learner, make_batch

    shape = plan_shapes.model_shape(str(tiny_model_dir))
    s, b = 256, 2
    config = TrainConfig(model=str(tiny_model_dir), algorithm="grpo", max_dialogue_tokens=s, micro_batch_size=b,
                         max_turns=1, max_new_tokens=s, dtype="float32", entropy_coef=0.01)
    learner = Learner(config, tiny_model_dir)
    ids = torch.randint(3, shape.vocab, (b, s), generator=torch.Generator().manual_seed(0)).tolist()
    batch = make_batch([{"input_ids": ids[0], "action_mask": [0] + [1] * (s - 1), "reward": 1.0, "group_id": 0},
                        {"input_ids": ids[1][:200], "action_mask": [0] + [1] * 199, "reward": 0.0, "group_id": 0}],
                       pad_token_id=0)  # the second row is right-padded
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    ids_t, attn, _ = learner._rows(batch, torch.arange(b))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp, ent = learner._logprobs(learner.policy, ids_t, attn, batch.action_mask, with_entropy=True)
        (lp.sum() + ent.sum()).backward()
    params = {p.untyped_storage().data_ptr() for p in learner.policy.module.parameters()}
    measured = sum(n for ptr, n in storages.items() if ptr not in params)
    bound = plan_memory.activation_bytes(shape, config, "cpu", checkpointing=False)
    assert measured <= bound <= 3 * measured, (measured, bound)


def test_cpu_probe_measures_no_more_than_the_plan_per_process(tiny_model_dir, tmp_path):
    """The probe's two real steps on CPU add to the process (peak resident size less the size before them) no
    more than the plan's per-process figure for the same config without the probe. The simulator is the
    rule-based outside user: the offline simulator's own models (SmolLM2, MiniLM) are not a part of the plan.
    The process first holds and frees half a GiB, as a test run's process has before it: the peak counted is
    the steps' own."""
    from helpers import tiny_train_config

    from trainer.plan_probe import measure_seconds_per_step

    config = TrainConfig.from_yaml(tiny_train_config(tmp_path, tiny_model_dir, dialogues_per_step=8, minibatch_size=4,
                                                     simulator="python:docs/examples/rule_user.py:make_user"))
    formula = memory_plan.plan_config(config, memory_gib=16, probe=False)
    bigger = bytearray(512 * 2**20)  # an earlier, bigger piece of work in this process must not count
    bigger[::4096] = b"x" * len(range(0, len(bigger), 4096))
    del bigger
    measured = measure_seconds_per_step(config).step_memory_bytes / memory_plan.GIB
    assert formula.extra["device"] == "cpu"
    assert measured <= formula.per_gpu_gib, (measured, formula.parts)


def _large_vocab_model(tiny_model_dir, folder):
    """The tiny Qwen2 with Qwen2.5's 152,064-id vocabulary (its tokenizer's ids are a prefix, as Qwen's are)."""
    import shutil

    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_dir)
    config.vocab_size = 152_064
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        if (tiny_model_dir / name).exists():
            shutil.copy(tiny_model_dir / name, folder / name)
    return folder


@pytest.mark.model
def test_learner_phase_peak_lies_within_the_plan_and_a_quarter_below_it(tiny_model_dir, tmp_path):
    """Real peak <= plan <= 1.25 x real peak, on CPU, for an update of rows that fill max_dialogue_tokens with
    policy tokens, on a large-vocabulary tiny model (where the loss's LM head is most of the step): the peak
    resident size the update adds (trainer.plan_probe's measure) against the plan's learner phase (activations
    of one micro-batch, the optimizer's step temporary) plus the gradients and AdamW states it allocates."""
    from trainer.learning.learner import Learner, make_batch
    from trainer.plan_probe import peak_rss_bytes, reset_peak_rss, rss_bytes

    folder = _large_vocab_model(tiny_model_dir, tmp_path / "large-vocab")
    s = 1024
    config = TrainConfig(model=str(folder), algorithm="grpo", group_size=2, dialogues_per_step=4, minibatch_size=4,
                         micro_batch_size=2, max_turns=1, max_new_tokens=s, max_dialogue_tokens=s, dtype="float32",
                         entropy_coef=0.01)
    learner = Learner(config, folder)
    gen = torch.Generator().manual_seed(0)
    batch = make_batch([{"input_ids": torch.randint(3, 500, (s,), generator=gen).tolist(),
                         "action_mask": [0] + [1] * (s - 1), "reward": float(i % 2), "group_id": i // 2}
                        for i in range(4)], pad_token_id=0)
    before = rss_bytes()
    reset = reset_peak_rss()
    learner.update(batch)
    measured = peak_rss_bytes(reset) - before
    shape = plan_shapes.model_shape(str(folder))
    plan = memory_plan.make_plan(config, shape, None, plan_shapes.Hardware("cpu", 1, 1, 16.0, "test"))
    learner_phase = max(plan.extra["transients"]["activations"], plan.extra["transients"]["optimizer_step_temp"])
    planned = (learner_phase + plan.parts["policy_grads_optimizer"]) * memory_plan.GIB
    assert shape.vocab == 152_064 and plan_memory.logit_chunk_bytes(shape, 2 * s, 4) > 0.8 * planned
    assert measured <= planned <= 1.25 * measured, (measured / memory_plan.GIB, planned / memory_plan.GIB)


def test_a_one_turn_dialogue_is_counted_at_its_longest_first_prompt_and_a_budget_at_one_minibatch():
    one_turn = TrainConfig(max_turns=1, max_new_tokens=48, max_dialogue_tokens=2048, dialogues_per_step=32,
                           minibatch_size=8, micro_batch_size=4, max_tokens_per_micro_batch=2048)
    assert plan_memory.dialogue_tokens(one_turn, 115) == (115, 163)
    assert plan_memory.dialogue_tokens(one_turn, None) == (2048, 2048)  # not counted: the budget's cap
    assert plan_memory.dialogue_tokens(TrainConfig(max_turns=3, max_dialogue_tokens=2048), 115) == (2048, 2048)
    assert plan_memory.micro_batch_tokens(one_turn, 163) == 8 * 163  # one minibatch's rows, under the budget
    assert plan_memory.micro_batch_tokens(one_turn) == 2048
    assert plan_memory.micro_batch_tokens(TrainConfig(micro_batch_size=4, max_dialogue_tokens=512)) == 4 * 512


@pytest.mark.model
def test_the_cpu_demo_counts_its_first_prompt_and_the_simulators_models():
    """cpu-demo's plan without the probe (what a job's admission and log use) within 1.25x of the probe's
    measured 3.39 GiB (2026-11-28) and 3.47 GiB (2026-11-24): it counts the offline simulator's models and the
    one-turn dialogue at its longest first prompt, not at max_dialogue_tokens."""
    from trainer.presets import preset_dict

    plan = memory_plan.plan_config(TrainConfig.from_dict(preset_dict("cpu-demo")), probe=False)
    assert plan.extra["device"] == "cpu" and plan.parts["simulator_models"] > 0.5
    assert any(n.startswith("sampling and activations at ") for n in plan.notes)
    assert 3.39 / 1.25 <= plan.per_gpu_gib <= 3.39 * 1.25, plan.parts
