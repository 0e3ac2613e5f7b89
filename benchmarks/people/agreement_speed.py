"""Time the agreement report (simulator.evaluation.agreement.agreement_report) at 600 and 5,000 rated turns.

    python benchmarks/people/agreement_speed.py [--turns 600 5000] [--n-boot 1000] [--before REV] [--before-boot 3]

The rating set is synthetic, shaped like a pooled rating round: about 2.5 ratings a turn by 8 raters with
continuous values (scripted raters: the simulator's change plus bias and noise), two simulator fingerprints,
seven needs and three personalities, so the report has 13 groups. `--before REV` also times the report of the
agreement module at that commit (read with `git show`); at 5,000 turns it runs `--before-boot` resamples
and the time for the full count is extrapolated linearly (marked "~"), since the old alpha builds an n x n
matrix per resample (1.4 GB, 14 s each at 12,800 ratings).
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

NEEDS = ("just_listen", "useful_advice", "dialectical_analysis", "validation", "distraction", "encouragement",
         "explanation")


def rating_rows(n_turns: int, seed: int = 0) -> list[dict[str, Any]]:
    """n_turns rated turns, 1 to 4 ratings each (mean ~2.5), continuous values."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_turns):
        sim = float(rng.integers(-10, 11))
        base = {"dialogue_id": t // 5, "turn_index": 2 * (t % 5) + 2, "simulator_delta": sim,
                "fingerprint_hash": ("fp-a", "fp-b")[t % 2], "need_category": NEEDS[t % 7],
                "personality": ("positive", "negative", "neutral")[t % 3]}
        raters = rng.choice(8, size=int(rng.integers(1, 5)), replace=False)
        for r in raters:
            rows.append({**base, "rater": f"rater-{r}", "delta": float(sim - 1 + rng.normal(0, 3))})
    return rows


def old_module(rev: str):
    """The agreement module as it was at `rev`."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:simulator/evaluation/agreement.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "agreement_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("agreement_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(report_fn, rows: list[dict[str, Any]], n_boot: int) -> float:
    start = time.perf_counter()
    report_fn(rows, n_boot=n_boot)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[600, 5000])
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--before", metavar="REV", help="also time the module at this commit")
    parser.add_argument("--before-boot", type=int, default=3,
                        help="resamples the old module runs at 5,000 turns (its time is extrapolated)")
    args = parser.parse_args(argv)
    from simulator.evaluation.agreement import agreement_report

    old = old_module(args.before) if args.before else None
    print(f"{'turns':>6} {'ratings':>8} {'before (s)':>14} {'after (s)':>10}   n_boot {args.n_boot}")
    for n in args.turns:
        rows = rating_rows(n)
        before = ""
        if old is not None:
            if n <= 1000:
                before = f"{timed(old.agreement_report, rows, args.n_boot):.1f}"
            else:
                k = args.before_boot
                t = timed(old.agreement_report, rows, k)
                before = f"~{t / (k + 1) * (args.n_boot + 1):.0f}"
        after = timed(agreement_report, rows, args.n_boot)
        print(f"{n:>6} {len(rows):>8} {before:>14} {after:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
