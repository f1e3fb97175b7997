"""Alembic environment for the memgov schema.

The DSN comes from ``memgov migrate --dsn`` (config attribute), ``-x dsn=...``,
``MEMGOV_DSN``, or the embedded cluster of ``memgov up``, in that order. The
version table is ``public.memgov_alembic_version`` so that it never collides
with an application's own Alembic history and survives ``downgrade base``.

This environment serves ``memgov migrate`` and ``alembic`` run from this
repository. A host project that puts memgov's revisions into its own history
runs them through its own env.py and version table (docs/alembic.md;
tests/host_project/); ``memgov migrate`` then leaves them alone.
"""

from __future__ import annotations

from sqlalchemy import create_engine, pool

from alembic import context
from memgov_pg.cli.dsn import resolve_dsn
from memgov_pg.db import connect
from memgov_pg.migrate import MIGRATION_LOCK_SQL, VERSION_TABLE

config = context.config


def _dsn() -> str:
    explicit = config.attributes.get("dsn") or context.get_x_argument(as_dictionary=True).get("dsn")
    return resolve_dsn(explicit)


def run_migrations_offline() -> None:
    """Emit the SQL instead of running it (``alembic upgrade head --sql``)."""
    context.configure(
        dialect_name="postgresql",
        version_table=VERSION_TABLE,
        transactional_ddl=True,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    dsn = _dsn()
    engine = create_engine("postgresql+psycopg://", creator=lambda: connect(dsn), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            version_table=VERSION_TABLE,
            transactional_ddl=True,
        )
        with context.begin_transaction():
            # two migrations of one database at once: the second waits, then finds head
            connection.exec_driver_sql(MIGRATION_LOCK_SQL)
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
