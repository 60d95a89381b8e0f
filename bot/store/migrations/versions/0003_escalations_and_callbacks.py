"""turns.escalation (the emergency number told) and callbacks booked outside the desk's hours"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    ops.add_columns("turns", sa.Column("escalation", sa.String(8)), indexed=["escalation"])
    ops.create_table(
        "callbacks",
        ops.id_column(),
        sa.Column("call_sid", sa.String(64)),
        sa.Column("reason", sa.String(32), nullable=False),
        ops.moment("requested_at", nullable=False),
        ops.moment("call_after", nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        ops.moment("updated_at", nullable=False),
        indexed=["call_sid", "status"],
    )


def downgrade() -> None:
    op.drop_table("callbacks")
    ops.drop_columns("turns", "escalation", indexed=["escalation"])
