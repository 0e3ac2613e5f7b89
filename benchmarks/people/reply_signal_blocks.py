"""Which features of a reply signal carry what people rate: held-out agreement per feature block.

    python benchmarks/people/reply_signal_blocks.py --db STORE --set human:esconv [--fingerprint PREFIX] [--folds 5]
                                                    [--map scale|predict] [--within]

Reads a human set and one simulator's shadow judgements of it (python -m trainer shadow), then cross-validates
the two-level calibration (simulator.fitting.reply_signal_fit, dialogue-grouped folds) with only some of the
signal's feature blocks: what the user said so far, the reply, the reply against the user's last message. Prints
the held-out per-turn Spearman (pooled and within a dialogue) and mean difference and the per-dialogue Spearman
with dialogue-resampled 95% intervals, beside the map alone, and the share of the people's per-turn score variance that lies between
dialogues (what no reply can move). --within adds each arm fitted within dialogues (features and residuals
centred on their dialogue: what ranks one conversation's replies, none of what tells one person from another).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from simulator.fitting.monotone_map import MAPS  # noqa: E402

BLOCKS = {"said": 0, "reply": 1, "answer": 2}  # position of each DIM-wide block in the features
ARMS = (("said",), ("reply",), ("answer",), ("reply", "answer"), ("said", "reply", "answer"))


def masked(rows: dict, keep: tuple[str, ...], dim: int) -> dict:
    """The feature rows with every block not kept zeroed (the ridge then gives it no weight); the constant stays."""
    mask = np.zeros(3 * dim + 1)
    mask[-1] = 1.0
    for name in keep:
        mask[BLOCKS[name] * dim:(BLOCKS[name] + 1) * dim] = 1.0
    return {k: v * mask for k, v in rows.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--set", dest="set_spec", default="human:esconv")
    ap.add_argument("--fingerprint", default="", help="the judging simulator's fingerprint hash prefix")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--map", default=MAPS[0], choices=MAPS, help="the first level's map")
    ap.add_argument("--within", action="store_true",
                    help="also fit each arm within dialogues (features and residuals centred on their dialogue)")
    args = ap.parse_args()
    from simulator.evaluation.human_agreement import load_set, tables, units_of
    from simulator.fitting.monotone_map import cross_validate
    from simulator.fitting.reply_signal_fit import cross_validate_signal, reply_feature_rows
    from simulator.user.reply_signal import DIM
    from storage import make_store

    store = make_store(args.db)
    dialogues, sims = load_set(store, args.set_spec)
    chosen = [h for h in sims if h.startswith(args.fingerprint)]
    if len(chosen) != 1:
        print(f"--fingerprint: {len(chosen)} simulators' judgements match {args.fingerprint!r}: {', '.join(sims)}")
        return 2
    units = units_of(dialogues, sims[chosen[0]]["deltas"])
    rows = reply_feature_rows(store, units)
    scores = np.array([u["score"] for u in units["turns"]])
    by_dialogue = np.array([u["dialogue"] for u in units["turns"]])
    within = scores - np.array([scores[by_dialogue == d].mean() for d in by_dialogue])
    print(f"{args.set_spec}, simulator {chosen[0]}: {len(units['turns'])} rated turns in "
          f"{len(set(by_dialogue))} dialogues; {1 - within.var() / scores.var():.1%} of the score variance lies "
          f"between dialogues; {args.folds}-fold cross-validation over dialogues, seed {args.seed}")

    def cell(e: dict) -> str:
        return "-" if e["value"] is None else f"{e['value']:+.3f} [{e['ci_low']:+.2f}, {e['ci_high']:+.2f}]"

    print(f"| {'signal blocks':<36} | {'turn Spearman':<24} | {'within a dialogue':<24} | {'turn sim - people':<24} | "
          f"{'dialogue Spearman':<24} |")
    print(f"|{'-' * 38}|{'-' * 26}|{'-' * 26}|{'-' * 26}|{'-' * 26}|")
    arms = [(f"(map only: {args.map})", lambda: cross_validate(units, 5.0, k=args.folds, seed=args.seed,
                                                              method=args.map))]
    for within in (False, True) if args.within else (False,):
        arms += [(" + ".join(keep) + (", within" if within else ""),
                  lambda keep=keep, within=within: cross_validate_signal(
                      units, masked(rows, keep, DIM), 5.0, k=args.folds, seed=args.seed, method=args.map,
                      within=within)) for keep in ARMS]
    for name, held in arms:
        t = tables(held(), args.n_boot, args.seed, 5.0, 25.0)
        print(f"| {name:<36} | {cell(t['turns']['spearman']):<24} | {cell(t['turns']['within_spearman']):<24} | "
              f"{cell(t['turns']['mean_diff']):<24} | {cell(t['dialogues']['spearman']):<24} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
