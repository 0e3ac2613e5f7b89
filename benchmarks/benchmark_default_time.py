"""How long the default benchmark takes on this machine: SmolLM2 against the offline simulator on the first
N built-in personas, with the protocol's defaults (the local reply cap and the repetition stop).

    python -m benchmarks.benchmark_default_time [--limit 3] [--no-stop-on-repetition] [--db sqlite:////tmp/b.db]

Runs `python -m trainer benchmark --policy default --simulator offline --profiles builtin --limit N --json` as a
subprocess (so the figure includes loading the models), then reads the eval run from the store and prints one
table: wall s | dialogues | replies | replies cut (cap or loop) | policy tokens | tok/s | score | protocol hash.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--no-stop-on-repetition", action="store_true")
    ap.add_argument("--db", default=None, help="store URL (default: a new SQLite file in a temp folder)")
    args = ap.parse_args()
    db = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='bench-time-')}/lab.db"
    cmd = [sys.executable, "-m", "trainer", "benchmark", "--policy", "default", "--simulator", "offline",
           "--profiles", "builtin", "--limit", str(args.limit), "--db", db, "--json"]
    if args.no_stop_on_repetition:
        cmd.append("--no-stop-on-repetition")
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1"))
    wall = time.monotonic() - t0
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
        return r.returncode
    result = json.loads(r.stdout)
    from storage import make_store
    from trainer.benchmarking.progress import run_progress

    p = run_progress(make_store(db), result["eval_run_id"])
    print("| wall s | dialogues | replies | replies cut | policy tokens | tok/s (run) | score | protocol |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    print(f"| {wall:.0f} | {p['done']} | {p['replies']} | {result['truncations']['replies_cut']} | {p['tokens']} | "
          f"{p['tokens_per_s']:.1f} | {result['score']} | {result['protocol_hash']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
