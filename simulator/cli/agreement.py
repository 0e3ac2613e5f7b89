"""`python -m simulator agreement --ratings FILE | --db URL [--json]`: the simulated user against people.

Reads ratings from a JSONL file (the Rate view's export, pooled by a team) or from a store (its ratings plus
every human-played turn against its shadow judgement) and prints simulator_agreement's report: per simulator
fingerprint, per persona need and per personality, each statistic with its bootstrap interval and n.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--ratings", metavar="FILE", help="a ratings JSONL file (Rate view export)")
    source.add_argument("--db", metavar="URL", help="a store (SQLAlchemy URL): its ratings and human-played turns")
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
        if args.ratings:
            rows = read_ratings_file(args.ratings)
        else:
            from storage import make_store

            rows = agreement_rows(make_store(args.db))
        if args.no_change_within < 0:
            raise ValueError("--no-change-within: must be 0 or more")
        report = agreement_report(rows, n_boot=args.n_boot, seed=args.seed, tol=args.no_change_within)
    except (OSError, ValueError) as exc:
        print(f"agreement: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else format_report(report))
    return 0
