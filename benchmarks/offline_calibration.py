"""How well the offline simulator's scorers separate good replies from bad ones on a labelled set.

    python benchmarks/offline_calibration.py [--data tests/data/offline_calibration.jsonl] [--scorers v2 v3]
                                             [--fit] [--time] [--threads 1]

tests/data/offline_calibration.jsonl holds (persona, last user message, reply, label good/bad, kind) rows
written for this purpose, on the 32 built-in personas; the user message is the persona's first line
("context": "first") or the second detail of its story ("event"). Kinds: tailored (hand-written answers to
that message and need, 64, good), generic (good only for the two just-listen personas where the sentence
invites them to go on), dismissive, shuffled (a tailored reply's words shuffled), recited (the user's message
with I/my turned into you/your), recited_need_shuffled (the message plus the hidden need, words shuffled),
wrong_persona (a tailored reply written for a persona of another need), advice_dump (for just-listen needs),
flattery (for needs that want the situation analysed or explained), nonsense (fluent frames, half of them
filled with the user's topic words), smollm2_t0.7 / smollm2_t1.0 (SmolLM2-135M-Instruct with the lab's
direct-mode system prompt, one sample per persona and temperature, labelled by reading each one: good only
when it is a coherent, relevant answer that would help this person).

Each row is scored as the emotion step of a one-message dialogue (standard rules) and the score is the sum
of the component points before rounding and clamping. Printed: the AUC (probability that a random good row
scores above a random bad one; ties count half) over all rows, by persona split (train / held-out: the
coherence thresholds were chosen looking at the train split only) and for each bad kind against all good
rows. --fit prints the coherence measures by kind, and the lowest value and 10th percentile of each over
the good rows of the train split, from which the constants in simulator/user/backends/coherence.py were set
(the comment there says how). --time N measures the added time per judged turn of v3 over v2 (N turns one
at a time, the first N rows: replies that all reach the language model; caches cold for the coherence
model, warm for the embeddings), in wall time and in process CPU time (steadier on a shared machine).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from simulator.personas.builtin import BUILTIN_PROFILES  # noqa: E402
from simulator.user.backends.offline import OfflineBackend  # noqa: E402
from simulator.user.rules import get_rules  # noqa: E402

DATA = REPO / "tests" / "data" / "offline_calibration.jsonl"


def load_rows(path: Path) -> list[dict]:
    """The labelled rows; every persona id must be a built-in one."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    known = {p.id for p in BUILTIN_PROFILES}
    bad = [r["persona"] for r in rows if r["persona"] not in known]
    if bad:
        raise ValueError(f"unknown persona id(s) in {path}: {', '.join(sorted(set(bad)))}")
    return rows


async def judge(backend: OfflineBackend, row: dict) -> dict:
    """The emotion step of `row`'s reply after its user message (a fresh one-message dialogue)."""
    profile = next(p for p in BUILTIN_PROFILES if p.id == row["persona"])
    history = [{"role": "user", "content": row["user"]}]
    return await backend.emotion_step(profile, get_rules("standard"), 40.0, history, row["reply"], {})


def score_rows(backend: OfflineBackend, rows: list[dict]) -> list[dict]:
    """Every row judged concurrently (batched like a rollout step)."""
    async def run() -> list[dict]:
        return await asyncio.gather(*[judge(backend, r) for r in rows])
    return asyncio.run(run())


def points(analysis: dict) -> float:
    return float(sum(c["points"] for c in analysis["components"].values()))


def auc(good: list[float], bad: list[float]) -> float:
    """P(a good score > a bad score), ties half (the Mann-Whitney statistic)."""
    if not good or not bad:
        return float("nan")
    wins = sum((g > b) + 0.5 * (g == b) for g in good for b in bad)
    return wins / (len(good) * len(bad))


def split_of(pid: str) -> str:
    return next(p.extra.get("split", "train") for p in BUILTIN_PROFILES if p.id == pid)


def report(rows: list[dict], scores: dict[str, list[float]]) -> None:
    """AUC table: overall, by split, by bad kind."""
    names = list(scores)
    print(f"{'rows':<28}{'n good':>8}{'n bad':>7}" + "".join(f"{'AUC ' + n:>10}" for n in names))

    def line(label: str, keep_good, keep_bad) -> None:
        idx_g = [i for i, r in enumerate(rows) if r["label"] == "good" and keep_good(r)]
        idx_b = [i for i, r in enumerate(rows) if r["label"] == "bad" and keep_bad(r)]
        cells = "".join(f"{auc([scores[n][i] for i in idx_g], [scores[n][i] for i in idx_b]):>10.3f}" for n in names)
        print(f"{label:<28}{len(idx_g):>8}{len(idx_b):>7}{cells}")

    line("all", lambda r: True, lambda r: True)
    for split in ("train", "heldout"):
        line(f"personas of split {split}", lambda r, s=split: split_of(r["persona"]) == s,
             lambda r, s=split: split_of(r["persona"]) == s)
    for kind in sorted({r["kind"] for r in rows if r["label"] == "bad"}):
        line(f"good vs {kind}", lambda r: True, lambda r, k=kind: r["kind"] == k)
    print("mean score by kind and label: " + "; ".join(
        f"{k}/{lab} " + " ".join(f"{statistics.mean(scores[n][i] for i in idx):+.1f}" for n in names)
        for k, lab in sorted({(r["kind"], r["label"]) for r in rows})
        for idx in [[i for i, r in enumerate(rows) if (r["kind"], r["label"]) == (k, lab)]]))


def fit(rows: list[dict]) -> None:
    """The coherence measures by kind, and the lowest value and 10th percentile of each over the good rows of
    the train split (what the thresholds in simulator/user/backends/coherence.py were set from)."""
    from simulator.user.backends.coherence import coherence_sync

    raw = coherence_sync([(r["user"], r["reply"]) for r in rows])
    measures = {"fluency": [float(f) for f, _ in raw], "gain": [float(f - a) for f, a in raw]}
    print(f"\n{'kind/label':<28}{'n':>4}" + "".join(f"{m + ' p10':>14}{m + ' med':>14}" for m in measures))
    for k, lab in sorted({(r["kind"], r["label"]) for r in rows}):
        idx = [i for i, r in enumerate(rows) if (r["kind"], r["label"]) == (k, lab)]
        cells = ""
        for m, v in measures.items():
            vals = sorted(v[i] for i in idx)
            cells += f"{vals[len(vals) // 10]:>14.2f}{statistics.median(vals):>14.2f}"
        print(f"{k + '/' + lab:<28}{len(idx):>4}{cells}")
    good = [i for i, r in enumerate(rows) if split_of(r["persona"]) == "train" and r["label"] == "good"]
    for m, v in measures.items():
        vals = sorted(v[i] for i in good)
        print(f"{m}: good rows of the train split: lowest {vals[0]:.2f}, 10th percentile {vals[len(vals) // 10]:.2f}")


def time_added(rows: list[dict], n: int) -> None:
    """Mean wall time per judged turn, one turn at a time: v2 (embeddings warm) and v3 (coherence cold)."""
    sample = rows[:n]
    v2, v3 = OfflineBackend(scorer="v2"), OfflineBackend(scorer="v3")
    for r in sample:  # warm the embeddings and load both models
        asyncio.run(judge(v2, r))
    from simulator.user.backends.coherence import get_scorer
    get_scorer()
    wall, cpu = {}, {}
    for name, backend in (("v2", v2), ("v3", v3)):
        t0, c0 = time.perf_counter(), time.process_time()
        for r in sample:
            asyncio.run(judge(backend, r))
        wall[name] = (time.perf_counter() - t0) / len(sample) * 1000
        cpu[name] = (time.process_time() - c0) / len(sample) * 1000
    print(f"\nper judged turn, one at a time, {len(sample)} turns (embeddings cached): wall v2 {wall['v2']:.0f} ms, "
          f"v3 {wall['v3']:.0f} ms, added {wall['v3'] - wall['v2']:.0f} ms; process CPU time v2 {cpu['v2']:.0f} ms, "
          f"v3 {cpu['v3']:.0f} ms, added {cpu['v3'] - cpu['v2']:.0f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--scorers", nargs="+", default=["v2", "v3"], choices=["v2", "v3"])
    ap.add_argument("--fit", action="store_true", help="print the coherence measures and best thresholds")
    ap.add_argument("--time", type=int, default=0, metavar="N", help="time N judged turns one at a time")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--skip-auc", action="store_true", help="do not score the whole set (with --fit / --time)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    rows = load_rows(args.data)
    kinds = sorted({r["kind"] for r in rows})
    print(f"{args.data.name}: {len(rows)} rows, {sum(r['label'] == 'good' for r in rows)} good; kinds: "
          + ", ".join(f"{k} {sum(r['kind'] == k for r in rows)}" for k in kinds))
    if not args.skip_auc:
        analyses = {s: score_rows(OfflineBackend(scorer=s), rows) for s in args.scorers}
        report(rows, {f"offline-{s}": [points(a) for a in analyses[s]] for s in args.scorers})
    if args.fit:
        fit(rows)
    if args.time:
        time_added(rows, args.time)
    return 0


if __name__ == "__main__":
    sys.exit(main())
