"""staff accounts of the desk and the ticket audit trail (bot/desk/)"""

import sqlalchemy as sa
from alembic import op

from bot.store.migrations import ops

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    ops.create_table(
        "staff",
        ops.id_column(),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("department", sa.String(32)),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("api_token_hash", sa.String(64)),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("session_epoch", sa.Integer, nullable=False, server_default="0"),
        ops.moment("created_at", nullable=False),
        ops.moment("updated_at", nullable=False),
        ops.moment("last_login_at"),
        sa.UniqueConstraint("username", name="uq_staff_username"),
        sa.UniqueConstraint("api_token_hash", name="uq_staff_api_token_hash"),
    )
    ops.create_trail(
        "ticket_audit",
        sa.Column("reception_no", sa.String(16), nullable=False),
        sa.Column("from_status", sa.String(16), nullable=False),
        sa.Column("to_status", sa.String(16), nullable=False),
        sa.Column("note", sa.Text),
        indexed=["reception_no"],
    )


def downgrade() -> None:
    op.drop_table("ticket_audit")
    op.drop_table("staff")
