"""Turn-level advantages (`advantage: turn_grpo | turn_gae`; the default `dialogue` is one of
trainer.learning.algorithms' estimators). Per-turn tensors are [N, K]: N dialogues, K policy replies (the longest
dialogue's), and every token of reply k gets its turn's value (trainer.learning.batch.spread_turn_values);
prompt and simulated-user tokens get none.

- turn_grpo: A_ik = A_i + w * (d_ik - mean_k) / max(std_k, TURN_SCALE_FLOOR), A_i the dialogue's GRPO advantage,
  d_ik the emotion change reply k caused, mean_k / std_k over the group's dialogues whose reply k was judged
  (MAPO-style per-turn credit, arXiv 2603.06194). Not summed over later turns: no baseline whose number of
  terms depends on the dialogue's own length (verl RFC #7244), so length gets no push of its own.
- turn_gae: GAE over turns, delta_k = r_k + gamma_turn * V_{k+1} - V_k, A_k = delta_k + gamma_turn * lam * A_{k+1},
  V_k the critic's value where reply k starts (the state the reply is chosen in).

The turn term's size follows the difference it measures: std_k is floored at TURN_SCALE_FLOOR (five points of
emotion on the 0-100 scale), so replies whose changes differ by a fraction of a point get a fraction of the
unit a real difference gets, where (d - mean) / (std + eps) made any two different values +-0.707. The floor is
per turn, never a scale pooled over a dialogue's turns: a pooled scale would make turn k's term depend on how
many later turns the group's dialogues reached, a push on length of its own. Changes that are all equal give
exact zeros (centred in float64, and a cell whose judged changes are equal is 0 by construction).

No credit to replies that cannot change the reward (a departure from the paper, which credits every reply of a
dialogue alike): a reply the user never judged (the last one at the rules' turn cap: the simulator stops before
reacting to it, so the final emotion is set before it) gets advantage 0 under both estimators, and turn_gae
puts the dialogue's reward on its last judged reply (trainer.learning.batch.turn_table's `credited`). A dialogue
none of whose replies was judged carries no per-reply information and keeps the dialogue's advantage.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from trainer.learning.algorithms import gae_advantages, group_index, grpo_advantages

TURN_SCALE_FLOOR = 0.05  # five emotion points (changes are emotion / 100): the smallest scale of a turn's term


def credited_replies(changes: Tensor) -> Tensor:
    """[N, K] changes (NaN: not judged or not said) -> [N, K] bool, the replies that can have changed the reward:
    the judged ones, or every reply of a dialogue none of whose replies was judged."""
    judged = ~torch.isnan(changes)
    return judged | ~judged.any(dim=1, keepdim=True)


def turn_group_advantages(changes: Tensor, group_ids: Sequence, floor: float = TURN_SCALE_FLOOR) -> Tensor:
    """[N, K] emotion changes (NaN: reply not said or not judged) -> [N, K] (d_ik - mean_k) / max(std_k, floor),
    mean_k and the unbiased std_k over the judged replies k of dialogue i's group, in float64; 0 where d_ik is
    NaN, where fewer than two dialogues of the group have a judged reply k, and where their changes are equal."""
    judged = ~torch.isnan(changes)
    d = torch.where(judged, changes, torch.zeros_like(changes)).double()
    on = judged.double()
    index, n_groups = group_index(group_ids)
    index = index.to(d.device)
    per_group = torch.zeros(n_groups, d.shape[1], dtype=torch.float64, device=d.device)
    count = per_group.index_add(0, index, on)  # [G, K]
    mean = per_group.index_add(0, index, d) / count.clamp(min=1)
    centred = (d - mean[index]) * on
    var = per_group.index_add(0, index, centred ** 2) / (count - 1).clamp(min=1)
    big = torch.finfo(torch.float64).max
    rows = index[:, None].expand_as(d)
    high = per_group.scatter_reduce(0, rows, torch.where(judged, d, -big), "amax", include_self=False)
    low = per_group.scatter_reduce(0, rows, torch.where(judged, d, big), "amin", include_self=False)
    spread = (count > 1) & (high > low)  # [G, K]: at least two judged changes, not all equal
    adv = centred / var.sqrt().clamp(min=floor)[index]
    return torch.where(judged & spread[index], adv, torch.zeros_like(adv)).to(changes.dtype)


def turn_grpo_advantages(scores: Tensor, changes: Tensor, group_ids: Sequence, turn_weight: float = 1.0,
                         eps: float = 1e-6) -> Tensor:
    """Group-relative per-turn credit: A_ik = A_i + turn_weight * turn_group_advantages(d)_ik, [N] scores and
    [N, K] changes -> [N, K], and 0 for a reply that cannot have changed the reward (credited_replies). A_i =
    grpo_advantages(scores) is the dialogue's reward against its group's, given to every credited reply alike;
    the turn term adds which of its replies moved the user more than the group's did."""
    final = grpo_advantages(scores, group_ids, eps)
    adv = final[:, None] + turn_weight * turn_group_advantages(changes, group_ids)
    return torch.where(credited_replies(changes), adv, torch.zeros_like(adv))


def turn_gae_advantages(turn_rewards: Tensor, turn_values: Tensor, turns: Tensor, turn_gamma: float = 1.0,
                        lam: float = 1.0) -> tuple[Tensor, Tensor]:
    """GAE across turns instead of tokens, [N, K] each: delta_k = r_k + turn_gamma * V_{k+1} - V_k,
    A_k = delta_k + turn_gamma * lam * A_{k+1} (V = 0 after the last reply), over the replies `turns` 1 (the
    learner passes the credited ones). Returns (advantages, returns = A + V), 0 elsewhere. With turn_gamma =
    lam = 1: A_k = sum_{j >= k} r_j - V_k."""
    return gae_advantages(turn_rewards, turn_values, turns, turn_gamma, lam)
