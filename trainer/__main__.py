"""`python -m trainer [--jobs local|ray://HEAD:10001|auto] [--shared-dir PATH] COMMAND ...`: rollout, train,
resume, plan, benchmark, job, jobs, judge, experiment, compare, shadow.

`--jobs` / `--shared-dir` pick where the jobs this command launches run (trainer.jobs.backend, docs/cluster.md).

Each command lives in its own module exposing `add_arguments(parser)` and `run(args) -> int`. Only the
chosen command's module is imported, so a module that is missing or broken disables its own command
with a clear message and leaves the others working.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "rollout": ("trainer.cli.rollout", "run dialogues between a policy and simulated users"),
    "train": ("trainer.cli.train", "train a policy with RL against the simulated user"),
    "resume": ("trainer.cli.train", "resume a training run from its last checkpoint"),
    "plan": ("trainer.cli.plan", "per-GPU memory and time per step of a training config, before it runs"),
    "benchmark": ("trainer.cli.benchmark", "score a policy on the Sentient benchmark"),
    "job": ("trainer.cli.jobs", "run a recorded job in this process"),
    "jobs": ("trainer.cli.jobs", "list the jobs of the store, or show one (dead / stalled ones shown as such)"),
    "judge": ("trainer.cli.judge", "rate stored dialogues with the social-cognition LLM judge"),
    "experiment": ("trainer.cli.experiment", "run a grid of training configs, each benchmarked on held-out personas"),
    "compare": ("trainer.cli.compare", "play two policies against the same personas, simulator and seeds; paired"),
    "shadow": ("trainer.cli.shadow", "play a simulated user over every reply of a human set (human:NAME)"),
}


def _load(name: str, parser: argparse.ArgumentParser) -> Optional[str]:
    """Import the command's module and add its arguments; return an error message if it cannot."""
    module_name = COMMANDS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return f"python -m trainer {name} is unavailable: {module_name} could not be imported ({exc})"
    # A module serving several commands may offer add_<command>_arguments / run_<command>.
    add = getattr(module, f"add_{name}_arguments", None) or getattr(module, "add_arguments", None)
    run = getattr(module, f"run_{name}", None) or getattr(module, "run", None)
    if add is None or run is None:
        return f"python -m trainer {name} is unavailable: {module_name} has no add_arguments/run"
    add(parser)
    parser.set_defaults(_run=run)
    return None


# commands whose jobs go to the cluster with --jobs ray (an experiment's cells too), or that start none
SUBMITTING = ("train", "resume", "experiment", "job", "jobs", "plan")


def backend_flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Take `--jobs VALUE` and `--shared-dir PATH` (the job backend, for every command) out of argv."""
    rest, flags, i = [], {}, 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in ("--jobs", "--shared-dir"):
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            flags[name] = value
        else:
            rest.append(argv[i])
        i += 1
    return rest, flags


def main(argv: Optional[list[str]] = None) -> int:
    from storage.db import db_arguments

    argv, flags = backend_flags(db_arguments(list(sys.argv[1:] if argv is None else argv)))
    if flags:
        from storage.db import default_url
        from trainer.jobs.backend import BackendError, configure

        db = next((a.partition("=")[2] or argv[i + 1] for i, a in enumerate(argv)
                   if a.partition("=")[0] == "--db" and (a.partition("=")[2] or i + 1 < len(argv))), None)
        try:
            on_ray = configure(flags.get("--jobs"), flags.get("--shared-dir"), db or default_url()).kind != "local"
        except BackendError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        command = next((a for a in argv if not a.startswith("-")), "")
        if on_ray and command not in SUBMITTING:
            print(f"note: `{command}` runs in this process, on this machine; with --jobs ray only train, resume and "
                  "the jobs the app launches go to the cluster (docs/cluster.md)", file=sys.stderr)
    parser = argparse.ArgumentParser(prog="python -m trainer", description="RLVER Lab trainer commands")
    parser.add_argument("--jobs", metavar="local|auto|ray://HEAD:10001|http://HEAD:8265",
                        help="where the jobs this command launches run: local processes (the default) or a Ray "
                             "cluster (docs/cluster.md); before COMMAND")
    parser.add_argument("--shared-dir", metavar="PATH", help="a folder every node sees, for the job folders "
                                                            "(needed with a Ray cluster); before COMMAND")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            problem = _load(name, p)
            if problem:
                print(problem, file=sys.stderr)
                return 2
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    from storage import exit_code

    return exit_code(lambda: args._run(args))


if __name__ == "__main__":
    sys.exit(main())
