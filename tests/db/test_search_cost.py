"""What a search reads, counted by PostgreSQL, not timed (docs/performance.md, "scale").

A search reads its own tenant's matches, not the table's: the full-text index leads with the
tenant (``long_term_memory_items_tenant_search_idx``, btree_gin), so another tenant's memories
that match the same words cost it nothing. The counters are the memory table's own
(pg_stat_user_tables: rows fetched by a sequential or an index scan), taken around the search in
the searching session; they do not depend on the machine's speed. The plan is checked too: the
index scan's condition names the tenant.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.attack_helpers import ORG
from tests.recall_helpers import search

TABLE = "memgov.long_term_memory_items"
INDEX = "long_term_memory_items_tenant_search_idx"

#: ``%(n)s`` memories of tenant ``%(org)s`` on the engine's path (as memgov_owner: nothing
#: decided); one in ten holds the word "needle", the rest only hay. Ten tenants t0..t9 when
#: ``%(org)s`` is NULL.
MEMORIES = """
INSERT INTO memgov.long_term_memory_items
       (org_id, project_id, category, fact_text, source, confidence)
SELECT coalesce(%(org)s, 't' || (g %% 10)), 'p' || (g %% 3), 'user_fact',
       CASE WHEN g %% 10 = 0 OR %(org)s IS NULL THEN 'needle ' ELSE '' END || 'hay ' || g,
       'agent_extracted', 0.5 + (g %% 50) / 100.0
  FROM generate_series(1, %(n)s) AS g
"""
TENANT_ROWS = 400  # 40 of them match "needle"
TENANT_MATCHES = TENANT_ROWS // 10


def load(su: psycopg.Connection[Any], n: int, org: str | None) -> None:
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(MEMORIES, {"n": n, "org": org})
    su.execute(f"VACUUM ANALYZE {TABLE}")


def fetched(conn: psycopg.Connection[Any]) -> int:
    """The rows any scan has fetched from the memory table, this session's included."""
    conn.execute("SELECT pg_stat_force_next_flush()")  # flushed before the next statement's answer
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
        "  FROM pg_stat_user_tables WHERE relid = %s::regclass",
        (TABLE,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def measured(conn: psycopg.Connection[Any], **query: Any) -> tuple[list[Any], int]:
    """A search's memory ids, best first, and the rows it fetched from the table."""
    before = fetched(conn)
    rows = search(conn, **query)
    return [r["memory_id"] for r in rows], fetched(conn) - before


@pytest.fixture
def crowded(su: psycopg.Connection[Any], writer: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The superuser, the writer's tenant holding 400 memories (each test then adds 20,000 of ten
    other tenants, every one of which matches "needle")."""
    load(su, TENANT_ROWS, ORG)
    return su


def test_a_search_reads_its_tenants_matches_not_the_tables(crowded, writer):
    alone = [measured(writer, text="needle", limit=50) for _ in range(2)]
    load(crowded, 20_000, None)
    # eight searches: PL/pgSQL plans a cursor's query for its values five times, then may
    # keep a generic plan; both must read the tenant's matches only
    among_others = [measured(writer, text="needle", limit=50) for _ in range(8)]

    rows, _ = alone[0]  # (a table of 400 rows may as well be read whole)
    assert len(rows) == TENANT_MATCHES
    assert all(found == rows for found, _ in alone)
    for found, reads in among_others:
        assert found == rows  # the same rows in the same order, whoever else matches
        # the tenant's matches (with slack), not the other tenants' 20,000
        assert reads <= 2 * TENANT_MATCHES, [r for _, r in among_others]


def test_a_search_without_text_reads_its_tenants_rows_not_the_tables(crowded, writer):
    load(crowded, 20_000, None)
    for _ in range(8):
        rows, reads = measured(writer, project_id="p1", limit=500)
        assert len(rows) == len(range(1, TENANT_ROWS + 1, 3))  # project p1: g % 3 = 1
        assert reads <= TENANT_ROWS + TENANT_MATCHES, reads


def test_the_plan_looks_the_tenant_up_in_the_index(crowded, writer):
    """The search's own query, as PostgreSQL runs it inside memgov.search (auto_explain, as a
    notice to the superuser's session): a bitmap scan of the tenant's full-text index whose
    condition holds both the tenant and the text."""
    load(crowded, 20_000, None)
    su = crowded
    su.execute("LOAD 'auto_explain'")
    plans: list[str] = []
    su.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    try:
        for setting, value in (("log_min_duration", "0"), ("log_nested_statements", "on"), ("log_level", "notice")):
            su.execute(f"SET auto_explain.{setting} = {value}")
        su.execute("SET ROLE memgov_writer")
        su.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
        for _ in range(8):
            plans.clear()
            su.execute("SELECT count(*) FROM memgov.search(%s)", (Jsonb({"text": "needle"}),))
            scans = [p for p in plans if "@@" in p and "ORDER BY score" in p]
            assert len(scans) == 1, plans
            plan = scans[0]
            assert f"Bitmap Index Scan on {INDEX}" in plan, plan
            cond = next(line for line in plan.splitlines() if "Index Cond" in line and INDEX not in line)
            assert "org_id" in cond and "search_vector @@" in cond, plan
            assert "Seq Scan" not in plan, plan
    finally:
        su.execute("RESET ROLE")
        su.execute("RESET memgov.org_id")
        for setting in ("log_min_duration", "log_nested_statements", "log_level"):
            su.execute(f"RESET auto_explain.{setting}")
