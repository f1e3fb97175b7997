"""The clean slate a database test starts from, built once per module and then checked.

``fresh(conn, setup)`` leaves the database as ``wipe(conn); setup(conn)`` leaves it: memgov's
tables empty (tests/decision_cases.MEMGOV_TABLES), no policy but what ``setup`` deploys, and
whatever else ``setup`` writes into memgov's other tables (settings, tenant bindings).

Building that takes a reset and a deploy (the compiler, ``install_policy``, the dispatch rebuilt
three times), about a tenth of a second, while most tests only add rows: they leave the policies,
settings and functions as they found them. So the full path is taken once, and a fingerprint of
everything besides the emptied tables that it sets is recorded right after it:

- the rows of every other table of schema memgov (policy versions, activations, rules,
  settings, tenant bindings, and any table added later), by row version;
- every function of schema memgov and its comment, by row version (a CREATE OR REPLACE, an
  ALTER, a GRANT or a COMMENT writes a new one); the triggers of memgov's tables with their
  state; the schema's privileges.

The next test of the module empties the tables it wrote to and computes the fingerprint again.
Equal, the database is what the full path would build (identity counters and the deploy's
timestamps aside, which the full path does not reset either), and the setup is skipped.
Different (a test deployed, bound a tenant, changed a setting, replaced a function), the full
path runs. Nothing is assumed about what a test did: the check is on the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from tests.decision_cases import APPEND_ONLY_TABLES, MEMGOV_TABLES, empty_tables, reset_policies

Setup = Callable[[psycopg.Connection[Any]], None]

#: (database, setup) -> the fingerprint right after ``wipe`` and that setup; the database
#: names are unique in a test session (memgov_pg.testing), so a slate never outlives its database
_SLATES: dict[tuple[str, str], str] = {}

_TABLES = """
SELECT c.relname::text FROM pg_catalog.pg_class c
 WHERE c.relnamespace = 'memgov'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
 ORDER BY 1
"""

#: memgov's functions and their comments by row version (a CREATE OR REPLACE, ALTER, GRANT or
#: COMMENT writes a new one), its triggers by content (the wipe itself switches the append-only
#: tables' guards off and on), the schema's privileges
_CATALOG = """
SELECT format('function %s %s %s', p.oid, p.xmin, d.xmin)
  FROM pg_catalog.pg_proc p
  LEFT JOIN pg_catalog.pg_description d
         ON d.objoid = p.oid AND d.classoid = 'pg_catalog.pg_proc'::regclass AND d.objsubid = 0
 WHERE p.pronamespace = 'memgov'::regnamespace
UNION ALL
SELECT format('trigger %s %s', t.oid, md5(t::text))
  FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'memgov'::regnamespace
UNION ALL
SELECT format('schema %s', n.nspacl) FROM pg_catalog.pg_namespace n WHERE n.nspname = 'memgov'
"""


def _tables(conn: psycopg.Connection[Any]) -> tuple[list[str], list[str]]:
    """memgov's tables: (those ``wipe`` empties, the others)."""
    names = [name for (name,) in conn.execute(_TABLES).fetchall()]
    return [n for n in names if n in MEMGOV_TABLES], [n for n in names if n not in MEMGOV_TABLES]


def _with_rows(conn: psycopg.Connection[Any], tables: list[str]) -> list[str]:
    """Those of ``tables`` that hold a row."""
    if not tables:
        return []
    query = sql.SQL("SELECT array_remove(ARRAY[{}]::text[], NULL)").format(
        sql.SQL(", ").join(
            sql.SQL("CASE WHEN EXISTS (SELECT FROM memgov.{}) THEN {} END").format(sql.Identifier(t), sql.Literal(t))
            for t in tables
        )
    )
    row = conn.execute(query).fetchone()
    assert row is not None
    return list(row[0])


def _empty(conn: psycopg.Connection[Any], tables: list[str]) -> None:
    """``empty_tables`` for these of MEMGOV_TABLES only (in its order); all of them when a
    trigger filled another meanwhile."""
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        guarded = [t for t in APPEND_ONLY_TABLES if t in tables]
        for table in guarded:
            conn.execute(sql.SQL("ALTER TABLE memgov.{} DISABLE TRIGGER refuse_change").format(sql.Identifier(table)))
        for table in MEMGOV_TABLES:
            if table in tables:
                conn.execute(sql.SQL("DELETE FROM memgov.{}").format(sql.Identifier(table)))
        for table in guarded:
            conn.execute(
                sql.SQL("ALTER TABLE memgov.{} ENABLE ALWAYS TRIGGER refuse_change").format(sql.Identifier(table))
            )
    if _with_rows(conn, list(MEMGOV_TABLES)):
        empty_tables(conn)


def fingerprint(conn: psycopg.Connection[Any], others: list[str]) -> str:
    """What the full path sets besides the emptied tables (see the module's docstring), as one text.

    Rows are compared by version (ctid and xmin), not content: whatever a test writes, even the
    same values again, is a new row version, so a change is never missed (a VACUUM FULL moving
    rows only costs a rebuild); and the deploys' long compiled SQL is not hashed before each test."""
    contents = [
        sql.SQL(
            "SELECT {} || ' ' || coalesce(string_agg(t.ctid::text || t.xmin::text, ',' ORDER BY t.ctid), '')"
            " FROM memgov.{} t"
        ).format(sql.Literal(f"table {name}"), sql.Identifier(name))
        for name in others
    ]
    query = sql.SQL("SELECT string_agg(line, E'\\n' ORDER BY line) FROM ({}) AS lines(line)").format(
        sql.SQL("\nUNION ALL\n").join([sql.SQL(_CATALOG), *contents])
    )
    row = conn.execute(query).fetchone()
    assert row is not None
    return str(row[0])


def fresh(conn: psycopg.Connection[Any], setup: Setup, key: str | None = None) -> None:
    """Leave the database as ``wipe(conn); setup(conn)`` would, skipping the setup when the
    fingerprint says it would write what is there already.

    ``setup`` (the superuser's connection) must do the same each time and touch nothing outside
    schema memgov; ``key`` names it (default: its module and name)."""
    slate = (conn.info.dbname, key or f"{setup.__module__}.{setup.__qualname__}")
    emptied, others = _tables(conn)
    touched = _with_rows(conn, emptied)
    if touched:
        _empty(conn, touched)
    if slate in _SLATES and _SLATES[slate] == fingerprint(conn, others):
        return
    _SLATES.pop(slate, None)
    empty_tables(conn)  # as the wipe does: it also puts the append-only tables' guards back as they must be
    reset_policies(conn)
    setup(conn)
    # a setup that writes into the emptied tables is run in full every time: skipping it
    # after those rows were deleted would not give the same database
    if not _with_rows(conn, emptied):
        _SLATES[slate] = fingerprint(conn, others)
