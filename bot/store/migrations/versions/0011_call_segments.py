"""Issue 46: a call's media streams (segments), so a call survives a dying worker and a rolling deploy"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    ops.create_table(
        "call_segments",
        sa.Column("call_sid", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("worker", sa.String(64)),
        ops.moment("started_at"),
        ops.moment("ended_at"),
        sa.Column("end_reason", sa.String(32)),
        sa.Column("bot_ended", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("then_twiml", sa.Text),
        ops.moment("action_at"),
        sa.Column("recording_path", sa.String(255)),
    )


def downgrade() -> None:
    op.drop_table("call_segments")
