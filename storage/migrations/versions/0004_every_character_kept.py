"""text columns keep every character: U+FFFF, the escape of NUL and lone surrogates, doubled as U+FFFF "f"

Revision 0004, after 0003. From this revision the store's text and string columns escape NUL, lone surrogates
and U+FFFF itself with U+FFFF (storage/kept_text.py), so that PostgreSQL keeps them. A value written before
that holds U+FFFF is rewritten in its escaped form, so it reads back unchanged; no other value changes (a
store without U+FFFF, which is every store in practice, is left as it is).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None
OWNER_DECISION = ""

ESCAPE = "\uffff"


def _text_columns(bind) -> list[tuple[str, str]]:
    inspector = sa.inspect(bind)
    return [(table, column["name"]) for table in inspector.get_table_names() if table != "alembic_version"
            for column in inspector.get_columns(table) if isinstance(column["type"], sa.String)]


def _replace(old: str, new: str) -> None:
    bind = op.get_bind()
    for table, column in _text_columns(bind):
        value = sa.column(column, sa.Text)
        rows = sa.update(sa.table(table, value)).where(value.contains(old, autoescape=True))
        bind.execute(rows.values({column: sa.func.replace(value, old, new)}))


def upgrade() -> None:
    _replace(ESCAPE, ESCAPE + "f")


def downgrade() -> None:  # an escaped NUL or surrogate stays escaped: the older code cannot store them
    _replace(ESCAPE + "f", ESCAPE)
