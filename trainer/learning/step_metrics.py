"""A training step's rollout metrics: each dialogue summarised, then reward, emotion, outcome and length
statistics over the step (what the Training view and the trackers plot)."""
from __future__ import annotations

import statistics
from typing import Any

from simulator.user.rules import tier


def lost_dialogue(s: Any) -> bool:
    """Cancelled, or failed on the simulator's side: not the policy's doing, so not trained on."""
    return s.status == "cancelled" or s.error.startswith("simulator")


def dialogue_summary(s: Any, reward: float) -> dict[str, Any]:
    return {"reward": reward, "final": s.final_emotion, "outcome": s.outcome, "lost": lost_dialogue(s),
            "error": s.error, "turns": s.n_turns, "reply_tokens": sum(b - a for a, b in s.turn_spans),
            "failed": s.status == "failed", "format_ok": s.format_ok}


def rollout_metrics(summaries: list[dict[str, Any]], think: bool = False) -> dict[str, float]:
    """Reward mean/std, final-emotion mean and tier distribution, success/failure rates, lengths; in think
    mode also think_format_rate, the share of dialogues whose every reply opened with one closed think
    block (a model that never writes one is trained on direct replies under the think prompt)."""
    used = [x for x in summaries if not x["lost"]] or summaries
    rewards = [x["reward"] for x in used]
    finals = [x["final"] for x in used if x["final"] is not None]
    n = len(used)
    out = {
        "reward_mean": statistics.fmean(rewards), "reward_std": statistics.pstdev(rewards),
        "success_rate": sum(x["outcome"] == "success" for x in used) / n,
        "failure_rate": sum(x["outcome"] == "failure" for x in used) / n,
        "error_rate": sum(x["failed"] for x in summaries) / len(summaries),
        "turns_mean": statistics.fmean(x["turns"] for x in used),
        "reply_tokens_mean": sum(x["reply_tokens"] for x in used) / max(1, sum(x["turns"] for x in used)),
    }
    if think:
        out["think_format_rate"] = sum(x["format_ok"] for x in used) / n
    if finals:
        out["final_emotion_mean"] = statistics.fmean(finals)
        out["final_emotion_std"] = statistics.pstdev(finals)
        for name in ("S", "A", "B", "C", "F"):
            out[f"emotion_tier_{name}"] = sum(tier(f) == name for f in finals) / len(finals)
    return out
