"""Row helpers shared by every module that reads the store: a stored row as a plain dict, and the row of a
primary key or a clear error naming the thing that does not exist. Nothing outside storage/ reads a table's
columns itself (tests/test_layout.py)."""
from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Optional, TypeVar

from sqlalchemy.orm import Session

from storage.models import Base

RowT = TypeVar("RowT", bound=Base)


def column_names(model: type[Base], exclude: Collection[str] = ()) -> list[str]:
    """The model's column attributes in table order, less `exclude`."""
    return [c for c in model.__table__.columns.keys() if c not in exclude]


def as_dict(row: Base, exclude: Collection[str] = ()) -> dict[str, Any]:
    """Every column of a stored row (in table order, less `exclude`) with its value as read."""
    return {c: getattr(row, c) for c in column_names(type(row), exclude)}


def get_or_raise(session: Session, model: type[RowT], key: Any, error: Callable[[str], Exception] = LookupError,
                 what: Optional[str] = None) -> RowT:
    """The row of `model` whose primary key is `key`. When there is none, raises `error(message)`, the message
    being "{what} {key} does not exist": `what` is the table's name in words unless given (e.g. "eval run"),
    and `error` the exception the caller's callers expect (JobError, KeyError ...) or a function making it."""
    row = session.get(model, key)
    if row is None:
        what = model.__tablename__.replace("_", " ") if what is None else what
        raise error(f"{what} {key} does not exist".lstrip())
    return row
