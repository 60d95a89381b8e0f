"""calls, turns and tickets"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0001"
down_revision = None


def upgrade() -> None:
    ops.create_table(
        "calls",
        sa.Column("call_sid", sa.String(64), primary_key=True),
        sa.Column("caller", sa.String(32)),
        sa.Column("worker", sa.String(64), nullable=False),
        ops.moment("started_at", nullable=False),
        ops.moment("ended_at"),
        sa.Column("end_reason", sa.String(32)),
        sa.Column("qa", sa.Boolean, nullable=False),
        indexed=["worker", "started_at"],
    )
    ops.create_table(
        "turns",
        ops.id_column(),
        sa.Column("call_sid", sa.String(64), nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        ops.moment("created_at", nullable=False),
        sa.Column("route", sa.String(16)),
        sa.Column("intent", sa.String(32)),
        sa.Column("transcript", sa.Text),
        sa.Column("reply", sa.Text),
        sa.Column("llm_calls", sa.Integer, nullable=False),
        sa.Column("voice_to_voice_ms", sa.Float),
        sa.Column("record", sa.JSON, nullable=False),
        sa.UniqueConstraint("call_sid", "idx", name="uq_turns_call_idx"),
        indexed=["call_sid", "created_at"],
    )
    ops.create_table(
        "tickets",
        ops.id_column(),
        sa.Column("reception_no", sa.String(16), unique=True),
        sa.Column("call_sid", sa.String(64)),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("location", sa.Text),
        sa.Column("time", sa.Text),
        sa.Column("excerpt", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        ops.moment("created_at", nullable=False),
        ops.moment("updated_at", nullable=False),
        indexed=["call_sid", "status"],
    )


def downgrade() -> None:
    op.drop_table("tickets")
    op.drop_table("turns")
    op.drop_table("calls")
