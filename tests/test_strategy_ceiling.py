"""benchmarks/people/strategy_ceiling.py finds a strategy that people reward within their conversations when one
is planted (seekers who rate everything at their own level, plus two points after a reflection of feelings),
and says how the variance splits between and within dialogues."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "people" / "strategy_ceiling.py"


def planted(k: int, rng: np.random.Generator) -> dict:
    level = int(rng.integers(1, 4))
    dialog = [{"speaker": "seeker", "content": f"I have been struggling ({k}).", "annotation": {}}]
    for r in range(6):
        strategy = ("Reflection of feelings", "Providing Suggestions")[int(rng.integers(0, 2))]
        dialog.append({"speaker": "supporter", "content": f"Reply {k}.{r}", "annotation": {"strategy": strategy}})
        score = level + (2 if strategy == "Reflection of feelings" else 0)
        dialog.append({"speaker": "seeker", "content": f"Answer {k}.{r}", "annotation": {"feedback": str(score)}})
    return {"emotion_type": "sadness", "problem_type": "job crisis", "situation": f"Case {k}", "dialog": dialog}


def test_a_planted_strategy_is_found_within_dialogues(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "planted.json"
    path.write_text(json.dumps([planted(k, rng) for k in range(40)]), encoding="utf-8")
    out = subprocess.run([sys.executable, str(SCRIPT), str(path), "--n-boot", "200"], capture_output=True,
                         text=True, check=True).stdout
    assert "40 conversations, 240 rated spans" in out
    share = float(re.search(r"; ([\d.]+)% of the feedback's variance lies within dialogues", out).group(1))
    assert 30 < share < 80  # the level varies between people, the strategy within
    reflection = re.search(r"Reflection of feelings\s+\d+\s+([+-][\d.]+)", out)
    assert float(reflection.group(1)) > 0.5
    within = re.search(r"^strategies\s+([+-][\d.]+) \[([+-][\d.]+),", out, re.M)
    assert float(within.group(1)) > 0.9 and float(within.group(2)) > 0.8
