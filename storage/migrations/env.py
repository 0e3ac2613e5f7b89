"""Alembic's environment for the store. storage.migrate runs it with the connection it holds (its
write lock taken); `python -m storage revision` runs it with a URL of its own."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

import storage  # noqa: F401  every ORM module imported: Base.metadata is the whole store
from storage.kept_text import KeptText
from storage.models import Base


def _render_item(kind: str, item, autogen_context):
    """A revision spells a kept text column as the SQL type it is (sa.Text(), sa.String(length=n)): the escaping
    is the code's, not the schema's."""
    if kind == "type" and isinstance(item, KeptText):
        return f"sa.{item.impl!r}"
    return False


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True,
                      compare_type=True, render_item=_render_item)
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    store = create_engine(context.config.get_main_option("sqlalchemy.url"))
    with store.begin() as conn:
        _run(conn)
    store.dispose()
