"""`python -m simulator agreement --ratings FILE | --db URL | --set human:NAME [--json]`: the simulated user
against people.

--ratings reads ratings from a JSONL file (the Rate view's export, pooled by a team) under the store's rules;
--db reads a store's ratings plus every human-played turn against its shadow judgement; both print
simulator.evaluation.agreement's report (per simulator fingerprint, persona need and personality, each
statistic with its bootstrap interval, n, undefined resamples and, for a null, why). --set human:NAME reads a
stored human corpus (`python -m simulator import-human`) and the simulators' shadow judgements of it
(`python -m trainer shadow`) and prints simulator.evaluation.human_agreement's report: one table per simulator
fingerprint, per turn and per dialogue, per problem and emotion type, intervals over dialogues, with the
calibration curve, the realism of the simulator's next messages, the survey scores and the interval's width by
dialogues rated (simulator.evaluation.people.measures).
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--ratings", metavar="FILE", help="a ratings JSONL file (Rate view export)")
    source.add_argument("--set", dest="set_spec", metavar="human:NAME",
                        help="a stored human corpus and the simulators' shadow judgements of it")
    parser.add_argument("--db", metavar="URL", default=None,
                        help="a store (SQLAlchemy URL): alone, its ratings and human-played turns; with --set, "
                             "where the set is (default the lab's store)")
    parser.add_argument("--fingerprint", default="", help="with --set: only simulators whose hash starts so")
    parser.add_argument("--turn-points", type=float, default=5.0,
                        help="with --set: emotion points per step of the people's turn score (default 5)")
    parser.add_argument("--state-points", type=float, default=25.0,
                        help="with --set: emotion points per step of the people's pre/post state (default 25)")
    parser.add_argument("--no-realism", action="store_true",
                        help="with --set: skip the realism of the simulator's next messages (it embeds them)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-change-within", type=float, default=1e-9, metavar="X",
                        help="a change with |change| <= X counts as no change in sign agreement (default 1e-9: "
                             "float rounding only; 0.5 treats half-point means as no change)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from simulator.evaluation.agreement import agreement_report, format_report
    from simulator.evaluation.ratings import agreement_rows, read_ratings_file

    try:
        if args.no_change_within < 0:
            raise ValueError("--no-change-within: must be 0 or more")
        if args.set_spec:
            from simulator.evaluation.human_agreement import format_human_report, human_agreement
            from storage import make_store

            report = human_agreement(make_store(args.db), args.set_spec, n_boot=args.n_boot, seed=args.seed,
                                     fingerprint=args.fingerprint, turn_points_per_step=args.turn_points,
                                     state_points_per_step=args.state_points, with_realism=not args.no_realism)
            print(json.dumps(report) if args.json else format_human_report(report))
            return 0
        if args.ratings:
            rows = read_ratings_file(args.ratings)
        elif args.db:
            from storage import make_store

            rows = agreement_rows(make_store(args.db))
        else:
            raise ValueError("--ratings FILE, --db URL or --set human:NAME: one is required")
        report = agreement_report(rows, n_boot=args.n_boot, seed=args.seed, tol=args.no_change_within)
    except (OSError, ValueError) as exc:
        print(f"agreement: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else format_report(report))
    return 0
