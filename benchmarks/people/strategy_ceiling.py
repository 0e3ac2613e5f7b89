"""What a reader of the supporters' own strategy could teach about the people's feedback within one conversation.

A reward compares replies to one person, so what a calibrated simulator needs is what ranks one conversation's
replies as its seeker did. ESConv's annotators labelled every supporter message with its strategy (question,
reflection of feelings, suggestion, ...): the best a reader of what a reply does could know. This prints, on an
ESConv file read as `import-human` reads it (consecutive messages merged, the span of replies before each rated
seeker turn):

  share of the feedback's variance within dialogues (what a reward can compare)
  per strategy: the dialogue-centred feedback of spans holding it, with a 95% interval over dialogues
  held out (dialogue-grouped folds): the within-dialogue Spearman of a ridge fit of the centred feedback on the
  span's strategy counts, on its position in the conversation, and on both (penalty chosen inside the fitting
  folds), beside the same fits pooled (not centred)

    python benchmarks/people/strategy_ceiling.py ../shared/data/esconv/esconv-failed-136.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from simulator.evaluation.agreement import bootstrap, centred, spearman  # noqa: E402
from simulator.evaluation.human_corpora import read_corpus  # noqa: E402
from simulator.evaluation.people.measures import dialogue_clusters, within_dialogue  # noqa: E402
from simulator.fitting.monotone_map import grouped_folds  # noqa: E402
from simulator.fitting.reply_signal_fit import choose_alpha, ridge  # noqa: E402


def rated_spans(dialogues: list[dict]) -> list[dict]:
    """Per rated seeker turn: its dialogue, score, the strategies of the replies since the previous rated turn and
    the turn's position among the dialogue's rated turns."""
    units = []
    for pos, d in enumerate(dialogues):
        strategies: list[str] = []
        k = 0
        for t in d["turns"]:
            if t["role"] == "assistant":
                strategies += t["strategies"]
            elif t["score"] is not None and strategies:
                units.append({"dialogue": pos, "score": float(t["score"]), "strategies": strategies, "position": k})
                strategies, k = [], k + 1
    return units


def held_out(x: np.ndarray, y: np.ndarray, dialogues: np.ndarray, folds: int, seed: int, within: bool) -> np.ndarray:
    """Predictions of each fold's units by a ridge fitted on the other folds (centred on dialogues when within)."""
    fold_of = grouped_folds(int(dialogues.max()) + 1, folds, seed)[dialogues]
    out = np.zeros(len(y))
    for f in range(folds):
        fit, test = fold_of != f, fold_of == f
        xf, yf = (centred(x[fit], dialogues[fit]), centred(y[fit], dialogues[fit])) if within else (x[fit], y[fit])
        xf = np.c_[xf, np.ones(fit.sum())]
        w = ridge(xf, yf, choose_alpha(xf, yf, dialogues[fit], seed))
        out[test] = np.c_[x[test], np.ones(test.sum())] @ w
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="an ESConv JSON file")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    dialogues, errors = read_corpus(Path(args.file).read_text(encoding="utf-8"), "esconv", "esconv")
    units = rated_spans(dialogues)
    if errors or not units:
        print(f"{args.file}: {len(errors)} bad conversation(s), {len(units)} rated span(s)", file=sys.stderr)
        return 2
    dialogue_of = np.array([u["dialogue"] for u in units])
    score = np.array([u["score"] for u in units])
    within_share = float(np.sum(centred(score, dialogue_of) ** 2) / np.sum((score - score.mean()) ** 2))
    print(f"{len(dialogues)} conversations, {len(units)} rated spans; {within_share:.1%} of the feedback's variance "
          "lies within dialogues")

    names = sorted({s for u in units for s in u["strategies"]})
    counts = np.array([[u["strategies"].count(s) for s in names] for u in units], dtype=float)
    centred_score = centred(score, dialogue_of)
    clusters = dialogue_clusters(units)
    print(f"\n{'strategy in the span':<32}{'spans':>6}  centred feedback [95% over dialogues]")
    for j, name in sorted(enumerate(names), key=lambda p: -np.count_nonzero(counts[:, p[0]])):
        has = counts[:, j] > 0

        def mean_with(i: np.ndarray, has=has) -> float | None:
            return float(centred_score[i][has[i]].mean()) if has[i].any() else None
        b = bootstrap(len(units), mean_with, args.n_boot, args.seed, clusters=clusters)
        ci = "" if b["ci_low"] is None else f" [{b['ci_low']:+.2f}, {b['ci_high']:+.2f}]"
        print(f"{name[:31]:<32}{int(has.sum()):>6}  {centred_score[has].mean():+.3f}{ci}")

    position = np.array([[u["position"]] for u in units], dtype=float)
    arms = {"strategies": counts, "position": position, "strategies + position": np.c_[counts, position]}
    print(f"\nheld out, {args.folds} dialogue-grouped folds [95% over dialogues]\n{'fit on':<24}"
          f"{'within-dialogue spearman':<34}pooled spearman (fit not centred)")
    for label, x in arms.items():
        inside = held_out(x, score, dialogue_of, args.folds, args.seed, within=True)
        pooled = held_out(x, score, dialogue_of, args.folds, args.seed, within=False)
        w = within_dialogue([{**u, "sim": float(p)} for u, p in zip(units, inside)], args.n_boot, args.seed)
        b = bootstrap(len(units), lambda i, p=pooled: spearman(p[i], score[i]), args.n_boot, args.seed,
                      clusters=clusters)
        rho = spearman(pooled, score)
        cell = ("-" if w["value"] is None else f"{w['value']:+.3f} [{w['ci_low']:+.3f}, {w['ci_high']:+.3f}]")
        pooled_cell = "-" if rho is None else f"{rho:+.3f} [{b['ci_low']:+.3f}, {b['ci_high']:+.3f}]"
        print(f"{label:<24}{cell:<34}{pooled_cell}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
