"""`python -m trainer plan --config FILE|--preset NAME [--gpus N] [--gpu-memory GiB] [--nodes K] [--json]`.

Prints, before anything runs, the per-GPU memory of a training config part by part (trainer.plan) and,
for a CPU config, the time per step measured with a small real step (trainer.plan_probe). --json prints
one JSON object: per_gpu_gib, parts, fits, seconds_per_step, notes (and the details the plan used). The shape
planned (`shape`: nodes, gpus_per_node, ranks) is --nodes / --gpus, else the config's `nodes` / `gpus`: the
shape its job runs on the ray backend (docs/cluster.md); a note says when the two differ.
Exit status: 0 planned (fits or not), 2 bad input.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any, Optional

from trainer.cli.train import add_config_arguments, load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config setting (YAML value), e.g. --set micro_batch_size=2")
    parser.add_argument("--gpus", type=int, default=None, help="GPUs per node (given: plan for GPUs)")
    parser.add_argument("--nodes", type=int, default=None, help="nodes (default 1)")
    parser.add_argument("--gpu-memory", type=float, default=None, metavar="GiB",
                        help="memory of one GPU (default: the local GPU's; on CPU this machine's RAM)")
    parser.add_argument("--no-probe", action="store_true", help="on CPU, do not run the one-step time probe")
    parser.add_argument("--probe-limit", type=float, default=None, metavar="SECONDS",
                        help="on CPU, start no probe step after this many seconds (default 1200); the plan then "
                             "says the time was not measured")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")


def planned_shape(config: Any, gpus: Optional[int], nodes: Optional[int]) -> tuple[Optional[int], int]:
    """(GPUs per node, nodes) to plan for: --gpus / --nodes when given, else the config's `gpus` (None when 0:
    a CPU plan) and `nodes`, the shape its job runs (nodes x max(gpus, 1) ranks)."""
    return (gpus if gpus is not None else (config.gpus or None)), (nodes if nodes is not None else config.nodes)


def _problem(args: argparse.Namespace) -> str:
    for name in ("gpus", "nodes"):
        value = getattr(args, name)
        if value is not None and value < 1:
            return f"--{name}: must be at least 1, got {value}"
    if args.gpu_memory is not None and not args.gpu_memory > 0:
        return f"--gpu-memory: must be positive, got {args.gpu_memory:g}"
    if args.probe_limit is not None and not args.probe_limit > 0:
        return f"--probe-limit: must be positive, got {args.probe_limit:g}"
    return ""


def run(args: argparse.Namespace) -> int:
    from trainer.config import ConfigError
    from trainer.plan import plan_config

    problem = _problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config, args.set, args.preset)
        config.validate(check_paths=False)  # the plan is made where the model may not be
        # with --json, stdout is the plan alone: what DeepSpeed and the probe's trainer print goes to stderr
        gpus, nodes = planned_shape(config, args.gpus, args.nodes)
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            plan = plan_config(config, gpus, nodes, args.gpu_memory, probe=not args.no_probe,
                               probe_limit_s=args.probe_limit)
        plan.extra["shape"] = {"nodes": nodes, "gpus_per_node": gpus or 0, "ranks": nodes * max(gpus or 0, 1)}
        if (gpus or 0, nodes) != (config.gpus, config.nodes):
            plan.notes.append(f"the config trains nodes: {config.nodes}, gpus: {config.gpus}; this plan is for "
                              f"nodes: {nodes}, gpus: {gpus or 0} (train it with --set nodes={nodes} --set "
                              f"gpus={gpus or 0})")
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(plan.to_dict()))
        return 0
    print(f"{'fits' if plan.fits else 'DOES NOT FIT'}: {plan.per_gpu_gib:g} GiB per "
          f"{'GPU' if plan.extra['device'] == 'cuda' else 'process'} of {plan.extra['memory_gib']:g} GiB")
    for name, gib in plan.parts.items():
        print(f"  {name:24s} {gib:9.2f} GiB")
    if plan.seconds_per_step is not None:
        print(f"  {'seconds per step':24s} {plan.seconds_per_step:9.1f} s  "
              f"({plan.extra['steps']} steps: ~{plan.extra['estimated_hours']:g} h)")
    for note in plan.notes:
        print(f"- {note}")
    return 0
