"""The host application's Alembic environment: an ordinary env.py plus one import.

``import memgov_pg.alembic_ops`` registers ``op.deploy_memory_policy`` and
``op.undeploy_memory_policy`` for the policy revisions that ``memgov revision``
writes. Everything else is the host's: its own ``public.alembic_version`` table
(which then records memgov's revision beside the host's), one transaction for
the whole run (``transaction_per_migration`` stays off, so a failing revision
rolls back every revision of the run, policies included). The DSN comes from
``-x dsn=...`` or ``HOST_DATABASE_URL``; ``-x version_table=NAME`` renames the
version table (the tests use it for `memgov status --version-table`).
"""

from __future__ import annotations

import os

import psycopg
from sqlalchemy import create_engine, pool

import memgov_pg.alembic_ops  # noqa: F401  (the memgov operations)
from alembic import context


def _dsn() -> str:
    dsn = context.get_x_argument(as_dictionary=True).get("dsn") or os.environ.get("HOST_DATABASE_URL")
    if not dsn:
        raise SystemExit("host project: pass -x dsn=... or set HOST_DATABASE_URL")
    return dsn


VERSION_TABLE = context.get_x_argument(as_dictionary=True).get("version_table", "alembic_version")


def run_migrations_offline() -> None:
    context.configure(
        dialect_name="postgresql", transactional_ddl=True, literal_binds=True, version_table=VERSION_TABLE
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    dsn = _dsn()
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, transactional_ddl=True, version_table=VERSION_TABLE)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
