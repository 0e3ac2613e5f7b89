"""A batch of finished dialogues as padded tensor rows (Batch, make_batch), the learner's input.

Token positions: every per-token tensor is [R, T-1] and column t describes input_ids[:, t+1] (the token
the logits at t predict), as in trainer/learning/learner.py. The turn-level advantages read a batch by turn:
turn_table ([N dialogues, K replies] tensors), values_at_turn_starts (the critic per reply) and
spread_turn_values (a reply's value on each of its tokens).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
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
    # [R, T-1] which policy reply (0, 1, ...) of its dialogue the column's token belongs to; -1 for prompt, user
    # and padding tokens, and everywhere when the samples carry no turn spans
    turn_index: Optional[Tensor] = None
    # per dialogue (by sample index): the emotion change each reply caused, NaN where the user never judged it
    turn_changes: Optional[list[list[float]]] = None
    turn_rewards: Optional[list[list[float]]] = None  # per dialogue: the reward of each reply, when per-turn

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
    one list per sample, a reward per policy turn, placed on each turn's last token (token_rewards). Samples
    with turn_spans also give turn_index and turn_changes (the turn-level advantages' input)."""
    from trainer.learning.algorithms import emotion_delta_rewards, turn_reward_positions

    if rewards is not None and len(rewards) != len(samples):
        raise ValueError(f"rewards: {len(rewards)} values for {len(samples)} samples")
    if turn_rewards is not None and len(turn_rewards) != len(samples):
        raise ValueError(f"turn_rewards: {len(turn_rewards)} lists for {len(samples)} samples")
    rows, scores, groups, index, row_versions, placed, turns = [], [], [], [], [], [], []
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
                turns.append(_turn_positions(_field(s, "turn_spans") or [], bound))
    if not rows:  # nothing sampled on this rank (e.g. every dialogue failed at the opening): a dummy row
        rows, scores, groups, index = [([pad_token_id] * 2, [0, 0], [0.0, 0.0])], [0.0], [None], [-1]
        row_versions, placed, turns = [[-1, -1]], [{}], [{}]
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
    turn_index = torch.full((len(rows), width), -1, dtype=torch.long)
    for r, where in enumerate(turns):
        for position, k in where.items():
            turn_index[r, position] = k
    changes = [emotion_delta_rewards(SimpleNamespace(emotions=_field(s, "emotions") or [],
                                                     turn_spans=_field(s, "turn_spans") or []), unjudged=math.nan)
               for s in samples]
    return Batch(ids_t, attn, act[:, 1:], torch.tensor(scores), groups, index, lp_t[:, 1:], ver[:, 1:],
                 token_rewards, torch.where(act[:, 1:].bool(), turn_index[:, 1:], -1), changes,
                 [list(map(float, t)) for t in turn_rewards] if turn_rewards is not None else None)


def _turn_positions(turn_spans: Sequence[tuple[int, int]], row: tuple[int, int]) -> dict[int, int]:
    """Token index in the row -> the policy reply k it belongs to, for the replies inside the row [a, b)."""
    a, b = row
    return {t - a: k for k, (ta, tb) in enumerate(turn_spans) if a <= ta and tb <= b for t in range(ta, tb)}


@dataclass
class TurnTable:
    """A batch's dialogues by turn, what the turn-level advantages read: N dialogues (those with rows), K the
    most replies of any. Per-turn tensors are [N, K]."""

    dialogue: Tensor  # [R] each row's dialogue (0..N-1), -1 for a row of no dialogue
    scores: Tensor  # [N] the dialogue's reward
    groups: list[Any]  # [N] its group (same persona, same seed of the user)
    changes: Tensor  # [N, K] emotion change of each reply (NaN: not judged, or no such reply)
    rewards: Tensor  # [N, K] reward of each reply (the scalar reward on the last credited reply when per dialogue)
    said: Tensor  # [N, K] 1 where the reply has tokens in the batch
    # [N, K] 1 where the reply was said and can have changed the reward (trainer.learning.turn_advantages.
    # credited_replies: not the unjudged last reply at the turn cap); the rewards of the others go on the last one
    credited: Tensor


def turn_table(batch: Batch) -> TurnTable:
    """The batch's dialogues by turn (batch.turn_index must be set: samples with turn_spans)."""
    from trainer.learning.turn_advantages import credited_replies

    first = {i: r for r, i in reversed(list(enumerate(batch.sample_index))) if i >= 0}
    dialogues = sorted(first)
    dense = {i: n for n, i in enumerate(dialogues)}
    dialogue = torch.tensor([dense.get(i, -1) for i in batch.sample_index], dtype=torch.long)
    n_turns = int(batch.turn_index.max().item()) + 1 if batch.turn_index.numel() else 0
    said = torch.zeros(len(dialogues), max(n_turns, 1))
    r, t = ((batch.turn_index >= 0) & (dialogue[:, None] >= 0)).nonzero(as_tuple=True)
    said[dialogue[r], batch.turn_index[r, t]] = 1.0
    changes = torch.full(said.shape, math.nan)
    for n, i in enumerate(dialogues):
        d = (batch.turn_changes or [[]] * (i + 1))[i][:said.shape[1]]
        changes[n, :len(d)] = torch.tensor(d, dtype=torch.float32)
    changes = torch.where(said.bool(), changes, torch.full_like(changes, math.nan))
    credited = said * credited_replies(changes).float()
    rewards = torch.zeros(said.shape)
    for n, i in enumerate(dialogues):
        last = int(credited[n].nonzero().max()) if credited[n].any() else 0
        if batch.turn_rewards is None:  # the dialogue's reward on its last reply
            rewards[n, last] = batch.scores[first[i]]
        else:  # a reward per reply; those of replies not in the batch go on the last one that is
            per = batch.turn_rewards[i]
            rewards[n, :min(len(per), last)] = torch.tensor(per[:last], dtype=torch.float32)
            rewards[n, last] = float(sum(per[last:]))
    return TurnTable(dialogue, batch.scores[[first[i] for i in dialogues]] if dialogues else batch.scores[:0],
                     [batch.group_ids[first[i]] for i in dialogues], changes, rewards, said, credited)


def spread_turn_values(per_turn: Tensor, dialogue: Tensor, turn_index: Tensor) -> Tensor:
    """[N, K] per-turn values -> [R, T-1] token values: row r's column t gets per_turn[dialogue[r], k] where k
    = turn_index[r, t] is the reply that token belongs to; 0 where turn_index is -1 (prompt, user, padding)."""
    rows = dialogue.clamp(min=0)[:, None].expand_as(turn_index)
    on = (turn_index >= 0) & (dialogue[:, None] >= 0)
    if per_turn.numel() == 0:
        return torch.zeros(turn_index.shape, dtype=per_turn.dtype)
    return torch.where(on, per_turn[rows, turn_index.clamp(min=0)], torch.zeros((), dtype=per_turn.dtype))


def values_at_turn_starts(values: Tensor, dialogue: Tensor, turn_index: Tensor, shape: tuple[int, int]) -> Tensor:
    """[R, T-1] critic values -> [N, K] V_k: the value of the column whose token is reply k's first, i.e. the
    critic's output at the last token before the reply (what the reply is chosen from, so the baseline does
    not depend on the reply it judges)."""
    before = torch.cat([torch.full_like(turn_index[:, :1], -1), turn_index[:, :-1]], dim=1)
    first = (turn_index >= 0) & (turn_index != before) & (dialogue[:, None] >= 0)
    out = torch.zeros(shape, dtype=values.dtype)
    r, t = first.nonzero(as_tuple=True)
    out[dialogue[r], turn_index[r, t]] = values[r, t].detach()
    return out


def micro_batches(batch: Batch, index: Tensor, rows: int, max_tokens: int = 0) -> list[Tensor]:
    """The micro-batches of the rows `index`: `rows` rows each, or with max_tokens > 0 (as verl's dynamic batch
    size) rows longest first, packed while rows x longest row (the padded tokens of a micro-batch, which the
    learner cuts to its longest row) stays within max_tokens; a row longer than max_tokens goes alone."""
    if not max_tokens:
        return [index[i:i + rows] for i in range(0, len(index), rows)]
    lengths, order = batch.attention_mask[index].sum(dim=1).sort(descending=True, stable=True)
    chunks: list[list[int]] = []
    widest = 0
    for row, length in zip(index[order].tolist(), lengths.tolist()):
        if chunks and (len(chunks[-1]) + 1) * max(widest, length) <= max_tokens:
            chunks[-1].append(row)
        else:
            chunks.append([row])
            widest = length
    return [torch.tensor(c, dtype=torch.long) for c in chunks]
