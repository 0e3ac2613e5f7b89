"""`python -m simulator calibrate --set human:NAME --simulator SPEC --name CAL [--folds 5] [--json]`: fit a
calibration of a simulator to the people of a human set (simulator.fitting.calibration_fit).

Reads the simulator's shadow judgements of the set (`python -m trainer shadow --set human:NAME --simulator SPEC`
first; a shadow run is a resumable job), cross-validates over dialogues, prints the agreement tables before and
after on the held-out folds with their intervals, fits the map on every dialogue and saves it as CAL (in the
lab's folder, calibrations/CAL.json). Then `--calibration CAL` on a simulator applies it, and its fingerprint
changes (`python -m trainer shadow ... --calibration CAL` judges the set again under it). `--reply-signal` adds
the second level, a per-reply signal regressed on the people's ratings (simulator.fitting.reply_signal_fit),
and reports its held-out figures beside the map's.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from simulator.fitting.monotone_map import MAPS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="set_spec", required=True, help="the human set: human:NAME")
    parser.add_argument("--simulator", default="offline", help="the simulator whose judgements are calibrated")
    parser.add_argument("--base-url", default="", help="endpoint of an openai: simulator")
    parser.add_argument("--pack", default="own", help="prompt pack of an openai: simulator")
    parser.add_argument("--rules", default="rlver-hard", help="emotion rules preset (as the shadow run had)")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--fingerprint", default="", help="pick the judgements by fingerprint hash prefix instead")
    parser.add_argument("--name", required=True, help="the calibration's name (lowercase, digits, - and _)")
    parser.add_argument("--folds", type=int, default=5, help="dialogue-grouped cross-validation folds (default 5)")
    parser.add_argument("--turn-points", type=float, default=5.0, help="emotion points per step of a person's score")
    parser.add_argument("--state-points", type=float, default=25.0, help="emotion points per pre/post state step")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the folds' and the intervals' seed")
    parser.add_argument("--map", default=MAPS[0], choices=MAPS,
                        help="predict (default): the monotone least-squares guess of the people's score (flat where "
                             "the simulator carries no signal); scale: the increasing line giving the changes the "
                             "people's mean and spread, keeping the simulator's ranking and its noise")
    parser.add_argument("--reply-signal", action="store_true",
                        help="also fit a per-reply signal of sentence embeddings to the people (second level)")
    parser.add_argument("--replace", action="store_true", help="fit again over a calibration of the same name")
    parser.add_argument("--db", default=None, help="the store (a SQLite file or a SQLAlchemy URL)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def judged_hash(store: Any, args: argparse.Namespace, sims: dict[str, Any]) -> str:
    """The fingerprint hash of the judgements to fit: by --fingerprint prefix, else the spec's own."""
    if args.fingerprint:
        chosen = [h for h in sims if h.startswith(args.fingerprint)]
        if len(chosen) != 1:
            raise ValueError(f"--fingerprint: {len(chosen)} simulators' judgements start with {args.fingerprint!r}")
        return chosen[0]
    from simulator.evaluation.human_agreement import set_fingerprint
    from simulator.user.spec import SimulatorSpec

    spec = SimulatorSpec(args.simulator, base_url=args.base_url, pack=args.pack, rules=args.rules,
                         temperature=args.temperature)
    _, fp_hash = set_fingerprint(store, spec, args.set_spec, args.seed)
    if fp_hash not in sims:
        raise ValueError(f"--simulator: {args.simulator} (fingerprint {fp_hash}) has not judged {args.set_spec}; run "
                         f"python -m trainer shadow --set {args.set_spec} --simulator {args.simulator} first")
    return fp_hash


def calibrate(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from simulator.evaluation.human_agreement import load_set
    from simulator.fitting.calibration_fit import fit_and_save

    from simulator.user.calibration import name_taken

    try:
        problem = name_taken(args.name)
    except ValueError as exc:
        raise ValueError(f"--name: {str(exc).removeprefix('calibration: ')}") from None
    if problem and not getattr(args, "replace", False):
        raise ValueError(f"--name: {problem}; give --replace to fit it again")
    _, sims = load_set(store, args.set_spec)
    if not sims:
        raise ValueError(f"--set: no simulator has judged {args.set_spec}; run python -m trainer shadow first")
    return fit_and_save(store, args.set_spec, judged_hash(store, args, sims), args.name, folds=args.folds,
                        turn_points=args.turn_points, state_points=args.state_points, n_boot=args.n_boot,
                        seed=args.seed, reply_signal=bool(getattr(args, "reply_signal", False)),
                        method=getattr(args, "map", "predict"))


def describe_map(r: dict[str, Any]) -> str:
    x, y = r["knots_x"], r["knots_y"]
    if r.get("map") == "scale" and len(x) == 2:
        slope = (y[1] - y[0]) / (x[1] - x[0])
        return f"map (scale): f(d) = {y[0] - slope * x[0]:+.3f} + {slope:.3f} d"
    return f"map ({r.get('map', 'predict')}): " + ", ".join(f"{a:+.2f}->{b:+.2f}" for a, b in zip(x, y))


def format_result(r: dict[str, Any]) -> str:
    def cell(e: dict[str, Any]) -> str:
        if e["value"] is None:
            return "-"
        ci = "" if e["ci_low"] is None else f" [{e['ci_low']:.2f}, {e['ci_high']:.2f}]"
        return f"{e['value']:.3f}{ci} (n {e['n']})"

    lines = [f"calibration {r['name']} ({r['hash']}) of simulator {r['simulator_fingerprint_hash']}: "
             f"{r['n_turns']} rated turn(s), {r['folds']}-fold cross-validation over dialogues; saved {r['path']}",
             describe_map(r),
             f"{'held-out figure':<36}{'before':<34}{'after (map)':<34}"
             + ("after (map + reply signal)" if "after_signal" in r else "")]
    for level, stat in (("turns", "spearman"), ("turns", "within_spearman"), ("turns", "mean_diff"),
                        ("dialogues", "spearman"), ("dialogues", "mean_diff")):
        lines.append(f"{level + ' ' + stat:<36}{cell(r['before'][level][stat]):<34}{cell(r['after'][level][stat]):<34}"
                     + (cell(r["after_signal"][level][stat]) if "after_signal" in r else ""))
    lines.append("mean simulator change at each person's score (before -> after): " + "; ".join(
        f"{s}: {b['mean']:+.1f} -> {r['change_by_score']['after'].get(s, {}).get('mean', float('nan')):+.1f}"
        for s, b in r["change_by_score"]["before"].items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from storage import make_store

    try:
        result = calibrate(make_store(args.db), args)
    except (OSError, ValueError) as exc:
        print(f"calibrate: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else format_result(result))
    return 0
