"""The SQL CHECK lists and the policy vocabulary say the same thing.

Each list is read from the catalog (pg_constraint, pg_get_constraintdef) and compared
with what memgov_pg.policy exports, so the test fails when either side changes alone.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from memgov_pg.policy import (
    MODES,
    OPERATION_TYPES,
    RETENTION_ACTIONS,
    RETENTION_POLICIES,
    SOURCES,
    STATUSES,
    WRITE_ACTIONS,
)

# a CHECK of the form  col = ANY (ARRAY['a'::text, 'b'::text])  (how PostgreSQL prints col IN (...))
_IN_LIST = re.compile(r"^CHECK \(\(\(?(\w+)\)? = ANY \(\(?ARRAY\[(.*)\]\)?(?:::text\[\])?\)\)\)$")
_LITERAL = re.compile(r"'((?:[^']|'')*)'::text")


def check_list(conn: psycopg.Connection[Any], table: str, column: str) -> tuple[str, ...]:
    """The values the one CHECK on memgov.<table>.<column> allows, in the order it lists them:
    a CHECK constraint of the table, or of the column's domain (VALUE IN (...))."""
    defs = [
        d
        for (d,) in conn.execute(
            """
            SELECT pg_get_constraintdef(c.oid)
              FROM pg_attribute a
              JOIN pg_constraint c
                ON (c.conrelid = a.attrelid AND a.attnum = ANY (c.conkey) AND cardinality(c.conkey) = 1)
                OR c.contypid = a.atttypid
             WHERE c.contype = 'c' AND a.attrelid = ('memgov.' || %s)::regclass AND a.attname = %s
            """,
            (table, column),
        ).fetchall()
        if _IN_LIST.match(d)
    ]
    assert len(defs) == 1, f"memgov.{table}.{column}: expected one CHECK ({column} IN (...)), found {defs}"
    match = _IN_LIST.match(defs[0])
    assert match is not None and match.group(1) in (column, "VALUE"), defs[0]
    return tuple(v.replace("''", "'") for v in _LITERAL.findall(match.group(2)))


@pytest.mark.parametrize(
    ("table", "column", "vocabulary"),
    [
        ("long_term_memory_items", "source", SOURCES),
        ("long_term_memory_items", "status", STATUSES),
        ("long_term_memory_items", "retention_policy", RETENTION_POLICIES),
        ("policy_versions", "mode", MODES),
        ("memory_policy_rules", "action", WRITE_ACTIONS + RETENTION_ACTIONS),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_check_list_is_the_vocabulary(db_conn, table, column, vocabulary):
    assert set(check_list(db_conn, table, column)) == set(vocabulary)


@pytest.mark.parametrize("table", ["approval_requests", "quarantine"])
def test_held_and_quarantined_operations_are_operations_of_the_vocabulary(db_conn, table):
    # only writes are held or quarantined: the CHECK names some of the operations, the same in both tables
    held = check_list(db_conn, table, "operation")
    assert held and set(held) <= set(OPERATION_TYPES), f"{table}.operation allows {held}"
    assert set(held) == set(check_list(db_conn, "approval_requests", "operation"))


def test_the_operations_sql_accepts_are_the_vocabulary(db_conn):
    # memgov.check_operation() guards evaluate/explain; its list is a NOT IN (...) in the catalog's copy
    (source,) = db_conn.execute(
        "SELECT prosrc FROM pg_proc WHERE oid = 'memgov.check_operation(text)'::regprocedure"
    ).fetchone()
    lists = re.findall(r"NOT IN \(([^)]*)\)", source)
    assert len(lists) == 1, source
    assert set(re.findall(r"'([^']*)'", lists[0])) == set(OPERATION_TYPES)
    for operation in OPERATION_TYPES:
        assert db_conn.execute("SELECT memgov.check_operation(%s)", (operation,)).fetchone() == (operation,)
