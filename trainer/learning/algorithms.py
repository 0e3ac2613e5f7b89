"""Advantage estimators and losses of RLVER's training, written out so the math can be read top to bottom.

Shapes: B dialogues, T token positions. `mask` is 1 on the policy's own (sampled) tokens and 0 on the
prompt, the simulated user's turns and padding: only those tokens carry advantages and losses.

Reward (RLVER, arXiv 2507.03112): one scalar per dialogue, r = max(final_emotion / 100, 0), placed on
the last policy token of the dialogue. `rlver_reward(sample, config)` is the one place it is computed; the
format penalty and the shaping terms of `RewardConfig` are deviations from the paper and are off by default.

Estimators:
- GAE (PPO, Schulman et al. 2016) over the policy's tokens only; the paper uses gamma = lambda = 1, so
  the advantage of every token is the dialogue's reward minus the critic's value at that token.
- GRPO (Shao et al. 2024): A_i = (r_i - mean(r_group)) / (std(r_group) + eps), eps = 1e-6 in RLVER.
- RLOO (Ahmadian et al. 2024): A_i = r_i - mean_{j != i} r_j (leave-one-out baseline).
- REINFORCE++ (Hu 2025): token returns normalised over the whole batch (no critic, no groups).

Turn-level estimators (`advantage: turn_grpo | turn_gae`): trainer.learning.turn_advantages.

Off-policy tokens (overlapped training): `decoupled_policy_loss` weighs tokens sampled by older weights by
pi_prox / pi_behaviour, capped (AReaL's decoupled PPO, or verl's truncated importance sampling).

Token losses are summed and divided by `denom` (the number of policy tokens in the minibatch, across all
data-parallel ranks when training is distributed), so 1 rank and N ranks give the same loss.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

import torch
from torch import Tensor

if TYPE_CHECKING:
    from trainer.rollout.types import RolloutSample

# --------------------------------------------------------------------------------------------- rewards


def emotion_reward(final_emotion: Optional[float]) -> float:
    """The paper's reward: max(final emotion / 100, 0). A dialogue with no final emotion scores 0."""
    if final_emotion is None:
        return 0.0
    return max(float(final_emotion) / 100.0, 0.0)


def shaped_reward(final_emotion: Optional[float], emotions: Sequence[float] = (), n_reply_tokens: int = 0,
                  turn_delta_coef: float = 0.0, length_penalty: float = 0.0,
                  length_target: int = 0) -> float:
    """emotion_reward plus optional shaping (DEVIATIONS from the paper, all off by default).

    turn_delta_coef: adds coef * (sum of per-turn emotion changes) / 100, which rewards the trajectory
      rather than only where it ended (equals coef * (final - start) / 100).
    length_penalty: subtracts penalty * max(0, n_reply_tokens - length_target) / 100.
    """
    r = emotion_reward(final_emotion)
    if turn_delta_coef and len(emotions) >= 2:
        r += turn_delta_coef * (float(emotions[-1]) - float(emotions[0])) / 100.0
    if length_penalty and n_reply_tokens > length_target:
        r -= length_penalty * (n_reply_tokens - length_target) / 100.0
    return r


@dataclass(frozen=True)
class RewardConfig:
    """The reward's settings beyond the paper's; the defaults give the paper's reward exactly."""

    bad_think_penalty: float = 0.0  # subtracted when a policy turn had no well-formed <think> block
    turn_delta_coef: float = 0.0  # see shaped_reward
    length_penalty: float = 0.0  # see shaped_reward
    length_target: int = 0  # see shaped_reward


def rlver_reward(sample: "RolloutSample", config: RewardConfig = RewardConfig()) -> float:
    """A finished dialogue's scalar reward: max(final emotion / 100, 0), minus `bad_think_penalty` when a
    turn broke the think format (`sample.format_ok` False), plus the configured shaping."""
    n_reply_tokens = sum(b - a for a, b in sample.turn_spans)
    reward = shaped_reward(sample.final_emotion, sample.emotions, n_reply_tokens, config.turn_delta_coef,
                           config.length_penalty, config.length_target)
    return reward if sample.format_ok else reward - config.bad_think_penalty


def emotion_delta_rewards(sample: "RolloutSample", unjudged: float = 0.0) -> list[float]:
    """Per-turn credit (`reward: emotion_deltas`, a deviation from the paper): policy reply k earns the change
    of the user's emotion it caused, r_k = (e_k - e_{k-1}) / 100, `unjudged` for a reply the user never judged.
    With gamma = lambda = 1 a token of reply k then sees the return sum_{j >= k} r_j: the emotion gained from
    its turn on, where the paper's reward credits every turn with the final emotion alike."""
    e = [float(x) for x in sample.emotions]
    return [(e[k + 1] - e[k]) / 100.0 if k + 1 < len(e) else unjudged for k in range(len(sample.turn_spans))]


def turn_reward_positions(turn_rewards: Sequence[float], turn_spans: Sequence[tuple[int, int]], row: tuple[int, int]
                          ) -> dict[int, float]:
    """Token index (in the row, counted from its start) -> reward, for one row [a, b) of a dialogue's ids: each
    of the row's turns gets its reward on its last token, and the row's last turn also carries the rewards of
    the turns after the row (think mode: later turns are other rows, so with gamma = 1 the return stays
    the reward-to-go)."""
    a, b = row
    inside = [k for k, (ta, tb) in enumerate(turn_spans) if a <= ta and tb <= b and tb > ta]
    out: dict[int, float] = {}
    for k in inside:
        out[turn_spans[k][1] - 1 - a] = float(turn_rewards[k])
    if inside:
        later = sum(float(r) for k, r in enumerate(turn_rewards) if k > inside[-1])
        out[turn_spans[inside[-1]][1] - 1 - a] += later
    return out


def last_token_rewards(scores: Tensor, mask: Tensor) -> Tensor:
    """[B, T] token rewards: each dialogue's score on its last policy token, 0 elsewhere."""
    rewards = torch.zeros_like(mask, dtype=scores.dtype)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values
    has_tokens = last >= 0
    rows = torch.arange(mask.shape[0], device=mask.device)[has_tokens]
    rewards[rows, last[has_tokens]] = scores[has_tokens]
    return rewards


# ------------------------------------------------------------------------------------------ advantages


def group_index(group_ids: Sequence) -> tuple[Tensor, int]:
    """([N] each label's group number, G): arbitrary group labels mapped to 0..G-1 (order of first appearance)."""
    labels: dict = {}
    index = [labels.setdefault(g, len(labels)) for g in group_ids]
    return torch.tensor(index, dtype=torch.long), len(labels)


def grpo_advantages(scores: Tensor, group_ids: Sequence, eps: float = 1e-6) -> Tensor:
    """GRPO: A_i = (r_i - mean of its group) / (std of its group + eps), one value per dialogue.

    std is the unbiased sample std (as torch.std and the reference implementation); a group of one gets
    advantage 0 (it has no baseline).
    """
    scores = scores.float()
    index, n_groups = group_index(group_ids)
    index = index.to(scores.device)
    count = torch.zeros(n_groups, device=scores.device).index_add_(0, index, torch.ones_like(scores))
    mean = torch.zeros(n_groups, device=scores.device).index_add_(0, index, scores) / count
    sq_dev = (scores - mean[index]) ** 2
    var = torch.zeros(n_groups, device=scores.device).index_add_(0, index, sq_dev) / (count - 1).clamp(min=1)
    std = var.sqrt()
    adv = (scores - mean[index]) / (std[index] + eps)
    return torch.where(count[index] > 1, adv, torch.zeros_like(adv))


def rloo_advantages(scores: Tensor, group_ids: Sequence) -> Tensor:
    """RLOO: A_i = r_i - (sum of the other rewards in its group) / (n - 1). A group of one gets 0."""
    scores = scores.float()
    index, n_groups = group_index(group_ids)
    index = index.to(scores.device)
    count = torch.zeros(n_groups, device=scores.device).index_add_(0, index, torch.ones_like(scores))
    total = torch.zeros(n_groups, device=scores.device).index_add_(0, index, scores)
    n = count[index]
    baseline = (total[index] - scores) / (n - 1).clamp(min=1)
    return torch.where(n > 1, scores - baseline, torch.zeros_like(scores))


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """G_t = r_t + gamma * G_{t'} where t' is the next policy token (user/prompt tokens are skipped)."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        on = mask[:, t].bool()
        running = torch.where(on, rewards[:, t] + gamma * running, running)
        returns[:, t] = torch.where(on, running, torch.zeros_like(running))
    return returns


def masked_whiten(values: Tensor, mask: Tensor, eps: float = 1e-8, all_reduce=None) -> Tensor:
    """(x - mean) / (std + eps) over the masked entries; `all_reduce(tensor)` sums across ranks if given."""
    m = mask.to(values.dtype)
    stats = torch.stack([(values * m).sum(), m.sum()])
    if all_reduce is not None:
        stats = all_reduce(stats)
    count = stats[1].clamp(min=1)
    mean = stats[0] / count
    sq = (((values - mean) * m) ** 2).sum().reshape(1)
    if all_reduce is not None:
        sq = all_reduce(sq)
    var = sq[0] / count  # population variance over the policy tokens
    return (values - mean) / (var.sqrt() + eps) * m


def reinforce_pp_advantages(rewards: Tensor, mask: Tensor, gamma: float = 1.0, eps: float = 1e-8,
                            all_reduce=None) -> Tensor:
    """REINFORCE++: discounted token returns, normalised over every policy token of the global batch."""
    returns = discounted_returns(rewards, mask, gamma)
    return masked_whiten(returns, mask, eps, all_reduce)


def gae_advantages(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0,
                   lam: float = 1.0) -> tuple[Tensor, Tensor]:
    """GAE over the policy's own tokens (positions with mask 0 are skipped, as if absent).

    delta_t = r_t + gamma * V(t') - V(t), A_t = delta_t + gamma * lam * A_{t'}, where t' is the next policy
    token of the same dialogue (V = 0 after the last). Returns (advantages, returns = A + V), both 0 off
    the mask. With gamma = lam = 1 and the reward on the last token: A_t = R - V(t).
    """
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    next_value = torch.zeros_like(last_gae)
    for t in reversed(range(rewards.shape[1])):
        on = mask[:, t].bool()
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        gae = delta + gamma * lam * last_gae
        last_gae = torch.where(on, gae, last_gae)
        next_value = torch.where(on, values[:, t], next_value)
        advantages[:, t] = torch.where(on, gae, torch.zeros_like(gae))
    m = mask.to(rewards.dtype)
    return advantages * m, (advantages + values) * m


# ---------------------------------------------------------------------------------------------- losses


def masked_sum_mean(x: Tensor, mask: Tensor, denom: Optional[float | Tensor] = None) -> Tensor:
    """sum(x * mask) / denom, denom defaulting to the number of masked entries."""
    m = mask.to(x.dtype)
    if denom is None:
        denom = m.sum()
    return (x * m).sum() / (denom.clamp(min=1) if isinstance(denom, Tensor) else max(float(denom), 1.0))


def ppo_policy_loss(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
                    clip_eps: float = 0.2, denom: Optional[float | Tensor] = None
                    ) -> tuple[Tensor, Tensor, Tensor]:
    """Clipped surrogate: L = mean(max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps))).

    Returns (loss, clip fraction, approx KL(old || new) with the k3 estimator (ratio - 1) - log ratio).
    """
    per_token, clipped, ratio, log_ratio = clipped_surrogate(logprobs, old_logprobs, advantages, clip_eps)
    loss = masked_sum_mean(per_token, mask, denom)
    with torch.no_grad():
        clip_frac = masked_sum_mean(clipped.to(logprobs.dtype), mask, denom)
        approx_kl = masked_sum_mean((ratio - 1.0) - log_ratio, mask, denom)
    return loss, clip_frac, approx_kl


def clipped_surrogate(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor,
                      clip_eps: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per token ([B, T-1] each): (max(-A r, -A clip(r, 1 - eps, 1 + eps)), whether the clipped term won,
    r = exp(logprobs - old_logprobs), log r)."""
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    pg_unclipped = -advantages * ratio
    pg_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    return torch.maximum(pg_unclipped, pg_clipped), pg_clipped > pg_unclipped, ratio, log_ratio


def behaviour_weights(prox_logprobs: Tensor, behaviour_logprobs: Tensor, stale: Tensor, cap: float = 2.0,
                      estimator: str = "decoupled_ppo") -> tuple[Tensor, Tensor]:
    """[B, T-1] importance weights w = pi_prox / pi_behaviour (no gradient) and [B, T-1] whether w was capped.

    Only stale tokens (`stale` 1: sampled by weights older than the update's start) are weighed; every other
    token gets exactly 1, since its behaviour policy IS the proximal one (what differs between its recorded
    and recomputed log-prob is engine numerics, reported as logprob_mismatch). Above `cap`:
    decoupled_ppo (AReaL) gives the token weight 0 (left out); truncated_is (verl's TIS) gives it `cap`."""
    w = torch.exp(prox_logprobs - behaviour_logprobs).detach()
    stale = stale.bool()
    capped = stale & (w > cap)
    if estimator == "decoupled_ppo":
        w = torch.where(capped, torch.zeros_like(w), w)
    elif estimator == "truncated_is":
        w = torch.clamp(w, max=cap)
    else:
        raise ValueError(f"off_policy_estimator must be decoupled_ppo or truncated_is, got {estimator!r}")
    return torch.where(stale, w, torch.ones_like(w)), capped


def decoupled_policy_loss(logprobs: Tensor, prox_logprobs: Tensor, behaviour_logprobs: Tensor, stale: Tensor,
                          advantages: Tensor, mask: Tensor, clip_eps: float = 0.2, cap: float = 2.0,
                          estimator: str = "decoupled_ppo", denom: Optional[float | Tensor] = None
                          ) -> tuple[Tensor, Tensor, Tensor, dict[str, Tensor]]:
    """Decoupled PPO (Fu et al. 2025, AReaL; Hilton et al. 2022) for batches with tokens sampled by older
    weights (overlapped training, trainer/learning/overlap.py). Three policies per token: pi_behaviour sampled it
    (log-probs recorded at sampling time), pi_prox is the policy at the start of this update (no gradient),
    pi_theta is being optimised:

        r = pi_theta / pi_prox,   w = pi_prox / pi_behaviour   (behaviour_weights: 1 on fresh tokens, capped)
        L = sum(w * max(-A r, -A clip(r, 1 - eps, 1 + eps)) * mask) / denom

    The trust region is kept around pi_prox (which the update can move from), while w corrects for the data
    having come from pi_behaviour. Shapes: every tensor [B, T-1]; `stale` 0/1. With no stale token w = 1
    everywhere and L equals ppo_policy_loss exactly. Returns (loss, clip fraction, approx KL(prox || theta),
    sums over the stale policy tokens: {"stale": count, "weight": sum of w, "capped": count capped}).
    """
    w, capped = behaviour_weights(prox_logprobs, behaviour_logprobs, stale * mask, cap, estimator)
    per_token, clipped, ratio, log_ratio = clipped_surrogate(logprobs, prox_logprobs, advantages, clip_eps)
    loss = masked_sum_mean(per_token * w, mask, denom)
    with torch.no_grad():
        clip_frac = masked_sum_mean(clipped.to(logprobs.dtype), mask, denom)
        approx_kl = masked_sum_mean((ratio - 1.0) - log_ratio, mask, denom)
        on = (stale * mask).to(w.dtype)
        sums = {"stale": on.sum(), "weight": (w * on).sum(), "capped": (capped.to(w.dtype) * on).sum()}
    return loss, clip_frac, approx_kl, sums


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, clip_eps: float = 0.2,
               denom: Optional[float | Tensor] = None) -> tuple[Tensor, Tensor]:
    """Clipped value loss 0.5 * max((V - G)^2, (V_clip - G)^2), V_clip = V_old + clip(V - V_old, +-eps).

    Returns (loss, fraction of tokens where the clipped term was larger).
    """
    v_clipped = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
    loss_unclipped = (values - returns) ** 2
    loss_clipped = (v_clipped - returns) ** 2
    loss = 0.5 * masked_sum_mean(torch.maximum(loss_unclipped, loss_clipped), mask, denom)
    with torch.no_grad():
        clip_frac = masked_sum_mean((loss_clipped > loss_unclipped).to(values.dtype), mask, denom)
    return loss, clip_frac


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Per-position entropy of the categorical distribution: logsumexp(z) - sum(softmax(z) * z)."""
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, kind: str = "k3") -> Tensor:
    """Per-token KL(pi || pi_ref) estimate: k1 = log ratio, k3 = exp(-log ratio) - 1 + log ratio (>= 0)."""
    log_ratio = logprobs - ref_logprobs
    if kind == "k1":
        return log_ratio
    if kind == "k3":
        return torch.exp(-log_ratio) - 1.0 + log_ratio
    raise ValueError(f"kl kind must be 'k1' or 'k3', got {kind!r}")


def token_logprobs(logits: Tensor, labels: Tensor) -> Tensor:
    """log pi(label_t | context) for each position: logits [B, T, V], labels [B, T] -> [B, T]."""
    logits = logits.float()
    # gather - logsumexp: the same as log_softmax then gather, without a second [B, T, V] tensor
    return torch.gather(logits, 2, labels.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
