"""The offline tiny chat model used by the tests."""
from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from testkit.tiny_model import build_tiny_model


def test_tiny_model_builds_loads_and_trains(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert 50_000 < model.num_parameters() < 200_000
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    text = tok.apply_chat_template([{"role": "system", "content": "Be kind."},
                                    {"role": "user", "content": "I feel sad."}],
                                   tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nI feel sad.<|im_end|>\n" \
                   "<|im_start|>assistant\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.decode(tok("<think>why</think> Hi!", add_special_tokens=False)["input_ids"]) == "<think>why</think> Hi!"
    out = model(torch.tensor([ids]), labels=torch.tensor([ids]))
    out.loss.backward()
    assert torch.isfinite(out.loss) and model.model.embed_tokens.weight.grad is not None


def test_build_is_cached_per_path(tiny_model_dir):
    before = (tiny_model_dir / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert (tiny_model_dir / "model.safetensors").stat().st_mtime_ns == before
