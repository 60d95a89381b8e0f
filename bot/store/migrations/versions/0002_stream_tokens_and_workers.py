"""stream tokens (single use, the caller's number) and worker leases, for several workers on one line"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    ops.create_table(
        "stream_tokens",
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("call_sid", sa.String(64), nullable=False),
        sa.Column("caller", sa.String(32)),
        sa.Column("issued_by", sa.String(64)),
        ops.moment("issued_at", nullable=False),
        ops.moment("expires_at", nullable=False),
        ops.moment("used_at"),
        sa.Column("used_by", sa.String(64)),
        indexed=["call_sid", "expires_at"],
    )
    ops.create_table(
        "workers",
        sa.Column("worker", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        ops.moment("started_at", nullable=False),
        ops.moment("heartbeat_at", nullable=False),
        sa.Column("draining", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workers")
    op.drop_table("stream_tokens")
