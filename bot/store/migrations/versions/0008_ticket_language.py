"""The caller's language on a ticket (tickets.language): its texts and status sentences use it (issue 24)"""

import sqlalchemy as sa

from bot.store.migrations import ops

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    # Tickets from before this migration were all taken in Korean.
    ops.add_columns("tickets", sa.Column("language", sa.String(8), nullable=False, server_default="ko"))


def downgrade() -> None:
    ops.drop_columns("tickets", "language")
