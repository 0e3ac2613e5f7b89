"""`python -m storage status|upgrade|revision [--db URL]`: the store's schema revision, and its migrations.

    python -m storage status [--db URL]        the store's revision, the code's head, what an upgrade would run
    python -m storage upgrade [--db URL]       run every pending revision, those waiting for the owner included
    python -m storage revision -m "what" [--db URL]   write a new revision from the models' changes
                                                      (autogenerate against the store at URL, which must be at head)
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from storage.db import check_reachable, db_arguments, default_url, make_store, masked
from storage.migrate import (
    MIGRATIONS,
    alembic_config,
    current_revision,
    exit_code,
    head_revision,
    is_legacy,
    owner_decisions,
    pending,
    upgrade_store,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m storage", description="The store's schema and migrations.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in (("status", "the store's revision and what an upgrade would do"),
                       ("upgrade", "apply every pending revision (those waiting for the owner's decision too)"),
                       ("revision", "write a new revision from the models' changes (developers)")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default RLVER_LAB_DB or "
                                                  "lab_data/lab.db)")
        if name == "revision":
            p.add_argument("-m", "--message", required=True, help="what the revision changes (one line)")
            p.add_argument("--empty", action="store_true", help="no autogenerate: write the operations by hand")
    return parser


def status(url: str) -> int:
    store = make_store(url, create=False)
    check_reachable(store, url)
    try:
        with store.connect().execution_options(store_write_lock=False) as conn:
            current, legacy, todo = current_revision(conn), is_legacy(conn), pending(conn)
    finally:
        store.dispose()
    state = "made before migrations" if legacy else (current or "empty")
    print(f"store {masked(url)}: revision {state}; code's head {head_revision()}; "
          f"pending {', '.join(s.revision for s in todo) or 'none'}")
    for line in owner_decisions(todo):
        print(f"  waits for its owner: {line}")
    return 0


def upgrade(url: str) -> int:
    store = make_store(url, create=False)
    check_reachable(store, url)
    try:
        done = upgrade_store(store, masked(url), allow_owner_decisions=True)
    finally:
        store.dispose()
    print(done.describe(masked(url)) if done and not done.created else
          f"store {masked(url)}: {'created at' if done else 'already at'} revision {head_revision()}")
    return 0


def revision(url: str, message: str, empty: bool) -> int:
    """Autogenerate compares the models with the store at `url`, so that store must be at head first."""
    from alembic import command

    make_store(url).dispose()  # at head (upgraded or created) before comparing
    script = command.revision(alembic_config(MIGRATIONS, url), message=message, autogenerate=not empty,
                              rev_id=f"{int(head_revision()) + 1:04d}")
    print(f"wrote {script.path}: check it, then run the tests (tests/test_migrations.py)")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(db_arguments(list(sys.argv[1:] if argv is None else argv)))
    url = args.db or default_url()
    if args.command == "status":
        return exit_code(lambda: status(url))
    if args.command == "upgrade":
        return exit_code(lambda: upgrade(url))
    return exit_code(lambda: revision(url, args.message, args.empty))


if __name__ == "__main__":
    sys.exit(main())
