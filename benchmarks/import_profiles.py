"""Profile import speed: N valid profiles into a fresh SQLite store, and the refusal of the same file with
one bad last line (everything parsed and checked, nothing stored).

    python benchmarks/import_profiles.py [--n 100000] [--dir /tmp]

The profiles are the built-in library's (lab JSONL, ~4.4 KB a line with their events and examples) under
fresh ids. Each import runs as `python -m simulator personas import` in a child process, so the table
shows the command's own wall time and peak resident memory.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def write_profiles(path: Path, n: int, bad_last: bool = False) -> int:
    """Write n profiles (the last one invalid when bad_last); returns the file size in bytes."""
    from simulator.personas.builtin import BUILTIN_PROFILES

    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            record = BUILTIN_PROFILES[i % len(BUILTIN_PROFILES)].to_dict()
            record["id"] = f"p{i:07d}"
            if bad_last and i == n - 1:
                record["need_category"] = ["not", "text"]
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path.stat().st_size


def timed_import(path: Path, db: Path) -> tuple[float, float, int]:
    """(wall seconds, peak MB, exit status) of `python -m simulator personas import PATH`."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "r = subprocess.run([sys.executable, '-m', 'simulator', 'personas', 'import', sys.argv[1], '--db', "
            "sys.argv[2]], capture_output=True); "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, r.returncode)")
    out = subprocess.run([sys.executable, "-c", code, str(path), f"sqlite:///{db}"], cwd=REPO, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="where the files and stores go (default: a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        rows = []
        for label, bad in (("import (all valid)", False), ("refusal (last line bad)", True)):
            path = Path(tmp) / f"profiles-{int(bad)}.jsonl"
            size = write_profiles(path, args.n, bad_last=bad)
            wall, peak, code = timed_import(path, Path(tmp) / f"lab-{int(bad)}.db")
            if code != (1 if bad else 0):
                raise SystemExit(f"{label}: unexpected exit status {code}")
            rows.append((label, size / 1e6, wall, 1000 * wall / args.n, peak))
            path.unlink()
    print(f"{args.n} profiles")
    print(f"| {'run':<24} | {'file MB':>8} | {'wall s':>7} | {'ms/profile':>10} | {'peak MB':>8} |")
    print(f"|{'-' * 26}|{'-' * 10}|{'-' * 9}|{'-' * 12}|{'-' * 10}|")
    for label, mb, wall, per, peak in rows:
        print(f"| {label:<24} | {mb:>8.0f} | {wall:>7.1f} | {per:>10.3f} | {peak:>8.0f} |")


if __name__ == "__main__":
    main()
