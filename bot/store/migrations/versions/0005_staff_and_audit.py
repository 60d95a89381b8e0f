"""staff accounts of the desk and the ticket audit trail (bot/desk/)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "staff",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("department", sa.String(32)),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("api_token_hash", sa.String(64)),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("session_epoch", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_login_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("username", name="uq_staff_username"),
        sa.UniqueConstraint("api_token_hash", name="uq_staff_api_token_hash"),
    )
    op.create_table(
        "ticket_audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("reception_no", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("from_status", sa.String(16), nullable=False),
        sa.Column("to_status", sa.String(16), nullable=False),
        sa.Column("note", sa.Text),
    )
    op.create_index("ix_ticket_audit_reception_no", "ticket_audit", ["reception_no"])


def downgrade() -> None:
    op.drop_table("ticket_audit")
    op.drop_table("staff")
