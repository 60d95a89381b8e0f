"""turns.escalation (the emergency number told) and callbacks booked outside the desk's hours

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:  # batch: SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("escalation", sa.String(8)))
        batch.create_index("ix_turns_escalation", ["escalation"])
    op.create_table(
        "callbacks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("call_sid", sa.String(64)),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("call_after", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_callbacks_call_sid", "callbacks", ["call_sid"])
    op.create_index("ix_callbacks_status", "callbacks", ["status"])


def downgrade() -> None:
    op.drop_table("callbacks")
    with op.batch_alter_table("turns") as batch:
        batch.drop_index("ix_turns_escalation")
        batch.drop_column("escalation")
