"""Schema migrations (Alembic) and building the schema straight from ``sql/``.

Each Alembic revision freezes the SQL it runs in a ``.sql`` file beside it,
split into ``-- migrate:upgrade`` and ``-- migrate:downgrade`` sections; it
never reads the live ``sql/`` files, which keep changing.
"""

from __future__ import annotations

import re
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory

from alembic import command

from .db import connect
from .resources import alembic_dir, query, sql_files

VERSION_TABLE = "memgov_alembic_version"
MIGRATION_LOCK_SQL = "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('memgov.migrate'))"

_SECTION = re.compile(r"^--\s*migrate:(upgrade|downgrade)\s*$", re.MULTILINE)


def revision_sql(revision_file: str | Path, direction: str) -> str:
    """The ``direction`` section of the ``.sql`` file that belongs to a revision."""
    path = Path(revision_file).with_suffix(".sql")
    parts = _SECTION.split(path.read_text(encoding="utf-8"))
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    if direction not in sections:
        raise ValueError(f"{path.name} has no '-- migrate:{direction}' section")
    return sections[direction].strip() + "\n"


def execute_revision_sql(revision_file: str, direction: str) -> None:
    """Run (or, offline, print) a revision's frozen SQL. Called from revision scripts."""
    from alembic import context, op

    sql_text = revision_sql(revision_file, direction)
    if context.is_offline_mode():
        context.get_context().impl.static_output(sql_text)
        return
    # straight to psycopg: no bind-parameter parsing of ':' or '%' in PL/pgSQL bodies
    driver = op.get_bind().connection.driver_connection
    assert driver is not None
    with driver.cursor() as cur:
        cur.execute(sql_text)


def alembic_config(dsn: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(alembic_dir()))
    if dsn is not None:
        config.attributes["dsn"] = dsn
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(dsn: str) -> str | None:
    """The revision the database is at; None before the first migration."""
    with connect(dsn) as conn:
        exists = conn.execute(query("version_table_exists")).fetchone()
        if not (exists and exists[0]):
            return None
        row = conn.execute(query("current_revision")).fetchone()
    return row[0] if row else None


def upgrade(dsn: str, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade the memgov schema; returns (revision before, revision after)."""
    before = current_revision(dsn)  # also proves the DSN works, with a clear error
    command.upgrade(alembic_config(dsn), revision)
    return before, current_revision(dsn)


def downgrade(dsn: str, revision: str) -> None:
    connect(dsn).close()
    command.downgrade(alembic_config(dsn), revision)


def apply_sql_files(dsn: str) -> None:
    """Build the schema from the live ``sql/`` files, in order (tests, development)."""
    with connect(dsn) as conn:
        with conn.cursor() as cur:
            for path in sql_files():
                cur.execute(path.read_text(encoding="utf-8"))
