"""Schema migrations at run time: ``memgov migrate`` (Alembic), where memgov's revision is
recorded, and building the schema straight from ``sql/``.

memgov's revisions form the Alembic branch ``memgov``. What a revision script itself
calls (its frozen ``.sql`` sections) is memgov_pg.revision_scripts; writing a new
revision's routines is memgov_pg.revisions (``scripts/revision-sql``).
docs/development.md says when to write which.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from psycopg import sql

from alembic import command

from .db import connect
from .errors import MemgovError
from .resources import alembic_dir, query, sql_files

# 0001_initial.py was released importing these from here, and never changes again
from .revision_scripts import Frozen as Frozen
from .revision_scripts import execute_frozen as execute_frozen
from .revision_scripts import execute_revision_sql as execute_revision_sql

VERSION_TABLE = "memgov_alembic_version"
BRANCH = "memgov"
MIGRATION_LOCK_SQL = "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('memgov.migrate'))"

log = logging.getLogger("memgov_pg")


def alembic_config(dsn: str | None = None) -> Config:
    """An Alembic Config for memgov's scripts; ``dsn`` is handed to ``env.py`` (``attributes['dsn']``)."""
    config = Config()
    config.set_main_option("script_location", str(alembic_dir()))
    if dsn is not None:
        config.attributes["dsn"] = dsn
    return config


def head_revision() -> str:
    """The head revision of memgov's shipped Alembic scripts."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def shipped_revisions() -> list[str]:
    """Every revision id this memgov ships (its branch ``memgov``), head first."""
    return [script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()]


# -- where memgov's revision is recorded -----------------------------------------------

OWN_VERSION_TABLE = f"public.{VERSION_TABLE}"
HOST_VERSION_TABLE = "public.alembic_version"
"""Alembic's default version table: where a host project that has memgov's branch in
its ``version_locations`` records memgov's revision next to its own."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def qualified_table(name: str) -> tuple[str, str]:
    """``[SCHEMA.]TABLE`` (schema public by default) as ``(schema, table)``; anything else is one error line."""
    parts = name.split(".")
    if len(parts) == 1:
        parts.insert(0, "public")
    if len(parts) != 2 or not all(_NAME.fullmatch(part) for part in parts):
        raise MemgovError(f"--version-table {name!r}: expected [SCHEMA.]TABLE, each a plain SQL name")
    return parts[0], parts[1]


@dataclass(frozen=True)
class Located:
    """Where memgov's revision is recorded.

    ``records`` are ``(table, revision)`` pairs. memgov's own table holds only memgov's
    revisions, so every row there counts (even one this memgov does not ship: the upgrade
    then fails with Alembic's message); a host's table holds the host's revisions too, so
    only the ids memgov ships count there. When a host revision declares ``depends_on``
    memgov's revision, Alembic records only the host's revision: memgov's is then
    ``implied_by`` the host's rows (schema memgov exists, no row names memgov's revision),
    and the schema's own comment names it (``schema_says``).
    """

    records: tuple[tuple[str, str], ...]
    looked_in: tuple[str, ...]
    schema_exists: bool
    implied_in: str | None = None
    implied_by: tuple[str, ...] = ()
    schema_says: str | None = None

    @property
    def table(self) -> str | None:
        """The table that records memgov's revision (or the host table that implies it), else None."""
        return self.records[0][0] if self.records else self.implied_in

    @property
    def revision(self) -> str | None:
        """memgov's recorded revision; when only implied by a host's revision, the one the
        schema's comment names if memgov ships it, else None (also: nothing recorded).
        """
        if self.records:
            return self.records[0][1]
        if self.implied_in and self.schema_says in shipped_revisions():
            return self.schema_says
        return None

    @property
    def host_owned(self) -> bool:
        """Whether a host's Alembic table, not memgov's own, records (or implies) memgov's revision."""
        return self.table is not None and self.table != OWN_VERSION_TABLE


def locate(dsn: str, version_table: str | None = None) -> Located:
    """Look for memgov's revision in ``version_table``, or (None) in memgov's table and the host default."""
    if version_table is None:
        tables = [OWN_VERSION_TABLE, HOST_VERSION_TABLE]
    else:
        tables = [".".join(qualified_table(version_table))]
    shipped = set(shipped_revisions())
    records: list[tuple[str, str]] = []
    others: dict[str, tuple[str, ...]] = {}
    with connect(dsn) as conn:
        for table in tables:
            ident = sql.Identifier(*qualified_table(table))
            exists = conn.execute(query("version_table_exists"), {"table": ident.as_string(conn)}).fetchone()
            if not (exists and exists[0]):
                continue
            stmt = sql.SQL(query("current_revision")).format(table=ident)
            rows = [rev for (rev,) in conn.execute(stmt).fetchall()]
            own = table == OWN_VERSION_TABLE
            records += [(table, rev) for rev in rows if own or rev in shipped]
            if not own and rows:
                others[table] = tuple(rev for rev in rows if rev not in shipped)
        schema = conn.execute(query("memgov_schema_exists")).fetchone()
    schema_exists = bool(schema and schema[0])
    implied = [(t, revs) for t, revs in others.items() if revs]
    if schema_exists and not records and implied:
        assert schema is not None
        return Located((), tuple(tables), schema_exists, implied[0][0], implied[0][1], schema_revision(schema[1]))
    return Located(tuple(records), tuple(tables), schema_exists)


_SCHEMA_REVISION = re.compile(r"\(schema revision ([0-9A-Za-z_]+)\)$")


def schema_revision(comment: str | None) -> str | None:
    """The revision schema memgov's comment names; ``0001_initial`` (which named none) for any other comment."""
    if comment is None:
        return None
    found = _SCHEMA_REVISION.search(comment)
    return found.group(1) if found else "0001_initial"


def current_revision(dsn: str, version_table: str | None = None) -> str | None:
    """The revision the memgov schema is at (wherever it is recorded); None before the first migration."""
    return locate(dsn, version_table).revision


def _alembic(run: Callable[[], None]) -> None:
    """Run an Alembic command; its errors (an unknown revision ...) become one MemgovError line,
    and a database error reaches the caller as psycopg raised it, not wrapped by SQLAlchemy."""
    from sqlalchemy.exc import DBAPIError

    try:
        run()
    except CommandError as exc:
        raise MemgovError(f"alembic: {exc}") from exc
    except DBAPIError as exc:
        if isinstance(exc.orig, psycopg.Error):
            raise exc.orig.with_traceback(None) from None
        raise


@dataclass(frozen=True)
class Migrated:
    """What ``memgov migrate`` did: the revisions before and after, where it is recorded, whether a host owns it."""

    before: str | None
    after: str | None
    version_table: str
    host_owned: bool


def migrate(dsn: str, revision: str = "head", version_table: str | None = None) -> Migrated:
    """``memgov migrate``: upgrade memgov's own history, or report a host's.

    memgov only ever writes its own version table. When memgov's revision is recorded in
    a host's table, the host's Alembic history owns the branch: at head this is a no-op;
    otherwise one error line says to run ``alembic upgrade memgov@head`` in that project
    (memgov's scripts alone cannot move a table that also records the host's heads).
    Never creates what exists: schema memgov without any record is an error, not a
    second ``CREATE SCHEMA``.
    """
    where = locate(dsn, version_table)  # also proves the DSN works, with a clear error
    if len(where.records) > 1:
        found = ", ".join(f"{rev} in {table}" for table, rev in where.records)
        raise MemgovError(
            f"memgov's revision is recorded twice ({found}): one Alembic history must own it; "
            f"if the host's does, drop {OWN_VERSION_TABLE}"
        )
    if where.host_owned:
        assert where.table is not None
        if revision in ("head", "heads", f"{BRANCH}@head", where.revision) and where.revision == head_revision():
            return Migrated(where.revision, where.revision, where.table, True)
        what = where.revision or f"(implied by {', '.join(where.implied_by)}, through depends_on)"
        raise MemgovError(
            f"memgov's revision {what} is recorded in {where.table}: the host's Alembic history "
            f"owns it; run `alembic upgrade {BRANCH}@head` in that project (memgov migrate never records it "
            f"a second time in {OWN_VERSION_TABLE})"
        )
    if where.revision is None:
        if version_table is not None and where.looked_in != (OWN_VERSION_TABLE,):
            raise MemgovError(
                f"{where.looked_in[0]} records no memgov revision: run `alembic upgrade {BRANCH}@head` in the "
                "project that owns it, or `memgov migrate` without --version-table"
            )
        if where.schema_exists:
            raise MemgovError(
                f"schema memgov exists but no version table records memgov's revision (looked in "
                f"{', '.join(where.looked_in)}): if a host's Alembic history owns it, pass --version-table "
                "[SCHEMA.]TABLE; memgov never creates what exists"
            )
    log.info("migrating memgov from %s to %s", where.revision or "nothing", revision)
    _alembic(lambda: command.upgrade(alembic_config(dsn), revision))
    _grant_version_table(dsn)
    after = current_revision(dsn, OWN_VERSION_TABLE)
    log.info("memgov schema at %s (%s)", after, OWN_VERSION_TABLE)
    return Migrated(where.revision, after, OWN_VERSION_TABLE, False)


def _grant_version_table(dsn: str) -> None:
    """Let memgov_admin read memgov's own version table (``memgov status`` shows the revision).

    Alembic creates the table as whoever migrates; granting only when missing keeps a
    migrate at head a no-op for a role that could not grant it.
    """
    ident = sql.Identifier(*qualified_table(OWN_VERSION_TABLE))
    with connect(dsn, autocommit=True) as conn:
        exists = conn.execute(query("version_table_exists"), {"table": ident.as_string(conn)}).fetchone()
        if not (exists and exists[0]):
            return  # migrated down to nothing
        granted = conn.execute(query("version_table_granted"), {"table": ident.as_string(conn)}).fetchone()
        if not (granted and granted[0]):
            conn.execute(sql.SQL(query("grant_version_table")).format(table=ident))


def upgrade(dsn: str, revision: str = "head", version_table: str | None = None) -> tuple[str | None, str | None]:
    """Upgrade the memgov schema; returns (revision before, revision after)."""
    done = migrate(dsn, revision, version_table)
    return done.before, done.after


def downgrade(dsn: str, revision: str) -> None:
    """Downgrade the memgov schema to ``revision`` (Alembic); ConnectionFailed first when the DSN does not work."""
    connect(dsn).close()
    _alembic(lambda: command.downgrade(alembic_config(dsn), revision))


def apply_sql_files(dsn: str) -> None:
    """Build the schema from the live ``sql/`` files, in order (tests, development)."""
    with connect(dsn) as conn:
        with conn.cursor() as cur:
            for path in sql_files():
                cur.execute(path.read_text(encoding="utf-8"))
