"""Per-turn credit from emotion changes (`reward: emotion_deltas`): each reply earns the change it caused, on
its own last token, so with gamma = lambda = 1 a token sees the emotion gained from its turn on."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from trainer.learning import algorithms
from trainer.learning.batch import make_batch


def test_each_reply_earns_the_change_it_caused():
    sample = SimpleNamespace(emotions=[40.0, 50.0, 45.0], turn_spans=[(3, 6), (8, 10), (12, 14)])
    assert algorithms.emotion_delta_rewards(sample) == pytest.approx([0.10, -0.05, 0.0])  # the 3rd reply was not judged


def test_rewards_sit_on_each_turns_last_token():
    spans = [(2, 4), (6, 9)]
    assert algorithms.turn_reward_positions([0.1, -0.05], spans, (0, 10)) == {3: 0.1, 8: -0.05}
    # think mode: one row per turn; a row's last turn also carries the rewards of the turns after it
    assert algorithms.turn_reward_positions([0.1, -0.05], spans, (0, 5)) == {3: pytest.approx(0.05)}
    assert algorithms.turn_reward_positions([0.1, -0.05], spans, (5, 10)) == {3: -0.05}


def test_the_return_of_a_token_is_the_emotion_gained_from_its_turn_on():
    ids = [1, 2, 10, 11, 3, 4, 12, 13, 14, 5]
    mask = [0, 0, 1, 1, 0, 0, 1, 1, 1, 0]
    sample = {"input_ids": ids, "action_mask": mask, "group_id": "g", "turn_spans": [(2, 4), (6, 9)]}
    batch = make_batch([sample], pad_token_id=0, rewards=[0.05], turn_rewards=[[0.10, -0.05]])
    assert batch.token_rewards.shape == batch.action_mask.shape
    assert batch.token_rewards[0, 2].item() == pytest.approx(0.10) and batch.token_rewards[0, 7].item() == pytest.approx(-0.05)
    values = torch.zeros_like(batch.action_mask, dtype=torch.float32)
    adv, returns = algorithms.gae_advantages(batch.token_rewards, values, batch.action_mask, 1.0, 1.0)
    policy = batch.action_mask.bool()[0]
    assert returns[0][policy].tolist() == pytest.approx([0.05, 0.05, -0.05, -0.05, -0.05])
    plain = make_batch([sample], pad_token_id=0, rewards=[0.05])
    assert plain.token_rewards is None  # the paper's reward: the score on the last policy token


@pytest.mark.model
def test_ppo_trains_with_per_turn_credit(tiny_model_dir, tmp_path):
    from helpers import tiny_train_config, trainer_run

    config = tiny_train_config(tmp_path, tiny_model_dir, reward="emotion_deltas", max_turns=2, steps=1)
    r = trainer_run("train", "--config", str(config), "--db", f"sqlite:///{tmp_path / 'lab.db'}", "--json",
                    env_home=tmp_path / "home")
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and "reward_mean" in result["metrics"]
