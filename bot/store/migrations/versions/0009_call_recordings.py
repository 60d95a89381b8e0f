"""Call recordings (issue 36): the file and length on the call, legal hold on tickets, who played what

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    with op.batch_alter_table("calls") as batch:  # batch: SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("recording_path", sa.String(255)))
        batch.add_column(sa.Column("recording_secs", sa.Float))
        batch.add_column(sa.Column("recording_deleted_at", sa.DateTime(timezone=True)))
    with op.batch_alter_table("tickets") as batch:
        batch.add_column(sa.Column("legal_hold", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_table(
        "recording_access",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("call_sid", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("reception_no", sa.String(16)),
    )
    op.create_index("ix_recording_access_call_sid", "recording_access", ["call_sid"])
    op.create_index("ix_recording_access_at", "recording_access", ["at"])


def downgrade() -> None:
    op.drop_table("recording_access")
    with op.batch_alter_table("tickets") as batch:
        batch.drop_column("legal_hold")
    with op.batch_alter_table("calls") as batch:
        batch.drop_column("recording_deleted_at")
        batch.drop_column("recording_secs")
        batch.drop_column("recording_path")
