"""stream tokens (single use, the caller's number) and worker leases, for several workers on one line

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-10
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "stream_tokens",
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("call_sid", sa.String(64), nullable=False),
        sa.Column("caller", sa.String(32)),
        sa.Column("issued_by", sa.String(64)),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
        sa.Column("used_by", sa.String(64)),
    )
    op.create_index("ix_stream_tokens_call_sid", "stream_tokens", ["call_sid"])
    op.create_index("ix_stream_tokens_expires_at", "stream_tokens", ["expires_at"])
    op.create_table(
        "workers",
        sa.Column("worker", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("draining", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workers")
    op.drop_table("stream_tokens")
