"""The learner's log-probs are those of the model's own forward for every architecture that processes its logits
after the LM head (a final softcap, a logit scale): tiny random models of each, built here from their configs,
against the full forward's log-probs, entropies and gradients; a config carrying such a setting for an
architecture the lab does not know is refused in one line naming it, and a forward that processes its logits
in a way no config declares is refused at its first step."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import CONFIG_MAPPING, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from trainer.config import TrainConfig
from trainer.learning.head_logprobs import model_logprobs
from trainer.learning.logits.processing import LogitProcessing, logit_processing

SIZES = dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, eos_token_id=1, pad_token_id=0, bos_token_id=2)
# each architecture with its logit setting away from the identity (a softcap the logits reach, a scale != 1)
ARCHITECTURES = {
    "gemma2": {"final_logit_softcapping": 3.0},
    "gemma3_text": {"final_logit_softcapping": 3.0},
    "recurrent_gemma": {"logits_soft_cap": 3.0},
    "cohere": {"logit_scale": 0.25},
    "cohere2": {"logit_scale": 0.25},
    "granite": {"logits_scaling": 4.0},
    "granitemoe": {"logits_scaling": 4.0, "num_local_experts": 2, "num_experts_per_tok": 1},
    "hyperclovax": {"logits_scaling": 0.5},
}


def _tiny(model_type: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type](**SIZES, **ARCHITECTURES[model_type]))
    with torch.no_grad():  # logits of several nats, where a softcap of 3 bends them
        model.get_output_embeddings().weight.mul_(60.0)
    return model.float()


@pytest.mark.parametrize("model_type", sorted(ARCHITECTURES))
def test_logprobs_entropy_and_gradients_equal_the_models_own_forward(model_type: str):
    model = _tiny(model_type)
    assert not logit_processing(model.config).identity
    ids = torch.randint(3, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    on = torch.ones(2, 8, dtype=torch.bool)
    on[0, :3] = False  # the prompt's positions: not through the head
    weights = torch.randn(2, 8, generator=torch.Generator().manual_seed(2))[on]

    def run(full: bool):
        model.zero_grad(set_to_none=True)
        if full:
            logp = torch.log_softmax(model(input_ids=ids).logits[:, :-1].float() / 0.7, -1)
            lp, ent = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)[on], -(logp.exp() * logp).sum(-1)[on]
        else:
            lp, ent = model_logprobs(model, model, ids, None, on, 0.7, True, chunk=5)
        ((lp * weights).sum() + ent.sum()).backward()
        return lp.detach(), ent.detach(), {k: p.grad.clone() for k, p in model.named_parameters()
                                           if p.grad is not None}

    lp_full, ent_full, g_full = run(True)
    assert lp_full.min() < -2.0  # the processing matters at these logits
    lp, ent, g = run(False)
    torch.testing.assert_close(lp, lp_full, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ent, ent_full, atol=1e-4, rtol=1e-4)
    assert g.keys() == g_full.keys() and g
    for name in g:
        scale = float(g_full[name].abs().max())  # float32 sums of terms this large
        torch.testing.assert_close(g[name], g_full[name], atol=1e-4 + 1e-5 * scale, rtol=1e-3, msg=name)


def test_each_setting_is_read_with_its_direction():
    assert logit_processing({"model_type": "gemma2", "final_logit_softcapping": 30.0}) == LogitProcessing(1.0, 30.0)
    assert logit_processing({"model_type": "gemma3", "text_config": {"final_logit_softcapping": 30.0}}).softcap == 30
    assert logit_processing({"model_type": "gemma3_text", "final_logit_softcapping": None}).identity
    assert logit_processing({"model_type": "cohere", "logit_scale": 0.0625}).scale == 0.0625
    assert logit_processing({"model_type": "granite", "logits_scaling": 8.0}).scale == 0.125
    assert logit_processing({"model_type": "hyperclovax", "logits_scaling": 2.0}).scale == 2.0
    assert logit_processing({"model_type": "minicpm3", "dim_model_base": 256, "hidden_size": 2560}).scale == 0.1
    assert logit_processing({"model_type": "falcon_h1", "lm_head_multiplier": 0.5}).scale == 0.5
    assert logit_processing({"model_type": "qwen2", "vocab_size": 10}).identity


def _folder(tmp_path: Path, tiny_model_dir: Path, **changes) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    for f in tiny_model_dir.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def test_a_setting_the_lab_cannot_apply_is_refused_at_config_time(tmp_path: Path, tiny_model_dir: Path):
    folder = _folder(tmp_path, tiny_model_dir, logits_scaling=4.0)
    errors = TrainConfig(model=str(folder), device="cpu").errors()
    assert errors["model"].startswith("logits_scaling: model type qwen2 sets logits_scaling = 4.0"), errors
    assert "\n" not in errors["model"]
    with pytest.raises(ValueError, match="final_logit_softcapping: a logit softcap must be a positive number"):
        logit_processing({"model_type": "gemma2", "final_logit_softcapping": -1})
    assert "model" not in TrainConfig(model=str(tiny_model_dir), device="cpu").errors()


class _HalvedLogits(LlamaForCausalLM):
    """An architecture that processes its logits after the head without a config setting (as remote code may)."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = out.logits * 0.5
        return out


def test_a_forward_that_processes_its_logits_otherwise_is_refused_at_its_first_step():
    torch.manual_seed(0)
    model = _HalvedLogits(LlamaConfig(**SIZES))
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(60.0)
    ids = torch.randint(3, 97, (1, 6))
    with pytest.raises(ValueError, match="model type llama: the LM head's output differs from the model's own"):
        model_logprobs(model, model, ids, None, torch.ones(1, 5, dtype=torch.bool), 1.0, False)
    plain = LlamaForCausalLM(LlamaConfig(**SIZES))
    lp, _ = model_logprobs(plain, plain, ids, None, torch.ones(1, 5, dtype=torch.bool), 1.0, False)
    assert lp.shape == (5,) and bool((lp < 0).all())
