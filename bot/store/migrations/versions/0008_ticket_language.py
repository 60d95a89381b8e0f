"""The caller's language on a ticket (tickets.language): its texts and status sentences use it (issue 24)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    with op.batch_alter_table("tickets") as batch:  # batch: SQLite cannot ALTER most things in place
        # Tickets from before this migration were all taken in Korean.
        batch.add_column(sa.Column("language", sa.String(8), nullable=False, server_default="ko"))


def downgrade() -> None:
    with op.batch_alter_table("tickets") as batch:
        batch.drop_column("language")
