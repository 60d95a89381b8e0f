"""The Alembic migrations, on SQLite and a real PostgreSQL server: they build what ``bot/store/schema.py``
declares, and come down to nothing and up again."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config as AlembicConfig
from alembic.migration import MigrationContext

from bot.store.db import MIGRATIONS, Store
from bot.store.schema import metadata


def _alembic(conn: sa.Connection) -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def _differences(engine: sa.Engine) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(context, metadata)


def test_the_migrations_build_the_schema_and_come_down_and_up_again(db_url):
    store = Store(db_url)
    store.migrate()
    assert _differences(store.engine) == []
    with store.engine.begin() as conn:
        command.downgrade(_alembic(conn), "base")
    assert set(sa.inspect(store.engine).get_table_names()) == {"alembic_version"}
    store.migrate()
    assert _differences(store.engine) == []
    store.close()
