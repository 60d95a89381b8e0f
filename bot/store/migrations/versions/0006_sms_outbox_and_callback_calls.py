"""SMS outbox (tickets.sms_status), warm-transfer notes, placed callback calls (issue 22)"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    ops.add_columns("tickets", sa.Column("sms_status", sa.String(16)))
    ops.add_columns("calls", sa.Column("transfer_note", sa.Text))
    ops.add_columns(
        "callbacks",
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_call_sid", sa.String(64)),
        sa.Column("answered_by", sa.String(32)),
        indexed=["last_call_sid"],
    )
    ops.create_table(
        "outbox",
        ops.id_column(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reception_no", sa.String(16), nullable=False),
        sa.Column("call_sid", sa.String(64)),
        sa.Column("ticket_status", sa.String(16)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        ops.moment("next_attempt_at", nullable=False),
        sa.Column("claimed_by", sa.String(64)),
        sa.Column("last_error", sa.Text),
        sa.Column("message_sid", sa.String(64)),
        sa.Column("body", sa.Text),
        ops.moment("created_at", nullable=False),
        ops.moment("updated_at", nullable=False),
        indexed=["reception_no", "status", "next_attempt_at"],
    )


def downgrade() -> None:
    op.drop_table("outbox")
    ops.drop_columns("callbacks", "answered_by", "last_call_sid", "attempts", indexed=["last_call_sid"])
    ops.drop_columns("calls", "transfer_note")
    ops.drop_columns("tickets", "sms_status")
