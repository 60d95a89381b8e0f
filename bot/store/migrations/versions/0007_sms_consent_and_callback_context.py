"""SMS consent on tickets (tickets.sms_opt_in) and a callback's ticket (callbacks.reception_no) (issue 22)"""

import sqlalchemy as sa

from bot.store.migrations import ops

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    ops.add_columns("tickets", sa.Column("sms_opt_in", sa.Boolean, nullable=False, server_default=sa.false()))
    ops.add_columns("callbacks", sa.Column("reception_no", sa.String(16)))


def downgrade() -> None:
    ops.drop_columns("callbacks", "reception_no")
    ops.drop_columns("tickets", "sms_opt_in")
