"""Weights streamed from the learner in buckets of whole layers (trainer/policies/weight_stream.py): the same
tensors as the merged state dict (LoRA merged on the fly), no layer split across buckets, and an HF sampling
engine fed by the stream samples exactly as one loaded from the state dict. The vLLM side: test_vllm_engine."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainer.config import ConfigError, TrainConfig
from trainer.policies.weight_stream import bucketed, layer_key


def _learner(model: Path, **changes):
    from trainer.learning.learner import Learner

    cfg = TrainConfig(model=str(model), algorithm="grpo", group_size=2, dialogues_per_step=2, minibatch_size=2,
                      micro_batch_size=2, **changes)
    learner = Learner(cfg, model)
    with torch.no_grad():  # move every trainable weight away from its initial value, as training would
        generator = torch.Generator().manual_seed(1)
        for p in learner.policy.module.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=generator))
    return learner


def test_layer_key_names_the_decoder_layer_or_the_module():
    assert layer_key("model.layers.3.self_attn.q_proj.weight") == "model.layers.3"
    assert layer_key("model.layers.12.mlp.up_proj.weight") == "model.layers.12"
    assert layer_key("model.embed_tokens.weight") == "model.embed_tokens"
    assert layer_key("lm_head.weight") == "lm_head"


def test_buckets_keep_each_layer_whole_and_respect_the_size():
    t = torch.zeros(10)  # 40 bytes
    layers = [(f"model.layers.{i}.{p}", t) for i in range(3) for p in ("a.weight", "b.weight", "c.weight")]
    named = [("model.embed_tokens.weight", t), *layers, ("lm_head.weight", t)]
    buckets = list(bucketed(named, bucket_bytes=100))
    assert [[n for n, _ in b] for b in buckets][1] == [f"model.layers.0.{p}" for p in ("a.weight", "b.weight",
                                                                                         "c.weight")]
    assert [n for b in buckets for n, _ in b] == [n for n, _ in named]  # nothing lost, order kept
    for bucket in buckets:  # a layer over the budget is a bucket of its own; never split
        assert len({layer_key(n) for n, _ in bucket}) == 1 or sum(x.numel() * 4 for _, x in bucket) <= 100
    keys = [layer_key(n) for b in buckets for n, _ in b]
    per_bucket = [{layer_key(n) for n, _ in b} for b in buckets]
    assert all(sum(k in s for s in per_bucket) == 1 for k in set(keys))
    assert len(list(bucketed(named, bucket_bytes=1 << 30))) == 1


@pytest.mark.parametrize("lora", [False, True])
def test_the_stream_is_the_merged_state_dict(tiny_model_dir: Path, lora: bool):
    learner = _learner(tiny_model_dir, lora=lora, lora_r=4, lora_target_modules=["q_proj", "v_proj"])
    expected = {k: v.detach() for k, v in learner.merged_policy().state_dict().items()}
    streamed = [pair for bucket in learner.stream_policy_weights(bucket_bytes=1) for pair in bucket]
    assert [n for n, _ in streamed] == list(expected)
    for name, tensor in streamed:
        assert torch.allclose(tensor, expected[name], atol=1e-6), name
    if lora:  # the merge is real: the LoRA delta moved q_proj away from the base weight
        base = dict(learner.policy.module.named_parameters())
        q = "model.layers.0.self_attn.q_proj.weight"
        base_q = base["base_model.model." + q.replace(".weight", ".base_layer.weight")]
        assert not torch.equal(dict(streamed)[q], base_q)


def test_an_hf_engine_fed_by_the_stream_samples_as_one_fed_the_state_dict(tiny_model_dir: Path):
    from trainer.policies import SamplingConfig
    from trainer.policies.hf_engine import HFEngine

    learner = _learner(tiny_model_dir)
    by_dict, by_stream = HFEngine(tiny_model_dir, device="cpu"), HFEngine(tiny_model_dir, device="cpu")
    by_dict.load_weights(learner.merged_policy().state_dict())
    by_stream.load_weights(learner.stream_policy_weights(bucket_bytes=1))
    for name, tensor in by_dict.model.state_dict().items():
        assert torch.equal(tensor, by_stream.model.state_dict()[name]), name
    chat = [[{"role": "user", "content": "I failed the exam today."}]]
    a, b = (e.generate(chat, SamplingConfig(max_new_tokens=8, seed=3))[0] for e in (by_dict, by_stream))
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs
    with pytest.raises(KeyError, match="no weight named 'model.nope.weight'"):
        by_stream.load_weights({"model.nope.weight": torch.zeros(1)})


def test_weight_bucket_size_is_checked():
    with pytest.raises(ConfigError, match="weight_bucket_mb: must be a whole number of MiB >= 1, got 0"):
        TrainConfig(weight_bucket_mb=0).validate(check_paths=False)
