"""`python -m trainer experiment`: run a grid of training configs, each cell benchmarked on a held-out set.

    python -m trainer experiment --grid FILE [--db URL] [--json]   # record the experiment and run it
    python -m trainer experiment --resume ID [--db URL] [--json]   # run what did not finish (or a queued one)
    python -m trainer experiment --cancel ID [--db URL]            # cancel its running jobs and queued cells

The grid file format is in trainer/experiments/grid.py (and docs/evaluation.md#experiments). The cells run as the
lab's ordinary jobs; this process only starts them and follows them, and keeps nothing in memory: killed,
`--resume ID` carries on. --json ends with one JSON object (experiment_id, status, cells with their jobs,
eval run and held-out score); progress goes to stderr. Exit status: 0 every cell succeeded, 1 some failed,
2 bad input, 143 cancelled.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--grid", help="grid file (YAML): name, base_config / base, grid, benchmark, judge, parallel")
    what.add_argument("--resume", type=int, metavar="ID", help="run what did not finish of experiment ID")
    what.add_argument("--cancel", type=int, metavar="ID", help="cancel experiment ID (its jobs and queued cells)")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RLVER_LAB_DB or "
                                                   "lab_data/lab.db)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object describing the experiment")


def run(args: argparse.Namespace) -> int:
    from simulator.personas.store import open_store
    from storage import default_url
    from trainer.experiments import grid
    from trainer.experiments.runner import experiment_result, run_experiment

    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    url = args.db or default_url()
    store = open_store(url)
    try:
        if args.cancel is not None:
            status = grid.cancel_experiment(store, args.cancel)
            log(f"experiment {args.cancel} {status}")
            code, experiment_id = 0, args.cancel
        else:
            if args.grid:
                experiment_id = grid.create_experiment(store, grid.load_grid(args.grid))
                log(f"experiment {experiment_id} recorded")
            else:
                experiment_id = args.resume
                reopened = grid.reopen_experiment(store, experiment_id)
                if reopened:
                    log(f"experiment {experiment_id}: reopened job(s) {', '.join(f'#{j}' for j in reopened)}")
            code = run_experiment(store, url, experiment_id, log=log)
    except grid.ExperimentError as exc:
        print("error: " + "\n  ".join(f"{k}: {v}" for k, v in exc.errors.items()), file=sys.stderr)
        return 2
    else:
        if args.json:
            print(json.dumps(experiment_result(store, experiment_id), default=str, ensure_ascii=False))
        return code
    finally:
        store.dispose()
