"""Arms: named ways of crediting a dialogue's replies, trained side by side from the same start.

An arm is a few TrainConfig settings over a shared base (benchmarks/learning_curve.py --arms, the Experiments
view's grid over `advantage`, configs/experiment-arms-cpu.yaml):

    final_emotion   GRPO on the paper's reward, one advantage per dialogue (the paper)
    emotion_deltas  GRPO on the sum of each reply's emotion change (reward: emotion_deltas)
    turn_grpo       GRPO plus each reply's emotion change against its group's at that turn (advantage: turn_grpo)
    turn_gae        PPO with GAE across turns (advantage: turn_gae)

Each arm is scored as the Sentient benchmark scores a run (simulator.evaluation.scoring.sentient_summary: mean
final emotion with its bootstrap 95% interval, failures below 10) on the held-out and the adversarial users.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Sequence

from trainer.config import ConfigError, TrainConfig

ARMS: dict[str, dict[str, Any]] = {
    "final_emotion": {"algorithm": "grpo", "reward": "final_emotion", "advantage": "dialogue"},
    "emotion_deltas": {"algorithm": "grpo", "reward": "emotion_deltas", "advantage": "dialogue"},
    "turn_grpo": {"algorithm": "grpo", "reward": "final_emotion", "advantage": "turn_grpo"},
    "turn_gae": {"algorithm": "ppo", "reward": "final_emotion", "advantage": "turn_gae"},
}
ARMS_TABLE_HEADER = ("| arm | settings | steps | training min | held-out score [95% CI] | held-out failures | "
                     "change | adversarial score [95% CI] | adversarial failures | change |")


def parse_arms(text: str) -> list[str]:
    """'final_emotion,turn_grpo' -> the arm names, in order; ConfigError on 'arms' for an unknown or repeated
    one, or none."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in ARMS]
    if unknown or not names or len(set(names)) != len(names):
        problem = (f"unknown arm {unknown[0]!r}" if unknown else "an arm is named twice" if names else "no arm named")
        raise ConfigError({"arms": f"{problem}; comma-separated names of {', '.join(ARMS)}"})
    return names


def arm_config(base: TrainConfig, name: str) -> TrainConfig:
    """The base config with the arm's settings, checked (ConfigError naming the field). Every arm keeps the
    base's dialogues per step, seed and schedule: a PPO arm has one dialogue per profile, so more profiles."""
    return replace(base, **ARMS[name]).validate(check_paths=False)


def arm_settings(name: str) -> str:
    """'grpo, reward final_emotion, advantage turn_grpo'."""
    a = ARMS[name]
    return f"{a['algorithm']}, reward {a['reward']}, advantage {a['advantage']}"


def _cell(finals: Sequence[Optional[float]], before: Optional[float]) -> tuple[str, str, str]:
    from simulator.evaluation.scoring import sentient_summary

    s = sentient_summary(list(finals))
    change = f"{s.mean - before:+.1f}" if before is not None else "-"
    return f"{s.score:.1f} [{s.ci_low:.1f}, {s.ci_high:.1f}]", f"{s.failure} / {s.n}", change


def arms_table(rows: Sequence[dict[str, Any]], before: Optional[dict[str, Sequence[Optional[float]]]] = None
               ) -> list[str]:
    """Markdown lines, one row per arm: {"arm", "steps", "minutes", "heldout": finals, "adversarial": finals}
    (final emotions, None for a dialogue that errored); `before`: the untrained policy's finals per set, shown
    as the first row and the base of the change columns."""
    from simulator.evaluation.scoring import sentient_summary

    base = {k: sentient_summary(list(v)).mean for k, v in (before or {}).items()}
    lines = [ARMS_TABLE_HEADER, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    shown = [({"arm": "before training", "steps": 0, "minutes": 0.0, **before}, {})] if before else []
    for r in [*shown, *((r, base) for r in rows)]:
        row, against = r
        held, adv = (_cell(row[k], against.get(k)) for k in ("heldout", "adversarial"))
        settings = arm_settings(row["arm"]) if row["arm"] in ARMS else "-"
        lines.append(f"| {row['arm']} | {settings} | {row['steps']} | {row['minutes']:.1f} | {held[0]} | {held[1]} | "
                     f"{held[2]} | {adv[0]} | {adv[1]} | {adv[2]} |")
    return lines
