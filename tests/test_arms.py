"""Arms side by side (trainer.experiments.arms, `benchmarks/learning_curve.py --arms`): the arms' settings, the
table's scores and intervals, and the whole benchmark on a tiny run."""
from __future__ import annotations

import sys

import pytest

from trainer.config import ConfigError, TrainConfig
from trainer.experiments.arms import ARMS_TABLE_HEADER, arm_config, arms_table, parse_arms


def test_arms_are_named_settings_over_one_base():
    assert parse_arms(" final_emotion, emotion_deltas,turn_grpo ") == ["final_emotion", "emotion_deltas", "turn_grpo"]
    for text, problem in (("final_emotion,per_token", "unknown arm 'per_token'"), ("", "no arm named"),
                          ("turn_grpo,turn_grpo", "an arm is named twice")):
        with pytest.raises(ConfigError) as err:
            parse_arms(text)
        assert err.value.errors["arms"].startswith(problem), err.value.errors
    base = TrainConfig(algorithm="grpo", group_size=4, dialogues_per_step=8, minibatch_size=8, seed=3)
    gae = arm_config(base, "turn_gae")
    assert (gae.algorithm, gae.advantage, gae.dialogues_per_step, gae.seed) == ("ppo", "turn_gae", 8, 3)
    deltas = arm_config(base, "emotion_deltas")
    assert (deltas.algorithm, deltas.reward, deltas.advantage) == ("grpo", "emotion_deltas", "dialogue")


def test_the_arms_table_scores_each_arm_as_the_benchmark_does():
    before = {"heldout": [10.0, 20.0, 30.0, 40.0], "adversarial": [5.0, 7.0]}
    rows = [{"arm": "turn_grpo", "steps": 3, "minutes": 1.5, "heldout": [20.0, 30.0, 5.0, None],
             "adversarial": [10.0, 12.0]}]
    lines = arms_table(rows, before)
    assert lines[0] == ARMS_TABLE_HEADER
    # before: mean 25.0; adversarial 6.0, both users below 10 fail
    assert lines[2].startswith("| before training | - | 0 | 0.0 | 25.0 [") and "| 0 / 4 | - | 6.0 [" in lines[2]
    assert lines[2].endswith("| 2 / 2 | - |")
    # the errored dialogue scores 0 and fails, as in the benchmark: (20 + 30 + 5 + 0) / 4 = 13.75 -> 13.8
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert cells[:4] == ["turn_grpo", "grpo, reward final_emotion, advantage turn_grpo", "3", "1.5"]
    assert cells[4].startswith("13.8 [") and cells[5:7] == ["2 / 4", "-11.2"]
    assert cells[7] == "11.0 [10.0, 12.0]" and cells[8:] == ["0 / 2", "+5.0"]


@pytest.mark.model
def test_the_benchmark_prints_the_arms_table_on_a_tiny_run(tiny_model_dir, monkeypatch, capsys):
    from benchmarks import learning_curve

    monkeypatch.setattr(sys, "argv", [
        "learning_curve.py", "--arms", "final_emotion,turn_grpo", "--model", str(tiny_model_dir), "--no-lora",
        "--steps", "1", "--minutes", "10", "--profiles-per-step", "2", "--group", "2", "--minibatch", "0",
        "--max-turns", "2", "--eval-turns", "1", "--eval-samples", "1", "--protocol-turns", "2",
        "--max-new-tokens", "8", "--max-tokens", "1024", "--lr", "1e-4"])
    learning_curve.main()
    out = capsys.readouterr().out
    table = out[out.index(ARMS_TABLE_HEADER):].splitlines()
    assert [line.split("|")[1].strip() for line in table[2:5]] == ["before training", "final_emotion", "turn_grpo"]
    for line in table[3:5]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2] == "1" and cells[5].endswith(" / 8") and cells[8].endswith(" / 5")  # 8 held-out, 5 adversarial
    assert "arm turn_grpo: grpo, reward final_emotion, advantage turn_grpo" in out


def test_the_experiments_views_arms_grid_is_a_launchable_grid_over_advantage():
    from app.services import experiments
    from trainer.experiments import grid

    spec = grid.parse_grid(experiments.arms_grid(), check_paths=False)
    cells = [(c["reward"], c["advantage"]) for c in spec.cells()]
    assert cells == [("final_emotion", "dialogue"), ("final_emotion", "turn_grpo"), ("emotion_deltas", "dialogue"),
                     ("emotion_deltas", "turn_grpo")]
    assert spec.base["max_turns"] > 1 and spec.benchmark["profiles"] == "builtin:heldout"
