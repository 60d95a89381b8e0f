"""Operations several migrations share.

FROZEN, like the migrations that call them: a migration runs its functions on every database it ever
meets, so a function here never changes what it does once a migration uses it; a new need gets a new
function. Nothing here imports today's schema (``bot/store/schema.py``): each migration states its
tables and columns as they were at its revision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import SchemaItem


def id_column() -> sa.Column:
    """A log table's key: an autoincrementing integer ``id``."""
    return sa.Column("id", sa.Integer, primary_key=True, autoincrement=True)


def moment(name: str, **kwargs: Any) -> sa.Column:
    """A point in time: every time in the records is stored with its time zone."""
    return sa.Column(name, sa.DateTime(timezone=True), **kwargs)


def create_table(name: str, *items: SchemaItem, indexed: Sequence[str] = ()) -> None:
    """Create table ``name``, then an index ``ix_<name>_<column>`` on each column of ``indexed``, in order."""
    op.create_table(name, *items)
    for column in indexed:
        op.create_index(f"ix_{name}_{column}", name, [column])


def create_trail(name: str, subject: sa.Column, *items: SchemaItem, indexed: Sequence[str] = ()) -> None:
    """Create an append-only trail ``name``: its key, the ``subject`` a row is about, when (``at``), who
    (``actor``), then ``items``; indexes as in ``create_table``."""
    create_table(
        name,
        id_column(),
        subject,
        moment("at", nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        *items,
        indexed=indexed,
    )


def add_columns(table: str, *columns: sa.Column, indexed: Sequence[str] = ()) -> None:
    """Add ``columns`` to ``table``, then index each of ``indexed`` (``ix_<table>_<column>``), in order.

    One batch: SQLite cannot ALTER most things in place, so Alembic copies the table once for it.
    """
    with op.batch_alter_table(table) as batch:
        for column in columns:
            batch.add_column(column)
        for name in indexed:
            batch.create_index(f"ix_{table}_{name}", [name])


def drop_columns(table: str, *names: str, indexed: Sequence[str] = ()) -> None:
    """Undo ``add_columns``: drop the indexes on ``indexed``, then the columns ``names``, in the order given."""
    with op.batch_alter_table(table) as batch:
        for name in indexed:
            batch.drop_index(f"ix_{table}_{name}")
        for name in names:
            batch.drop_column(name)
