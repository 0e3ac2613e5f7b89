"""The RL update and the training loop on the tiny model: learning a verifiable reward, checkpoints, resume."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainer.config import TrainConfig
from trainer.learner import Learner, make_batch

PROMPTS = ["hello there", "I feel sad today", "my work is hard", "thank you"]


def _even_token_samples(engine, step: int, group: int) -> list[dict]:
    """Single-turn rollouts scored by a verifiable rule: the fraction of reply tokens with an even id."""
    from trainer.engines.base import SamplingConfig

    prompt_ids = [engine.encode_chat([{"role": "user", "content": p}]) for p in PROMPTS for _ in range(group)]
    gens = engine.generate_ids(prompt_ids, SamplingConfig(temperature=1.0, max_new_tokens=4, seed=step))
    samples = []
    for i, g in enumerate(gens):
        samples.append({"input_ids": g.prompt_ids + g.token_ids,
                        "action_mask": [0] * len(g.prompt_ids) + [1] * len(g.token_ids),
                        "reward": sum(t % 2 == 0 for t in g.token_ids) / len(g.token_ids), "group_id": i // group})
    return samples


def test_make_batch_pads_and_shifts_the_action_mask():
    b = make_batch([{"input_ids": [5, 6, 7], "action_mask": [0, 1, 1], "reward": 0.5, "group_id": 0},
                    {"input_ids": [5, 8], "action_mask": [0, 1], "reward": 1.0, "group_id": 0}], pad_token_id=0)
    assert b.input_ids.tolist() == [[5, 6, 7], [5, 8, 0]]
    assert b.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b.action_mask.tolist() == [[1, 1], [1, 0]]  # predicts tokens 1..T-1
    with pytest.raises(ValueError, match="differ in length"):
        make_batch([{"input_ids": [1, 2], "action_mask": [1], "reward": 0, "group_id": 0}], 0)


@pytest.mark.parametrize("algorithm", ["grpo"])
def test_tiny_model_learns_a_verifiable_reward(tiny_model_dir: Path, algorithm: str):
    from trainer.engines.hf_engine import HFEngine

    torch.manual_seed(0)
    cfg = TrainConfig(model=str(tiny_model_dir), algorithm=algorithm, dialogues_per_step=16, group_size=4,
                      minibatch_size=16, micro_batch_size=16, actor_lr=1e-2, entropy_coef=0.0, steps=20)
    learner = Learner(cfg, tiny_model_dir)
    engine = HFEngine(tiny_model_dir, model=learner.generation_model(), tokenizer=learner.tokenizer)
    rewards, kls = [], []
    for step in range(20):
        batch = make_batch(_even_token_samples(engine, step, 4), learner.tokenizer.pad_token_id)
        metrics = learner.update(batch, seed=step)
        rewards.append(batch.scores.mean().item())
        kls.append(metrics["approx_kl"])
    # one update per batch: the recomputed old log-probs equal the new ones, so the ratio starts at 1
    assert max(kls) < 1e-5
    assert sum(rewards[:3]) / 3 < 0.65
    assert sum(rewards[-3:]) / 3 > 0.85, rewards
