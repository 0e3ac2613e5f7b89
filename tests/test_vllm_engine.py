"""The vLLM engine for real (vllm-cpu on CPU machines) with the tiny model: sampling, log-probs that
training can reproduce, per-request seeds, pushing new weights, and a rollout on top of it."""
from __future__ import annotations

import os

import pytest
import torch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir):
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: keep the test small
    from trainer.engines import make_engine

    engine = make_engine(f"vllm:{tiny_model_dir}", dtype="float32", max_model_len=1024)
    yield engine
    engine.close()


def _hf_logprobs(model, prompt, sampled):
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + sampled])).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(sampled)[:, None])[:, 0]


def test_vllm_generates_with_logprobs_training_can_reproduce(vllm_engine, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from trainer.engines import SamplingConfig

    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    chats = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "I failed the exam today."}]]
    gens = vllm_engine.generate(chats, SamplingConfig(max_new_tokens=8, seed=3))
    for chat, g in zip(chats, gens):
        assert g.prompt_ids == vllm_engine.encode_chat(chat)
        assert 1 <= len(g.token_ids) == len(g.logprobs) <= 8
        assert g.finish_reason in ("stop", "length")
        assert torch.allclose(torch.tensor(g.logprobs), _hf_logprobs(hf, g.prompt_ids, g.token_ids), atol=1e-3)
    same = vllm_engine.generate(chats[:1] * 4, SamplingConfig(max_new_tokens=8, seed=3))
    assert len({tuple(g.token_ids) for g in same}) > 1  # one seed per request: a group does not collapse


def test_vllm_load_weights_from_a_state_dict(vllm_engine, tmp_path):
    from transformers import AutoModelForCausalLM

    from trainer.engines import SamplingConfig
    from trainer.tiny_model import build_tiny_model

    other = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "other", seed=7))
    vllm_engine.load_weights(other.state_dict())
    [g] = vllm_engine.generate([[{"role": "user", "content": "hello"}]], SamplingConfig(max_new_tokens=6, seed=1))
    assert torch.allclose(torch.tensor(g.logprobs), _hf_logprobs(other, g.prompt_ids, g.token_ids), atol=1e-3)


def test_rollout_on_vllm_is_exact(vllm_engine, tmp_path):
    from transformers import AutoModelForCausalLM

    from tests.test_rollout import Factory, profile
    from trainer.rollout import RolloutConfig, RolloutEngine
    from trainer.tiny_model import build_tiny_model

    weights = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "w", seed=7))
    vllm_engine.load_weights(weights.state_dict())
    samples = RolloutEngine(vllm_engine, Factory({"ann": 2, "bob": 3}),
                            config=RolloutConfig(max_new_tokens=6)).run([profile("ann"), profile("bob")])
    assert [s.n_turns for s in samples] == [2, 3]
    for s in samples:
        [(ids, mask, old)] = s.rows()
        pos = [i for i, m in enumerate(mask) if m]
        new = _hf_logprobs(weights, ids[:1], ids[1:])
        assert torch.allclose(new[[p - 1 for p in pos]], torch.tensor([old[p] for p in pos]), atol=1e-3)
