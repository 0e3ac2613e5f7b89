"""Published reference results, shown beside the lab's own eval runs and never ranked with them.

Numbers are from RLVER (arXiv 2507.03112, Table: Sentient benchmark, Qwen2.5-7B-Instruct base) and the
Sentient leaderboard (SAGE, arXiv 2505.02847). Both used DeepSeek-V3 as the simulated user, 100 test
profiles, emotion starting at 40 with changes clamped to +-10 and at most 10 policy turns; success and
failure are counts out of 100 (= percent). Their simulator is not ours, so these rows carry their own
simulator label and a fingerprint key of their own: a lab score is comparable to them only when it was
produced with that simulator and protocol.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PUBLISHED_SIMULATOR = "DeepSeek-V3 (published)"
PUBLISHED_FINGERPRINT = "published:deepseek-v3"  # a group key that no lab fingerprint hash can equal
PUBLISHED_PROTOCOL = {"start": 40.0, "max_delta": 10.0, "max_turns": 10, "n_profiles": 100}


@dataclass(frozen=True)
class PublishedResult:
    model: str
    score: float
    success: int  # of 100 dialogues (= percent)
    failure: int
    source: str
    simulator: str = PUBLISHED_SIMULATOR
    n: int = 100
    published: bool = True
    fingerprint_hash: str = PUBLISHED_FINGERPRINT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_RLVER = "RLVER paper (arXiv 2507.03112), Sentient benchmark"
_BOARD = "Sentient leaderboard (SAGE, arXiv 2505.02847)"

PUBLISHED: tuple[PublishedResult, ...] = (
    PublishedResult("Qwen2.5-7B-Instruct (base)", 13.3, 2, 76, _RLVER),
    PublishedResult("Qwen2.5-7B-Instruct + PPO (RLVER)", 61.7, 24, 23, _RLVER),
    PublishedResult("Qwen2.5-7B-Instruct + PPO + think (RLVER)", 79.2, 42, 9, _RLVER),
    PublishedResult("Qwen2.5-7B-Instruct + GRPO (RLVER)", 68.3, 26, 10, _RLVER),
    PublishedResult("Qwen2.5-7B-Instruct + GRPO + think (RLVER)", 72.0, 34, 10, _RLVER),
    PublishedResult("GPT-4o-latest", 79.9, 51, 4, _BOARD),
    PublishedResult("GPT-4.1", 68.2, 35, 13, _BOARD),
    PublishedResult("Gemini 2.5 Pro", 62.9, 34, 25, _BOARD),
    PublishedResult("Qwen2.5-72B-Instruct", 19.1, 4, 70, _BOARD),
)


def published_rows() -> list[dict[str, Any]]:
    """The published rows as dicts, highest score first."""
    return [r.to_dict() for r in sorted(PUBLISHED, key=lambda r: -r.score)]


# The emotion changes DeepSeek-V3 gave as SAGE's simulated user in ten published Sentient leaderboard
# files: 7,936 judged replies, 99.9% of them exactly +-5 or +-10 (see ../shared/docs/rlver-reference.md).
# simulator.evaluation.fidelity compares a lab simulator's changes with this histogram.
PUBLISHED_CHANGES: dict[int, int] = {-10: 1041, -5: 2700, 0: 5, 2: 1, 5: 2928, 10: 1261}
PUBLISHED_CHANGES_SOURCE = "DeepSeek-V3 in ten Sentient leaderboard files (7,936 judged replies)"
