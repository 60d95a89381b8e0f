"""Call recordings (issue 36): the file and length on the call, legal hold on tickets, who played what"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    ops.add_columns(
        "calls",
        sa.Column("recording_path", sa.String(255)),
        sa.Column("recording_secs", sa.Float),
        ops.moment("recording_deleted_at"),
    )
    ops.add_columns("tickets", sa.Column("legal_hold", sa.Boolean, nullable=False, server_default=sa.false()))
    ops.create_trail(
        "recording_access",
        sa.Column("call_sid", sa.String(64), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("reception_no", sa.String(16)),
        indexed=["call_sid", "at"],
    )


def downgrade() -> None:
    op.drop_table("recording_access")
    ops.drop_columns("tickets", "legal_hold")
    ops.drop_columns("calls", "recording_deleted_at", "recording_secs", "recording_path")
