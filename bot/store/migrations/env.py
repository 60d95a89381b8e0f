"""Alembic environment: run by ``bot.store.db.migrate`` with a live connection (no alembic.ini)."""

from alembic import context

from bot.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
