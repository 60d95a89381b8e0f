"""SMS consent on tickets (tickets.sms_opt_in) and a callback's ticket (callbacks.reception_no) (issue 22)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    with op.batch_alter_table("tickets") as batch:  # batch: SQLite cannot ALTER most things in place
        batch.add_column(sa.Column("sms_opt_in", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("callbacks") as batch:
        batch.add_column(sa.Column("reception_no", sa.String(16)))


def downgrade() -> None:
    with op.batch_alter_table("callbacks") as batch:
        batch.drop_column("reception_no")
    with op.batch_alter_table("tickets") as batch:
        batch.drop_column("sms_opt_in")
