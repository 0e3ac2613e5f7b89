"""Fidelity report: does a simulator judge like the one behind the Sentient leaderboard?

For a set of dialogues (an eval run, a training step, an imported collection, or a SAGE `*_result.jsonl`
file) it counts the emotion changes of the judged user turns (every user turn that answers a policy
reply; the opening is not judged) and sets the histogram beside the published DeepSeek-V3 one
(simulator.evaluation.published.PUBLISHED_CHANGES: 99.9% of its changes are exactly +-5 or +-10). A change is the
turn's stored `delta` (in a file: the history item's `planning.change`), else the difference of its
emotion from the previous user turn's. A stored delta is the change the rules applied (clamped, capped
at 100); a user turn that ended in a simulator error is not counted.

Three numbers:
- `tv`: the total variation distance between the two histograms over the union of their values
  (0 = the same shares, 1 = no value in common);
- `within_sign`: the same distance after giving the lab's falls, zeros and rises the published shares of
  falls, zeros and rises. How often a policy earns a rise is the policy's doing (GPT-4.1's published
  dialogues rise 73% of the time, Qwen2.5-72B's 29%, the ten files together 53%); which sizes of rise
  and fall the simulator gives is the simulator's. By the triangle inequality `tv` is at most this
  distance plus the distance between the sign shares, so a file far in `tv` but near in `within_sign`
  judges like SAGE's simulator and was played by a better (or worse) policy than the leaderboard's mean;
- `share_5_10`: the share of changes that are exactly +-5 or +-10.

    python -m simulator fidelity FILE|--eval-run N|--job J [--step S] [--db URL] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from simulator.evaluation.published import PUBLISHED_CHANGES, PUBLISHED_CHANGES_SOURCE

Number = Union[int, float]
EXACT = (-10, -5, 5, 10)  # the values SAGE's published judgements almost always take
SCORED = ("finished", "failed")  # dialogues that ended (cancelled ones are played again on resume)


# ------------------------------------------------------------------------------------ the histogram
def _value(x: float) -> Number:
    r = round(float(x), 6)
    return int(r) if r.is_integer() else r


def value_label(v: Number) -> str:
    """'-10', '0', '+5': how a change value is written in tables and charts."""
    return f"{v:+g}" if v else "0"


def histogram(changes: Iterable[float]) -> dict[Number, int]:
    """Count of each change value, sorted by value (values equal to 6 decimals count as one)."""
    out: dict[Number, int] = {}
    for c in changes:
        v = _value(c)
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def shares(counts: Mapping[Number, int]) -> dict[Number, float]:
    n = sum(counts.values())
    return {v: c / n for v, c in counts.items()} if n else {}


def total_variation(p: Mapping[Number, int], q: Mapping[Number, int]) -> Optional[float]:
    """Half the summed absolute difference of the two histograms' shares over the union of their values."""
    sp, sq = shares(p), shares(q)
    if not sp or not sq:
        return None
    return 0.5 * sum(abs(sp.get(v, 0.0) - sq.get(v, 0.0)) for v in set(sp) | set(sq))


def _sign(v: Number) -> int:
    return (v > 0) - (v < 0)


def within_sign_distance(p: Mapping[Number, int], q: Mapping[Number, int]) -> Optional[float]:
    """Total variation between p and q within each sign (fall / zero / rise), weighted by q's sign shares,
    over the signs both have (renormalised): how the sizes of the changes differ, whatever their balance."""
    total, weight = 0.0, 0.0
    nq = sum(q.values())
    for sign in (-1, 0, 1):
        ps = {v: c for v, c in p.items() if _sign(v) == sign}
        qs = {v: c for v, c in q.items() if _sign(v) == sign}
        d = total_variation(ps, qs)
        if d is not None:
            w = sum(qs.values()) / nq
            total, weight = total + w * d, weight + w
    return total / weight if weight else None


def exact_share(counts: Mapping[Number, int]) -> Optional[float]:
    """Share of the changes that are exactly +-5 or +-10."""
    n = sum(counts.values())
    return sum(c for v, c in counts.items() if v in EXACT) / n if n else None


@dataclass(frozen=True)
class FidelityReport:
    """A set of dialogues' emotion changes beside the published histogram (see the module docstring)."""

    source: str  # what was measured, e.g. "gpt-4.1_result.jsonl" or "eval run 3"
    counts: dict[Number, int]  # change value -> judged user turns
    n_dialogues: int
    published: dict[Number, int] = field(default_factory=lambda: dict(PUBLISHED_CHANGES))

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    @property
    def tv(self) -> Optional[float]:
        return total_variation(self.counts, self.published)

    @property
    def within_sign(self) -> Optional[float]:
        return within_sign_distance(self.counts, self.published)

    @property
    def share_5_10(self) -> Optional[float]:
        return exact_share(self.counts)

    def rows(self) -> list[dict[str, Any]]:
        """value, count, share, published_share for every value of either histogram, by value."""
        mine, theirs = shares(self.counts), shares(self.published)
        return [{"value": v, "count": self.counts.get(v, 0), "share": mine.get(v, 0.0),
                 "published_share": theirs.get(v, 0.0)} for v in sorted(set(self.counts) | set(self.published))]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "n": self.n, "n_dialogues": self.n_dialogues, "tv": self.tv,
                "within_sign": self.within_sign, "share_5_10": self.share_5_10,
                "published_share_5_10": exact_share(self.published), "published_n": sum(self.published.values()),
                "published_source": PUBLISHED_CHANGES_SOURCE, "rows": self.rows()}

    def summary(self) -> str:
        """One line: n, the two distances and the +-5/+-10 shares."""
        if not self.n:
            return "no judged user turns"
        return (f"{self.n} judged changes in {self.n_dialogues} dialogue(s) · distance (TV) {self.tv:.3f} · "
                f"within sign {self.within_sign:.3f} · exactly ±5 or ±10: {self.share_5_10:.1%} "
                f"(published {exact_share(self.published):.1%})")


# ------------------------------------------------------------------------------ where changes come from
def history_changes(turns: Iterable[tuple[str, Optional[float], Optional[float]]]) -> list[float]:
    """The changes of one dialogue's judged user turns, from (role, emotion, change) in order: a user
    turn right after a policy reply is judged; its change is `change`, else its emotion minus the
    previous user turn's (when both are known)."""
    out: list[float] = []
    last: Optional[float] = None
    replied = False
    for role, emotion, change in turns:
        if role != "user":
            replied = True
            continue
        if replied:
            if isinstance(change, (int, float)) and not isinstance(change, bool):
                out.append(float(change))
            elif emotion is not None and last is not None:
                out.append(float(emotion) - last)
        if emotion is not None:
            last = float(emotion)
        replied = False
    return out


def file_report(path: Any) -> FidelityReport:
    """The report of a SAGE transcript file; a bad line raises BadFileError naming it."""
    from pathlib import Path

    from simulator.personas.io import BadFileError
    from simulator.personas.transcript_files import read_transcripts

    records, errors, _ = read_transcripts(path)
    if errors:
        raise BadFileError(errors)
    changes: list[float] = []
    for _, r in records:
        changes += history_changes((m["role"], m.get("emotion-point"), (m.get("planning") or {}).get("change"))
                                   for m in r["history"])
    return FidelityReport(Path(path).name, histogram(changes), len(records))


def store_report(store: Any, where: Sequence[Any], source: str) -> FidelityReport:
    """The report of the stored dialogues matching the SQLAlchemy conditions `where` (on Dialogue)."""
    from sqlalchemy import select

    from storage import Dialogue, Turn, read_scope

    query = (select(Turn.dialogue_id, Turn.role, Turn.emotion, Turn.delta, Turn.error).join(Dialogue)
             .where(*where).order_by(Turn.dialogue_id, Turn.index))
    by_dialogue: dict[int, list[tuple[str, Optional[float], Optional[float]]]] = {}
    with read_scope(store) as s:
        for dialogue_id, role, emotion, delta, error in s.execute(query):
            turns = by_dialogue.setdefault(dialogue_id, [])
            if not (role == "user" and error):  # a simulator error is not a judgement
                turns.append((role, emotion, delta))
    changes = [c for turns in by_dialogue.values() for c in history_changes(turns)]
    return FidelityReport(source, histogram(changes), len(by_dialogue))


def eval_run_report(store: Any, eval_run_id: int) -> FidelityReport:
    """The report of an eval run's ended dialogues; a KeyError when the run does not exist."""
    from storage import Dialogue, EvalRun, get_or_raise, read_scope

    with read_scope(store) as s:
        get_or_raise(s, EvalRun, eval_run_id, KeyError)
    return store_report(store, (Dialogue.eval_run_id == eval_run_id, Dialogue.status.in_(SCORED)),
                        f"eval run {eval_run_id}")


def training_report(store: Any, job_id: int, step: Optional[int] = None) -> FidelityReport:
    """The report of a training job's dialogues (of one step, when given)."""
    from storage import Dialogue

    where = [Dialogue.job_id == job_id, Dialogue.eval_run_id.is_(None), Dialogue.status.in_(SCORED)]
    if step is not None:
        where.append(Dialogue.step == step)
    return store_report(store, where, f"training job {job_id}" + ("" if step is None else f" step {step}"))


def format_report(r: FidelityReport) -> str:
    """The table (value, count, share, published share) and the summary line."""
    lines = [f"{r.source} vs {PUBLISHED_CHANGES_SOURCE}",
             f"{'value':>8} {'count':>7} {'share':>8} {'published':>10}"]
    lines += [f"{value_label(row['value']):>8} {row['count']:>7d} {row['share']:>8.1%} {row['published_share']:>10.1%}"
              for row in r.rows()]
    return "\n".join(lines + [r.summary()])


# ------------------------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="a SAGE transcript file (*_result.jsonl)")
    p.add_argument("--eval-run", type=int, metavar="N", help="an eval run in the store")
    p.add_argument("--job", type=int, metavar="J", help="a training job in the store")
    p.add_argument("--step", type=int, metavar="S", help="with --job: one training step")
    p.add_argument("--db", default=None, help="SQLAlchemy URL (default: RLVER_LAB_DB or the lab's SQLite file)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")


def run(args: argparse.Namespace) -> int:
    from simulator.personas.io import BadFileError

    chosen = [x for x in (args.file, args.eval_run, args.job) if x is not None]
    if len(chosen) != 1 or (args.step is not None and args.job is None):
        print("give exactly one of FILE, --eval-run N or --job J [--step S]", file=sys.stderr)
        return 2
    try:
        if args.file is not None:
            report = file_report(args.file)
        else:
            from storage import make_store

            store = make_store(args.db)
            report = (eval_run_report(store, args.eval_run) if args.eval_run is not None
                      else training_report(store, args.job, args.step))
    except BadFileError as e:
        print(f"{args.file}: {len(e.errors)} problem(s)", *e.errors, sep="\n", file=sys.stderr)
        return 1
    except (KeyError, OSError, ValueError) as e:
        print(str(e).strip("'\""), file=sys.stderr)
        return 1
    print(json.dumps(report.to_dict()) if args.json else format_report(report))
    return 0
