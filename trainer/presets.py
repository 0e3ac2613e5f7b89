"""Named training presets: each is a config file under configs/ plus at most a few documented overrides.

The YAML files stay the one source of truth for every setting; a preset only names one and says what it
changes (the paper configs are the think-then-say runs; their direct variants switch `mode` only).

- cpu-demo: configs/learning-curve-cpu.yaml (GRPO on SmolLM2-135M-Instruct, offline simulator, LoRA), run for
  46 steps: benchmarks/learning_curve.py measured 46 such steps in 61 training minutes on the 2-core machine
  (offline-v3 simulator, 2026-11-24), with the held-out mean over 10 turns going 22.8 -> 41.8 (+19.0).
- cpu-demo-turn-grpo: cpu-demo with per-turn credit (advantage: turn_grpo) over 3-reply training dialogues (one
  reply leaves no turn to credit); 20 steps, whose time the plan's probe measures (not benchmarked yet).
- paper-ppo-7b / paper-grpo-7b: RLVER's PPO / GRPO on Qwen2.5-7B-Instruct without thinking (paper: 61.7 / 68.3).
- paper-ppo-think-7b / paper-grpo-think-7b: the same with think-then-say (paper: 79.2 / 72.0).
- one-gpu-lora-grpo-7b: GRPO on Qwen2.5-7B-Instruct with LoRA on one 80 GiB GPU; one-gpu-grpo-1.5b: full-weight
  GRPO on Qwen2.5-1.5B-Instruct on one 24 GiB GPU (deviations from the paper, for what one researcher has).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"


@dataclass(frozen=True)
class Preset:
    config_file: str  # a file under configs/
    overrides: dict[str, Any] = field(default_factory=dict)  # settings that differ from that file
    description: str = ""


PRESETS: dict[str, Preset] = {
    "cpu-demo": Preset("learning-curve-cpu.yaml", {"steps": 46},
                       "SmolLM2-135M, offline simulator, LoRA GRPO: ~1 hour on 2 CPU cores (measured +19 held-out "
                       "points over 10 turns in 46 steps, benchmarks/learning_curve.py)"),
    "cpu-demo-turn-grpo": Preset("learning-curve-cpu.yaml", {"steps": 20, "advantage": "turn_grpo", "max_turns": 3},
                                 "cpu-demo with per-turn credit (turn_grpo: each reply's emotion change against its "
                                 "group's at that turn) over 3-reply dialogues; time per step: see the plan"),
    "paper-ppo-7b": Preset("paper-ppo-qwen2.5-7b.yaml", {"mode": "direct"},
                           "RLVER PPO, Qwen2.5-7B-Instruct, 32 GPUs (4 nodes x 8), no thinking"),
    "paper-ppo-think-7b": Preset("paper-ppo-qwen2.5-7b.yaml", {},
                                 "RLVER PPO with think-then-say, Qwen2.5-7B-Instruct, 32 GPUs"),
    "paper-grpo-7b": Preset("paper-grpo-qwen2.5-7b.yaml", {"mode": "direct"},
                            "RLVER GRPO (4 rollouts per profile), Qwen2.5-7B-Instruct, 32 GPUs, no thinking"),
    "paper-grpo-think-7b": Preset("paper-grpo-qwen2.5-7b.yaml", {},
                                  "RLVER GRPO with think-then-say, Qwen2.5-7B-Instruct, 32 GPUs"),
    "one-gpu-lora-grpo-7b": Preset("one-gpu-grpo-qwen2.5-7b-lora.yaml", {},
                                   "GRPO with think-then-say, Qwen2.5-7B-Instruct with LoRA r=64, one 80 GiB GPU"),
    "one-gpu-grpo-1.5b": Preset("one-gpu-grpo-qwen2.5-1.5b.yaml", {},
                                "full-weight GRPO, Qwen2.5-1.5B-Instruct, no thinking, one 24 GiB GPU"),
}
DEFAULT_PRESET = "cpu-demo"  # what the Training view opens on


def preset_names() -> list[str]:
    return list(PRESETS)


def preset_dict(name: str) -> dict[str, Any]:
    """The settings of a preset as a plain dict (its config file, then its overrides). ValueError naming the
    preset and the known ones when there is no such preset."""
    preset = PRESETS.get(name)
    if preset is None:
        raise ValueError(f"unknown preset {name!r}; one of {', '.join(PRESETS)}")
    path = CONFIGS_DIR / preset.config_file
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"preset {name!r}: {path} is not a mapping of settings")
    return {**data, **preset.overrides}
