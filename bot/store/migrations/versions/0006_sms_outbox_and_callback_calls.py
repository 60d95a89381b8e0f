"""SMS outbox (tickets.sms_status), warm-transfer notes, placed callback calls (issue 22)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("tickets") as batch:  # batch: SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("sms_status", sa.String(16)))
    with op.batch_alter_table("calls") as batch:
        batch.add_column(sa.Column("transfer_note", sa.Text))
    with op.batch_alter_table("callbacks") as batch:
        batch.add_column(sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("last_call_sid", sa.String(64)))
        batch.add_column(sa.Column("answered_by", sa.String(32)))
        batch.create_index("ix_callbacks_last_call_sid", ["last_call_sid"])
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reception_no", sa.String(16), nullable=False),
        sa.Column("call_sid", sa.String(64)),
        sa.Column("ticket_status", sa.String(16)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_by", sa.String(64)),
        sa.Column("last_error", sa.Text),
        sa.Column("message_sid", sa.String(64)),
        sa.Column("body", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_outbox_reception_no", "outbox", ["reception_no"])
    op.create_index("ix_outbox_status", "outbox", ["status"])
    op.create_index("ix_outbox_next_attempt_at", "outbox", ["next_attempt_at"])


def downgrade() -> None:
    op.drop_table("outbox")
    with op.batch_alter_table("callbacks") as batch:
        batch.drop_index("ix_callbacks_last_call_sid")
        batch.drop_column("answered_by")
        batch.drop_column("last_call_sid")
        batch.drop_column("attempts")
    with op.batch_alter_table("calls") as batch:
        batch.drop_column("transfer_note")
    with op.batch_alter_table("tickets") as batch:
        batch.drop_column("sms_status")
