"""`rlver-lab COMMAND ...`: the lab's one console command (installed by `pip install -e .`).

    rlver-lab app [--host H] [--port P] [--db URL] ...        the web app (python -m app)
    rlver-lab train|resume|plan|rollout|benchmark|compare|experiment|judge|job|jobs ...   (python -m trainer)
    rlver-lab personas|score|transcripts|probe|chat|prompt|fidelity|agreement ...        (python -m simulator)

Each subcommand hands its arguments to the module's own command line, so `rlver-lab train --help` is
`python -m trainer train --help`; the `python -m` forms stay as aliases.
"""
from __future__ import annotations

import importlib
import sys
from typing import Optional

from simulator.__main__ import COMMANDS as SIMULATOR_COMMANDS
from trainer.__main__ import COMMANDS as TRAINER_COMMANDS

# the commands as their own modules list them (importing those lists loads no command's module)
TRAINER = tuple(TRAINER_COMMANDS)
SIMULATOR = tuple(SIMULATOR_COMMANDS)


def usage() -> str:
    return ("usage: rlver-lab COMMAND [ARGS ...]\n\n"
            "  app            serve the web app (127.0.0.1:7860 unless told otherwise)\n"
            f"  {' | '.join(TRAINER)}\n                 training, evaluation and jobs (python -m trainer COMMAND)\n"
            f"  {' | '.join(SIMULATOR)}\n                 personas, transcripts and the simulated user "
            "(python -m simulator COMMAND)\n\n`rlver-lab COMMAND --help` shows a command's options.")


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "app":
        return int(importlib.import_module("app.__main__").main(rest) or 0)
    if command in TRAINER:
        return int(importlib.import_module("trainer.__main__").main([command, *rest]) or 0)
    if command in SIMULATOR:
        return int(importlib.import_module("simulator.__main__").main([command, *rest]) or 0)
    print(f"rlver-lab: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
