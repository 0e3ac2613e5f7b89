"""Advantage estimators and losses against hand-computed values."""
from __future__ import annotations

import math

import pytest
import torch

from trainer.learning import algorithms


def close(actual: torch.Tensor, expected, atol: float = 1e-6) -> None:
    torch.testing.assert_close(actual.float(), torch.tensor(expected, dtype=torch.float32), atol=atol, rtol=1e-5)


def test_emotion_reward_is_clipped_final_emotion_over_100():
    assert algorithms.emotion_reward(85) == pytest.approx(0.85)
    assert algorithms.emotion_reward(100) == pytest.approx(1.0)
    assert algorithms.emotion_reward(-20) == 0.0
    assert algorithms.emotion_reward(None) == 0.0


def test_shaped_reward_defaults_to_paper_reward_and_shapes_when_asked():
    assert algorithms.shaped_reward(60, [30, 45, 60], 500) == pytest.approx(0.6)
    # +0.5 * (60 - 30) / 100 = +0.15
    assert algorithms.shaped_reward(60, [30, 45, 60], turn_delta_coef=0.5) == pytest.approx(0.75)
    # 1.0 * (120 - 100) / 100 = 0.2 off
    assert algorithms.shaped_reward(60, n_reply_tokens=120, length_penalty=1.0, length_target=100) == pytest.approx(0.4)


def test_rlver_reward_is_the_paper_reward_unless_configured():
    from trainer.rollout.types import RolloutSample

    s = RolloutSample(key="k", dialogue_id=None, profile_id="p", group_id="g", emotions=[30, 45, 60],
                      final_emotion=60, turn_spans=[(3, 63), (70, 130)])
    assert algorithms.rlver_reward(s) == pytest.approx(0.6)
    s.format_ok = False  # a turn broke the think format: penalised only when a penalty is configured
    assert algorithms.rlver_reward(s) == pytest.approx(0.6)
    assert algorithms.rlver_reward(s, algorithms.RewardConfig(bad_think_penalty=0.1)) == pytest.approx(0.5)
    # shaping: +0.5 * (60 - 30) / 100 and 1.0 * (120 reply tokens - 100) / 100 off
    shaped = algorithms.RewardConfig(turn_delta_coef=0.5, length_penalty=1.0, length_target=100)
    assert algorithms.rlver_reward(s, shaped) == pytest.approx(0.6 + 0.15 - 0.2)
    # no emotion at all (e.g. a failed opening) scores 0
    assert algorithms.rlver_reward(RolloutSample(key="k", dialogue_id=None, profile_id="p", group_id="g")) == 0.0


def test_grpo_advantages_hand_computed():
    scores = torch.tensor([1.0, 0.0, 0.5, 0.5, 0.2, 0.4])
    adv = algorithms.grpo_advantages(scores, ["a", "a", "a", "a", "b", "b"], eps=1e-6)
    # group a: mean 0.5, unbiased std sqrt((0.25+0.25+0+0)/3) = sqrt(1/6)
    std_a = math.sqrt(1 / 6)
    # group b: mean 0.3, std sqrt((0.01+0.01)/1) = sqrt(0.02)
    std_b = math.sqrt(0.02)
    expected = [0.5 / (std_a + 1e-6), -0.5 / (std_a + 1e-6), 0.0, 0.0, -0.1 / (std_b + 1e-6), 0.1 / (std_b + 1e-6)]
    assert adv.tolist() == pytest.approx(expected, rel=1e-5)


def test_grpo_equal_scores_and_singleton_groups_give_zero():
    adv = algorithms.grpo_advantages(torch.tensor([0.3, 0.3, 0.9]), [0, 0, 1])
    assert adv.tolist() == [0.0, 0.0, 0.0]


def test_rloo_advantages_leave_one_out():
    scores = torch.tensor([1.0, 0.0, 0.5, 0.7])
    adv = algorithms.rloo_advantages(scores, [1, 1, 1, 2])
    # 1.0 - (0.0 + 0.5)/2 = 0.75; 0.0 - 0.75 = -0.75; 0.5 - 0.5 = 0.0; singleton -> 0
    assert adv.tolist() == pytest.approx([0.75, -0.75, 0.0, 0.0])


def test_last_token_rewards_sits_on_last_policy_token():
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0]])
    r = algorithms.last_token_rewards(torch.tensor([0.7, 0.2, 0.9]), mask)
    close(r, [[0, 0, 0, 0, 0.7, 0], [0, 0, 0, 0.2, 0, 0], [0, 0, 0, 0, 0, 0]])


def test_gae_with_gamma_lambda_one_is_reward_minus_value_on_policy_tokens():
    mask = torch.tensor([[0, 1, 1, 0, 1]])
    values = torch.tensor([[9.0, 0.1, 0.2, 9.0, 0.4]])
    rewards = algorithms.last_token_rewards(torch.tensor([1.0]), mask)
    adv, ret = algorithms.gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    close(adv, [[0, 0.9, 0.8, 0, 0.6]])
    close(ret, [[0, 1.0, 1.0, 0, 1.0]])


def test_gae_discounting_skips_user_tokens():
    # policy tokens at 0, 2; user token at 1 is invisible to the recursion
    mask = torch.tensor([[1, 0, 1]])
    values = torch.tensor([[0.5, 100.0, 0.25]])
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    adv, _ = algorithms.gae_advantages(rewards, values, mask, gamma=0.9, lam=0.5)
    d2 = 1.0 - 0.25  # last policy token: r - V
    d0 = 0.0 + 0.9 * 0.25 - 0.5
    a0 = d0 + 0.9 * 0.5 * d2
    close(adv, [[a0, 0.0, d2]])


def test_reinforce_pp_normalises_returns_over_the_batch():
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    rewards = algorithms.last_token_rewards(torch.tensor([1.0, 0.0]), mask)
    adv = algorithms.reinforce_pp_advantages(rewards, mask, gamma=1.0)
    # returns on policy tokens: [1, 1] and [0, 0] -> mean 0.5, population std 0.5 -> +-1
    close(adv, [[1, 1, 0], [0, -1, -1]])


def test_ppo_policy_loss_clipping_hand_computed():
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 1.1, 2.0]]))
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    loss, clip_frac, kl = algorithms.ppo_policy_loss(new, old, adv, mask, clip_eps=0.2)
    # token 0: A>0, ratio 1.5 -> min(1.5, 1.2) = 1.2 (clipped) -> -1.2
    # token 1: A>0, ratio 0.5 -> min(0.5, 0.8) = 0.5 (unclipped) -> -0.5
    # token 2: A<0, ratio 1.1 -> max(-(-1.1), ...) = 1.1 (within range) -> 1.1
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 1.1) / 3)
    assert clip_frac.item() == pytest.approx(1 / 3)
    expected_kl = sum((r - 1) - math.log(r) for r in (1.5, 0.5, 1.1)) / 3
    assert kl.item() == pytest.approx(expected_kl, rel=1e-5)


def test_ppo_policy_loss_gradient_is_zero_where_clipped():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 1.0]])).requires_grad_(True)
    loss, _, _ = algorithms.ppo_policy_loss(new, old, torch.tensor([[1.0, 1.0]]), torch.ones(1, 2))
    loss.backward()
    assert new.grad[0, 0].item() == 0.0
    assert new.grad[0, 1].item() == pytest.approx(-0.5)  # d(-ratio)/dlogp / 2 tokens


def test_loss_denominator_makes_shards_add_up():
    # float64 and a fixed seed: the identity is exact, float32 summation order would blur it at ~1e-5.
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(4, 5, generator=g, dtype=torch.float64)
    old = logp + 0.1 * torch.randn(4, 5, generator=g, dtype=torch.float64)
    adv = torch.randn(4, 5, generator=g, dtype=torch.float64)
    mask = (torch.rand(4, 5, generator=g) > 0.3).int()
    full, _, _ = algorithms.ppo_policy_loss(logp, old, adv, mask)
    n = mask.sum()
    half1, _, _ = algorithms.ppo_policy_loss(logp[:2], old[:2], adv[:2], mask[:2], denom=n)
    half2, _, _ = algorithms.ppo_policy_loss(logp[2:], old[2:], adv[2:], mask[2:], denom=n)
    assert (half1 + half2).item() == pytest.approx(full.item(), rel=1e-5)


def test_value_loss_clipped_hand_computed():
    values = torch.tensor([[0.9, 0.1]])
    old = torch.tensor([[0.5, 0.0]])
    returns = torch.tensor([[1.0, 1.0]])
    loss, frac = algorithms.value_loss(values, old, returns, torch.ones(1, 2), clip_eps=0.2)
    # token 0: unclipped (0.9-1)^2 = 0.01, clipped V=0.7 -> 0.09 -> 0.09
    # token 1: unclipped (0.1-1)^2 = 0.81, clipped V=0.1 -> 0.81 -> 0.81 (tie: not counted as clipped)
    assert loss.item() == pytest.approx(0.5 * (0.09 + 0.81) / 2)
    assert frac.item() == pytest.approx(0.5)


def test_entropy_from_logits():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]])
    ent = algorithms.entropy_from_logits(logits)
    assert ent[0].item() == pytest.approx(math.log(4))
    assert ent[1].item() == pytest.approx(0.0, abs=1e-6)


def test_kl_penalty_estimators():
    lp = torch.log(torch.tensor([0.5]))
    ref = torch.log(torch.tensor([0.25]))
    assert algorithms.kl_penalty(lp, ref, "k1").item() == pytest.approx(math.log(2))
    assert algorithms.kl_penalty(lp, ref, "k3").item() == pytest.approx(0.5 - 1 + math.log(2))
    assert algorithms.kl_penalty(lp, lp, "k3").item() == 0.0
    with pytest.raises(ValueError, match="kl kind"):
        algorithms.kl_penalty(lp, ref, "k9")


def test_token_logprobs_matches_log_softmax():
    logits = torch.tensor([[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]])
    lp = algorithms.token_logprobs(logits, torch.tensor([[2, 1]]))
    z = math.log(math.exp(1) + math.exp(2) + math.exp(3))
    close(lp, [[3 - z, -math.log(3)]])
