"""Time `python -m simulator import-human` against the size of an ESConv-shaped corpus file.

    python benchmarks/people/import_speed.py [--sizes-mb 1 5 20 50] [--shape PATH] [--before REV] [--before-max-mb 5]

The files are synthetic and written to a temporary folder, never kept: each conversation copies the structure
of one conversation of the shape file (ESConv's release format; default the shared
../shared/data/esconv/esconv-failed-136.json, else the test corpus's shape): its speakers in order, which
turns carry a feedback or a strategy, the survey's keys and every text's length, with made-up words for the
texts and random 1-5 values for the numbers. No text of the shape file is written. Each size is imported into
a new SQLite store by the command in its own process; the table gives its wall time, CPU time and peak memory.
`--before REV` also times the record splitting alone (`split_records`) of the human-corpus module at that
commit (read with `git show`), on the sizes up to --before-max-mb.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SHARED_SHAPE = REPO.parent / "shared" / "data" / "esconv" / "esconv-failed-136.json"
WORDS = ("i", "feel", "so", "tired", "of", "work", "and", "my", "friend", "says", "that", "it", "will", "get",
         "better", "but", "really", "do", "not", "know", "what", "to", "anymore", "you", "sound", "hard")
SCORE_KEYS = ("feedback", "initial_emotion_intensity", "final_emotion_intensity", "empathy", "relevance")


def filler(n_chars: int, rng: np.random.Generator) -> str:
    """Made-up words of about n_chars characters."""
    words, length = [], 0
    while length < n_chars:
        words.append(WORDS[int(rng.integers(len(WORDS)))])
        length += len(words[-1]) + 1
    return " ".join(words)[:max(n_chars, 1)]


def synthetic(value: Any, key: str, rng: np.random.Generator) -> Any:
    """`value` with its structure kept: texts replaced by filler of the same length, scores by random 1-5."""
    if isinstance(value, dict):
        return {k: synthetic(v, k, rng) for k, v in value.items()}
    if isinstance(value, list):
        return [synthetic(v, key, rng) for v in value]
    if isinstance(value, str):
        if key in SCORE_KEYS and value.strip().isdigit():
            return str(int(rng.integers(1, 6)))
        if key in ("speaker", "strategy", "emotion_type", "problem_type", "experience_type"):
            return value  # labels (who speaks, the strategy's and the problem's category), not people's text
        return filler(len(value), rng)
    return value


def shapes(path: Path) -> list[dict[str, Any]]:
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    from testkit.human_corpus import esconv_conversation

    rng = np.random.default_rng(0)
    return [esconv_conversation(k, rng, replies=8 + k % 9) for k in range(50)]


def write_corpus(path: Path, mb: float, shape: list[dict[str, Any]], seed: int = 0) -> int:
    """An ESConv-format file of about `mb` MB (indented as the release is); returns its conversations."""
    rng, target, written, n = np.random.default_rng(seed), int(mb * 1_000_000), 0, 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[\n")
        while written < target:
            text = json.dumps(synthetic(shape[n % len(shape)], "", rng), indent=1, ensure_ascii=False)
            fh.write((",\n" if n else "") + text)
            written += len(text) + 2
            n += 1
        fh.write("\n]\n")
    return n


def run_import(path: Path, db: str) -> dict[str, Any]:
    """The import command's result line, wall s, CPU s (user + system) and peak RSS (MiB) of its process."""
    cmd = [sys.executable, "-m", "simulator", "import-human", str(path), "--format", "esconv", "--db", db, "--json"]
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=err,
                                env=dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1"))
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"import failed: {stderr[-2000:]}")
    return {**json.loads(stdout.strip().splitlines()[-1]), "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mib": usage.ru_maxrss / 1024}


def old_split_seconds(rev: str, text: str) -> float:
    """Seconds the record splitting of the human-corpus module at commit `rev` takes on `text`."""
    source = subprocess.run(["git", "show", f"{rev}:simulator/evaluation/human_corpora.py"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="old-corpora-"))
    (folder / "old_human_corpora.py").write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_human_corpora", folder / "old_human_corpora.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    t0 = time.process_time()
    module.split_records(text, "esconv")
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 5, 20, 50])
    ap.add_argument("--shape", type=Path, default=SHARED_SHAPE, help="an ESConv-format file whose structure to copy")
    ap.add_argument("--before", default="", metavar="REV", help="also time the splitting of this commit's module")
    ap.add_argument("--before-max-mb", type=float, default=5)
    args = ap.parse_args()
    from simulator.corpora.splitting import split_records

    shape = shapes(args.shape)
    print(f"shape: {args.shape if args.shape.is_file() else 'testkit.human_corpus'} ({len(shape)} conversations)")
    head = "| file MB | conversations | turns | ratings | import wall s | import CPU s | CPU s per MB | peak RSS MiB " \
           "| split CPU s"
    print(head + (f" | split CPU s at {args.before} |" if args.before else " |"))
    print("|---" * (head.count("|") + bool(args.before)) + "|")
    for mb in args.sizes_mb:
        folder = Path(tempfile.mkdtemp(prefix="import-speed-"))
        path = folder / "ESConv.json"
        n = write_corpus(path, mb, shape)
        size = path.stat().st_size / 1_000_000
        text = path.read_text(encoding="utf-8")
        t0 = time.process_time()
        for _ in split_records(text, "esconv"):
            pass
        split_s = time.process_time() - t0
        r = run_import(path, f"sqlite:///{folder}/lab.db")
        assert r["imported"] == n, r
        row = (f"| {size:.1f} | {n:,} | {r['turns']:,} | {r['ratings']:,} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
               f"{r['cpu_s'] / size:.2f} | {r['rss_mib']:.0f} | {split_s:.2f}")
        if args.before:
            row += f" | {old_split_seconds(args.before, text):.2f}" if mb <= args.before_max_mb else " | -"
        print(row + " |", flush=True)
        path.unlink()
        (folder / "lab.db").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
