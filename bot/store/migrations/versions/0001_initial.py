"""calls, turns and tickets

Revision ID: 0001
Revises:
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "calls",
        sa.Column("call_sid", sa.String(64), primary_key=True),
        sa.Column("caller", sa.String(32)),
        sa.Column("worker", sa.String(64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("end_reason", sa.String(32)),
        sa.Column("qa", sa.Boolean, nullable=False),
    )
    op.create_index("ix_calls_worker", "calls", ["worker"])
    op.create_index("ix_calls_started_at", "calls", ["started_at"])
    op.create_table(
        "turns",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("call_sid", sa.String(64), nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("route", sa.String(16)),
        sa.Column("intent", sa.String(32)),
        sa.Column("transcript", sa.Text),
        sa.Column("reply", sa.Text),
        sa.Column("llm_calls", sa.Integer, nullable=False),
        sa.Column("voice_to_voice_ms", sa.Float),
        sa.Column("record", sa.JSON, nullable=False),
        sa.UniqueConstraint("call_sid", "idx", name="uq_turns_call_idx"),
    )
    op.create_index("ix_turns_call_sid", "turns", ["call_sid"])
    op.create_index("ix_turns_created_at", "turns", ["created_at"])
    op.create_table(
        "tickets",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("reception_no", sa.String(16), unique=True),
        sa.Column("call_sid", sa.String(64)),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("location", sa.Text),
        sa.Column("time", sa.Text),
        sa.Column("excerpt", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tickets_call_sid", "tickets", ["call_sid"])
    op.create_index("ix_tickets_status", "tickets", ["status"])


def downgrade() -> None:
    op.drop_table("tickets")
    op.drop_table("turns")
    op.drop_table("calls")
