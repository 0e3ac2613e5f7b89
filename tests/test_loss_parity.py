"""The lab's losses are the field's: on a fixed batch, the GRPO loss and its gradients equal TRL's own
GRPOTrainer._compute_loss (trl, in the `test` extra) for the same settings, and the PPO pieces (token GAE, the
clipped surrogate, the clipped value loss, token-mean aggregation) equal verl's published formulas
(verl.trainer.ppo.core_algos: compute_gae_advantage_return, compute_policy_loss_vanilla, compute_value_loss,
agg_loss "token-mean"), written out here from its source because verl itself cannot be installed beside the
lab's pinned transformers (verl 0.9.1 requires transformers < 5.11)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainer.learning import algorithms
from trainer.learning.head_logprobs import model_logprobs

B, P, C = 4, 3, 5  # rows, prompt tokens, completion tokens
COMPLETION_MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])


def _fixed_batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"prompt_ids": torch.randint(5, 50, (B, P), generator=g), "prompt_mask": torch.ones(B, P, dtype=torch.long),
            "completion_ids": torch.randint(5, 50, (B, C), generator=g), "completion_mask": COMPLETION_MASK,
            "advantages": torch.tensor([0.9, -0.9, 1.2, -1.2])}


@pytest.mark.slow
@pytest.mark.model
def test_grpo_loss_and_gradients_equal_trls(tiny_model_dir: Path, tmp_path: Path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    temperature, clip, beta, entropy_coef = 0.7, 0.2, 0.04, 0.01
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=B, num_generations=2,
                      max_completion_length=C, loss_type="bnpo", beta=beta, epsilon=clip, temperature=temperature,
                      entropy_coef=entropy_coef, report_to="none", use_cpu=True, save_strategy="no", bf16=False,
                      use_bias_correction_kl=False)  # TRL's default weighs the KL by the ratio; RLVER's does not
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=args,
                          train_dataset=Dataset.from_list([{"prompt": "hi"}] * B),
                          processing_class=AutoTokenizer.from_pretrained(tiny_model_dir))
    trainer.current_gradient_accumulation_steps = 1  # set by its training_step; one micro-batch here
    batch = _fixed_batch()
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    on = torch.zeros(B, P + C - 1, dtype=torch.bool)
    on[:, P - 1:] = COMPLETION_MASK.bool()  # column t predicts token t + 1: the completion's tokens
    with torch.no_grad():
        current, _ = model_logprobs(model, model, ids, None, on, temperature, False)
    # old and reference log-probs away from the current ones, so the ratios cross both clip bounds
    shift = torch.linspace(-0.5, 0.5, int(on.sum()))
    old_on, ref_on = current + shift, current - 0.3 * shift.flip(0)
    full = lambda x: torch.zeros(B, C).masked_scatter(COMPLETION_MASK.bool(), x)  # noqa: E731

    def trl_loss() -> torch.Tensor:
        model.train()
        return trainer._compute_loss(model, {**batch, "old_per_token_logps": full(old_on),
                                             "ref_per_token_logps": full(ref_on)})

    def lab_loss() -> torch.Tensor:
        lp, ent = model_logprobs(model, model, ids, None, on, temperature, True)
        m, adv = torch.ones_like(lp), batch["advantages"][:, None].expand(B, C)[COMPLETION_MASK.bool()]
        pg, clip_frac, _ = algorithms.ppo_policy_loss(lp, old_on, adv, m, clip)
        assert 0 < float(clip_frac) < 1
        kl = algorithms.masked_sum_mean(algorithms.kl_penalty(lp, ref_on, "k3"), m)
        return pg - entropy_coef * algorithms.masked_sum_mean(ent, m) + beta * kl

    grads = []
    for loss_fn in (trl_loss, lab_loss):
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        grads.append((loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}))
    (trl_value, trl_grads), (lab_value, lab_grads) = grads
    assert float(trl_value.abs()) > 1e-3
    # TRL's log-probs come from its own fused LM head (a different float32 summation order): 1e-4 relative
    torch.testing.assert_close(lab_value, trl_value, atol=1e-7, rtol=1e-5)
    assert lab_grads.keys() == trl_grads.keys() and lab_grads
    for name in lab_grads:
        a, b = lab_grads[name], trl_grads[name]
        assert float((a - b).norm() / b.norm()) < 1e-5, (name, float((a - b).norm() / b.norm()))


# --- PPO: verl's formulas (verl.trainer.ppo.core_algos), on the response tokens of each row ---------------------

def _verl_gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float):
    """compute_gae_advantage_return: backwards over the tokens; a token off the mask carries the next value and
    the running advantage through unchanged; returns = advantages + values (unwhitened here)."""
    next_value = torch.zeros(rewards.shape[0])
    running = torch.zeros(rewards.shape[0])
    out = torch.zeros_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        candidate = delta + gamma * lam * running
        next_value = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_value
        running = candidate * mask[:, t] + (1 - mask[:, t]) * running
        out[:, t] = running
    return out, out + values


def _verl_token_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (loss * mask).sum() / mask.sum()


def _verl_policy_loss(logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, clip: float,
                      dual_clip: float = 3.0) -> torch.Tensor:
    """compute_policy_loss_vanilla: the clipped surrogate, and for A < 0 at most -A * clip_ratio_c (dual clip)."""
    ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    clipped = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip, 1 + clip))
    return _verl_token_mean(torch.where(adv < 0, torch.minimum(-adv * dual_clip, clipped), clipped), mask)


def _verl_value_loss(v: torch.Tensor, v_old: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
                     clip: float) -> torch.Tensor:
    """compute_value_loss: 0.5 x token-mean of max((V - R)^2, (clip(V, V_old +- clip) - R)^2)."""
    v_clipped = torch.clamp(v, v_old - clip, v_old + clip)
    return 0.5 * _verl_token_mean(torch.maximum((v - returns) ** 2, (v_clipped - returns) ** 2), mask)


def test_ppo_advantages_losses_and_gradients_equal_verls_formulas():
    g = torch.Generator().manual_seed(3)
    mask = COMPLETION_MASK.float()
    mask[0, 2] = 0.0  # a user token inside a dialogue: skipped by both
    rewards = torch.zeros(B, C)
    rewards[torch.arange(B), torch.tensor([4, 2, 3, 4])] = torch.tensor([0.8, 0.1, 0.5, 0.3])
    old_values = torch.rand(B, C, generator=g)
    for gamma, lam in ((1.0, 1.0), (0.99, 0.95)):
        adv, returns = algorithms.gae_advantages(rewards, old_values, mask, gamma, lam)
        verl_adv, verl_returns = _verl_gae(rewards, old_values, mask, gamma, lam)
        torch.testing.assert_close(adv, verl_adv * mask)  # the lab zeroes off-mask entries; verl masks them later
        torch.testing.assert_close(returns, verl_returns * mask)
    old_logp = -torch.rand(B, C, generator=g) * 3 - 0.5
    logits = (old_logp + torch.linspace(-0.6, 0.6, B * C).reshape(B, C)).requires_grad_(True)  # ratios e^+-0.6
    values = (old_values + torch.linspace(-0.4, 0.4, B * C).reshape(B, C)).requires_grad_(True)
    lab = algorithms.ppo_policy_loss(logits, old_logp, adv, mask, 0.2)[0] + \
        algorithms.value_loss(values, old_values, returns, mask, 0.2)[0]
    verl = _verl_policy_loss(logits, old_logp, adv, mask, 0.2) + \
        _verl_value_loss(values, old_values, returns, mask, 0.2)
    lab_grads = torch.autograd.grad(lab, (logits, values))
    verl_grads = torch.autograd.grad(verl, (logits, values))
    torch.testing.assert_close(lab, verl)
    for a, b in zip(lab_grads, verl_grads):
        assert b.abs().max() > 0
        torch.testing.assert_close(a, b)
