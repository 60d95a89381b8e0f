"""Issue 49: the recordings' access audit names where a request came from, why it was refused, and the stated reason"""

import sqlalchemy as sa

from bot.store.migrations import ops

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    ops.add_columns(
        "recording_access",
        sa.Column("address", sa.String(64)),
        sa.Column("refused", sa.String(32)),
        sa.Column("reason", sa.Text),
    )


def downgrade() -> None:
    ops.drop_columns("recording_access", "reason", "refused", "address")
