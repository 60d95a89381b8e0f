"""self_timings: each start's stage figures on a fixed input, per host and config (bot/ops/selftime.py)"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    ops.create_table(
        "self_timings",
        ops.id_column(),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("config_key", sa.String(32), nullable=False),
        ops.moment("measured_at", nullable=False),
        sa.Column("figures", sa.JSON, nullable=False),
        sa.Column("good", sa.Boolean, nullable=False),
    )
    op.create_index("ix_self_timings_host_key", "self_timings", ["host", "config_key"])


def downgrade() -> None:
    op.drop_table("self_timings")
