"""A batch of finished dialogues as padded tensor rows (Batch, make_batch), the learner's input.

Token positions: every per-token tensor is [R, T-1] and column t describes input_ids[:, t+1] (the token
the logits at t predict), as in trainer/learning/learner.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch
from torch import Tensor


@dataclass
class Batch:
    """Padded rows of finished dialogues (right padding). A row is one causal token sequence: the whole
    dialogue in direct mode, one segment per policy turn in think mode (earlier thoughts are not in later
    prompts). Every row of a dialogue carries that dialogue's reward on its last policy token, which with
    gamma = lambda = 1 (the paper) gives exactly the advantages of the whole dialogue."""

    input_ids: Tensor  # [R, T]
    attention_mask: Tensor  # [R, T]
    action_mask: Tensor  # [R, T-1]: 1 where input_ids[:, t+1] is a policy-sampled token
    scores: Tensor  # [R] the row's dialogue reward
    group_ids: list[Any]  # [R] the row's group (GRPO / RLOO baselines are per group of dialogues)
    sample_index: list[int]  # [R] which dialogue the row came from
    sampled_logprobs: Tensor  # [R, T-1] log-probs reported by the dialogue rollout (0 where unknown)
    versions: Optional[Tensor] = None  # [R, T-1] policy version that sampled input_ids[:, t+1] (-1: unknown)
    # [R, T-1] per-token rewards when the reward credits each turn (trainer.learning.algorithms.emotion_delta_rewards);
    # None: each row's score on its last policy token (the paper)
    token_rewards: Optional[Tensor] = None

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def _field(sample: Any, name: str, default: Any = None) -> Any:
    if isinstance(sample, dict):
        return sample.get(name, default)
    return getattr(sample, name, default)


def _rows(sample: Any) -> list[tuple[list[int], list[int], list[float]]]:
    if hasattr(sample, "rows") and _field(sample, "segments"):
        return sample.rows()
    ids, mask = list(_field(sample, "input_ids")), list(_field(sample, "action_mask"))
    lps = list(_field(sample, "old_logprobs", None) or [0.0] * len(ids))
    return [(ids, mask, lps)]


def _row_versions(sample: Any, n_rows: int) -> list[list[int]]:
    """Per row (as _rows), the token_versions slice; rows of -1 when the sample has none."""
    versions = list(_field(sample, "token_versions", None) or [])
    ids = _field(sample, "input_ids")
    if len(versions) != len(ids):
        return [[-1] * len(r[0]) for r in _rows(sample)]
    segments = _field(sample, "segments") if hasattr(sample, "rows") else None
    return [versions[a:b] for a, b in segments] if segments else [versions]


def _row_bounds(sample: Any) -> list[tuple[int, int]]:
    segments = _field(sample, "segments") if hasattr(sample, "rows") else None
    return list(segments) if segments else [(0, len(_field(sample, "input_ids")))]


def make_batch(samples: Sequence[Any], pad_token_id: int, rewards: Optional[Sequence[float]] = None,
               turn_rewards: Optional[Sequence[Sequence[float]]] = None) -> Batch:
    """Pad samples (RolloutSample, or dicts with input_ids, action_mask, group_id) into rows. `rewards`: one
    per sample (trainer.learning.algorithms.rlver_reward); without it each sample's own "reward" field. `turn_rewards`:
    one list per sample, a reward per policy turn, placed on each turn's last token (token_rewards)."""
    from trainer.learning.algorithms import turn_reward_positions

    if rewards is not None and len(rewards) != len(samples):
        raise ValueError(f"rewards: {len(rewards)} values for {len(samples)} samples")
    if turn_rewards is not None and len(turn_rewards) != len(samples):
        raise ValueError(f"turn_rewards: {len(turn_rewards)} lists for {len(samples)} samples")
    rows, scores, groups, index, row_versions, placed = [], [], [], [], [], []
    for i, s in enumerate(samples):
        sample_rows = _rows(s)
        bounds = _row_bounds(s)
        for (ids, mask, lps), vs, bound in zip(sample_rows, _row_versions(s, len(sample_rows)), bounds):
            if len(ids) != len(mask):
                raise ValueError(f"sample {i}: input_ids ({len(ids)}) and action_mask ({len(mask)}) differ in length")
            if len(ids) >= 2 and any(mask):
                rows.append((ids, mask, lps if len(lps) == len(ids) else [0.0] * len(ids)))
                scores.append(float(_field(s, "reward") if rewards is None else rewards[i]))
                groups.append(_field(s, "group_id"))
                index.append(i)
                row_versions.append(vs)
                placed.append(turn_reward_positions(turn_rewards[i], _field(s, "turn_spans"), bound)
                              if turn_rewards is not None else {})
    if not rows:  # nothing sampled on this rank (e.g. every dialogue failed at the opening): a dummy row
        rows, scores, groups, index = [([pad_token_id] * 2, [0, 0], [0.0, 0.0])], [0.0], [None], [-1]
        row_versions, placed = [[-1, -1]], [{}]
    width = max(len(r[0]) for r in rows)
    ids_t = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    act = torch.zeros((len(rows), width), dtype=torch.long)
    lp_t = torch.zeros((len(rows), width))
    ver = torch.full((len(rows), width), -1, dtype=torch.long)
    for r, (ids, mask, lps) in enumerate(rows):
        ver[r, :len(ids)] = torch.tensor(row_versions[r], dtype=torch.long)
        ids_t[r, :len(ids)] = torch.tensor(ids, dtype=torch.long)
        attn[r, :len(ids)] = 1
        act[r, :len(ids)] = torch.tensor(mask, dtype=torch.long)
        lp_t[r, :len(ids)] = torch.tensor(lps, dtype=torch.float32)
    token_rewards = None
    if turn_rewards is not None:
        token_rewards = torch.zeros((len(rows), width))
        for r, where in enumerate(placed):
            for position, value in where.items():
                token_rewards[r, position] = value
        token_rewards = token_rewards[:, 1:]  # column t describes token t + 1
    return Batch(ids_t, attn, act[:, 1:], torch.tensor(scores), groups, index, lp_t[:, 1:], ver[:, 1:],
                 token_rewards)
