"""self_timings: each start's stage figures on a fixed input, per host and config (bot/ops/selftime.py)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "self_timings",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("config_key", sa.String(32), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("figures", sa.JSON, nullable=False),
        sa.Column("good", sa.Boolean, nullable=False),
    )
    op.create_index("ix_self_timings_host_key", "self_timings", ["host", "config_key"])


def downgrade() -> None:
    op.drop_table("self_timings")
