"""Issue 49: the recordings' access audit names where a request came from, why it was refused, and the stated reason

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    with op.batch_alter_table("recording_access") as batch:  # batch: SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("address", sa.String(64)))
        batch.add_column(sa.Column("refused", sa.String(32)))
        batch.add_column(sa.Column("reason", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("recording_access") as batch:
        batch.drop_column("reason")
        batch.drop_column("refused")
        batch.drop_column("address")
