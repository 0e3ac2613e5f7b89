"""Schema migrations: Alembic revisions shipped in storage/migrations, run from here (no alembic.ini).

Opening a store (make_store) brings it to the head revision under the store's write lock, so the app and
job processes opening one store at once upgrade it once:
- a new store gets every revision in order;
- a store made before migrations (tables, no alembic_version) is adopted by the baseline revision, which
  adds what today's schema has and the store lacks (tables, nullable columns) and keeps every row;
- a store at an older revision gets the later ones.
A revision that needs the owner's decision sets `OWNER_DECISION = "what it does"` in its module: opening
the store then refuses with the command that applies it (`python -m storage upgrade --db URL`). A store at
a revision this code does not know (made by a newer version of the lab) is refused too.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from sqlalchemy import Connection, Engine, inspect

MIGRATIONS = Path(__file__).resolve().with_name("migrations")


class StoreError(RuntimeError):
    """The store cannot be used as it is: unreachable, refused, or in need of its owner's decision.
    The message is one line and never holds a password."""


def exit_code(work: Callable[[], Optional[int]]) -> int:
    """Run a command line's work: its exit code, or 2 with the StoreError's one line on stderr (nothing started)
    when the store cannot be used; the lab's command lines end with this."""
    try:
        return int(work() or 0)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


@dataclass
class Upgrade:
    """What opening a store did to its schema."""

    before: Optional[str]  # the revision found (None: no alembic_version table)
    after: str
    applied: list[str] = field(default_factory=list)  # "rev (message)" per revision run
    notes: list[str] = field(default_factory=list)  # what the revisions report (e.g. columns added)
    adopted: bool = False  # a store made before migrations

    @property
    def created(self) -> bool:
        """A new, empty store: made, not upgraded (nothing to say)."""
        return self.before is None and not self.adopted

    def describe(self, url: str) -> str:
        """One line for the app and the commands."""
        if self.adopted:
            done = "; ".join(self.notes) or "nothing to add"
            return f"store {url}: adopted a store made before migrations, now at schema revision {self.after} ({done})"
        notes = f"; {'; '.join(self.notes)}" if self.notes else ""
        return (f"store {url}: upgraded the schema from revision {self.before} to {self.after} "
                f"(applied {', '.join(self.applied)}{notes})")


def alembic_config(script_location: Path = MIGRATIONS, url: Optional[str] = None) -> Config:
    """An Alembic Config made in code; `url` only for commands that open their own connection."""
    config = Config()
    config.set_main_option("script_location", str(script_location))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@lru_cache(maxsize=4)
def _scripts(script_location: Path) -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config(script_location))


def head_revision(script_location: Path = MIGRATIONS) -> str:
    """The revision the models of this code correspond to."""
    heads = _scripts(script_location).get_heads()
    if len(heads) != 1:
        raise StoreError(f"the store's migrations have {len(heads)} heads ({', '.join(heads)}); "
                         "a merge revision is missing (docs/store.md, 'Adding a revision')")
    return heads[0]


def current_revision(conn: Connection) -> Optional[str]:
    """The store's revision; None when it has no alembic_version table (new, or made before migrations)."""
    return MigrationContext.configure(conn).get_current_revision()


def is_legacy(conn: Connection) -> bool:
    """Tables of the lab but no revision: a store made before migrations."""
    return current_revision(conn) is None and inspect(conn).has_table("job")


def pending(conn: Connection, script_location: Path = MIGRATIONS) -> list[Script]:
    """The revisions the store lacks, oldest first. Raises StoreError for a revision this code lacks."""
    scripts = _scripts(script_location)
    head = head_revision(script_location)
    current = current_revision(conn)
    if current is not None and current not in {s.revision for s in scripts.walk_revisions()}:
        raise StoreError(f"the store is at schema revision {current}, which this code does not know (made by "
                         f"a newer version of the lab, whose head is not {head}): update the lab's code")
    return list(reversed(list(scripts.iterate_revisions(head, current))))


def owner_decisions(scripts: list[Script]) -> list[str]:
    """'rev: what it does' for each revision among `scripts` that waits for the owner."""
    return [f"{s.revision}: {s.module.OWNER_DECISION}" for s in scripts if getattr(s.module, "OWNER_DECISION", "")]


def upgrade_store(store: Engine, url_for_messages: str, allow_owner_decisions: bool = False,
                  script_location: Path = MIGRATIONS) -> Optional[Upgrade]:
    """Bring the store to head; None when it already was. The check reads without a lock; the upgrade
    runs in one transaction under the store's write lock (SQLite BEGIN IMMEDIATE, PostgreSQL advisory lock),
    and a second process waiting for it finds the store upgraded and does nothing."""
    with store.connect().execution_options(store_write_lock=False) as conn:
        if not pending(conn, script_location):
            return None
    with store.begin() as conn:
        todo = pending(conn, script_location)
        if not todo:
            return None
        waiting = owner_decisions(todo)
        if waiting and not allow_owner_decisions:
            raise StoreError(f"the store {url_for_messages} needs an upgrade its owner decides on "
                             f"({'; '.join(waiting)}): back it up, then run "
                             f"`python -m storage upgrade --db '{url_for_messages}'`")
        result = Upgrade(before=current_revision(conn), after=todo[-1].revision,
                         applied=[f"{s.revision} ({s.doc.strip().splitlines()[0] if s.doc else ''})" for s in todo],
                         adopted=is_legacy(conn))
        config = alembic_config(script_location)
        config.attributes["connection"] = conn
        config.attributes["notes"] = result.notes
        command.upgrade(config, "head")
    return result

