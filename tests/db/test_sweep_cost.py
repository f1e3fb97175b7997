"""What a retention sweep and a seal read, counted by PostgreSQL, not timed.

The counters are the table's own (pg_stat_user_tables: rows fetched by a sequential or an index
scan; pg_statio_user_tables: heap blocks read or found in shared buffers), taken around a
sweep in the same session. They do not depend on the machine's speed: the same rows read the
same way give the same counts on any machine, give or take a few blocks of bookkeeping, which
the margins below allow for. What they show: the sweep reads the rows it may delete (from
indexes), not the table, so its cost per swept row stays flat as the table grows; sealing
reads each row it seals once, however many wait. And the index-fed auto_delete step deletes
exactly what a walk of the whole table deletes: legal holds kept, each tenant by its own policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.decision_cases import wipe

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = (ROOT / "policies" / "default.yaml").read_text(encoding="utf-8")
TABLE = "memgov.long_term_memory_items"

#: The memories nobody sweeps: a quarter fresh ttl_30d rows, the rest permanent; confidence
#: 0.5..0.99 (no auto_delete rule of the default policy matches). ``%(n)s`` of them.
BACKGROUND = """
INSERT INTO memgov.long_term_memory_items
       (org_id, category, fact_text, source, confidence, retention_policy, created_at, updated_at)
SELECT 't' || (g %% 5), 'user_fact', 'background ' || g, 'agent_extracted', 0.5 + (g %% 50) / 100.0,
       CASE WHEN g %% 4 = 0 THEN 'ttl_30d' ELSE 'permanent_until_revoked' END,
       now() - interval '1 day', now() - interval '1 day'
  FROM generate_series(1, %(n)s) AS g
"""
#: Memories the default policy's auto_delete rules delete: confidence 0.1, never confirmed,
#: 40 days old (confidence_based: no TTL takes them first).
DUE = """
INSERT INTO memgov.long_term_memory_items
       (org_id, category, fact_text, source, confidence, retention_policy, created_at, updated_at)
SELECT 't' || (g %% 5), 'user_fact', 'due ' || g, 'agent_extracted', 0.1, 'confidence_based',
       now() - interval '40 days', now() - interval '40 days'
  FROM generate_series(1, %(n)s) AS g
"""
#: Low-confidence memories not yet due (a week old): candidates the step reads and keeps.
YOUNG = DUE.replace("'due '", "'young '").replace("40 days", "7 days")
#: Memories past their TTL.
EXPIRED = """
INSERT INTO memgov.long_term_memory_items
       (org_id, category, fact_text, source, confidence, retention_policy, created_at, updated_at)
SELECT 't' || (g %% 5), 'user_fact', 'expired ' || g, 'agent_extracted', 0.9, 'ttl_7d',
       now() - interval '8 days', now() - interval '8 days'
  FROM generate_series(1, %(n)s) AS g
"""


def deploy(conn: psycopg.Connection[Any], text: str, tenant: str = "*") -> None:
    conn.execute(compile_policy(load_policy(text), tenant).install_sql())


def policy_with(rules: str, version: str) -> str:
    """The default policy's settings and write rules with other retention rules."""
    head, _, _ = DEFAULT_POLICY.partition("  - id: forget-stale-low-confidence")
    return head.replace('version: "1.0.0"', f'version: "{version}"') + rules


@pytest.fixture
def su(db_conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """The superuser on empty tables, the default policy deployed, autovacuum off for the memory
    table and the decision log (its reads would count among the sweep's)."""
    wipe(db_conn)
    deploy(db_conn, DEFAULT_POLICY)
    for table in (TABLE, "memgov.decision_log"):
        db_conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    yield db_conn
    for table in (TABLE, "memgov.decision_log"):
        db_conn.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")


def insert(su: psycopg.Connection[Any], statement: str, n: int) -> None:
    """Rows on the engine's path (as memgov_owner: nothing decided, engine columns kept)."""
    if n:
        with su.transaction():
            su.execute("SET LOCAL ROLE memgov_owner")
            su.execute(statement, {"n": n})


def fresh_table(su: psycopg.Connection[Any], background: int, due: int = 0, young: int = 0,
                expired: int = 0) -> None:  # fmt: skip
    wipe_memories(su)
    insert(su, BACKGROUND, background)
    insert(su, DUE, due)
    insert(su, YOUNG, young)
    insert(su, EXPIRED, expired)
    su.execute(f"VACUUM ANALYZE {TABLE}")


def wipe_memories(su: psycopg.Connection[Any]) -> None:
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(f"DELETE FROM {TABLE}")
        su.execute("DELETE FROM memgov.deletion_log")
        su.execute("DELETE FROM memgov.maintenance_runs")
    su.execute(f"VACUUM {TABLE}")


def counters(conn: psycopg.Connection[Any], table: str = TABLE) -> tuple[int, int]:
    """(rows a scan fetched, heap blocks read or hit) of ``table``, this session's included."""
    conn.execute("SELECT pg_stat_force_next_flush()")  # flushed before the next statement's answer
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT coalesce(t.seq_tup_read, 0) + coalesce(t.idx_tup_fetch, 0), s.heap_blks_read + s.heap_blks_hit"
        "  FROM pg_stat_user_tables t JOIN pg_statio_user_tables s USING (relid)"
        " WHERE t.relid = %s::regclass",
        (table,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def measured_sweep(su: psycopg.Connection[Any]) -> tuple[dict[str, Any], int, int]:
    """A sweep's summary, and the rows it fetched and heap blocks it touched in the memory table."""
    rows0, blocks0 = counters(su)
    su.execute("CALL memgov.run_maintenance()")
    rows1, blocks1 = counters(su)
    summary = su.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
    return summary, rows1 - rows0, blocks1 - blocks0


def alive(su: psycopg.Connection[Any], prefix: str) -> int:
    return int(su.execute(f"SELECT count(*) FROM {TABLE} WHERE fact_text LIKE %s", (prefix + " %",)).fetchone()[0])


# -- auto_delete: the candidates come from indexes ----------------------------------------------


@pytest.mark.slow(reason="fills tables of thousands of rows: over 2 s")
def test_the_same_due_rows_cost_the_same_in_a_table_twenty_times_larger(su):
    figures = {}
    for background in (2_000, 40_000):
        fresh_table(su, background, due=600, young=100)
        summary, rows, blocks = measured_sweep(su)
        assert summary["deleted"] == {"ttl": 0, "confidence": 0, "auto_delete": 600}
        assert (alive(su, "due"), alive(su, "young"), alive(su, "background")) == (0, 100, background)
        figures[background] = (rows, blocks)
    (small_rows, small_blocks), (large_rows, large_blocks) = figures[2_000], figures[40_000]
    # the rows examined are the candidates (600 due + 100 young), not the table (a walk: 40 700)
    assert large_rows <= 700 * 1.2, figures
    assert large_rows <= small_rows * 1.1 + 20, figures
    # the heap blocks touched follow the rows swept, not the table (a walk: some 600 more blocks)
    assert large_blocks <= small_blocks * 1.1 + 50, figures


@pytest.mark.slow(reason="fills tables of thousands of rows: over 2 s")
def test_the_cost_per_swept_row_stays_flat_as_more_rows_are_due(su):
    per_row = {}
    for due in (300, 3_000):
        fresh_table(su, 10_000, due=due, expired=due)
        summary, rows, blocks = measured_sweep(su)
        assert summary["deleted"] == {"ttl": due, "confidence": 0, "auto_delete": due}
        per_row[due] = (rows / (2 * due), blocks / (2 * due))
    assert per_row[3_000][0] <= 1.2 and per_row[300][0] <= 1.2, per_row
    assert per_row[3_000][1] <= per_row[300][1] * 1.2, per_row


@pytest.mark.slow(reason="fills tables of thousands of rows: over 2 s")
def test_an_age_rule_reads_the_created_at_range_only(su):
    deploy(su, policy_with(
        "  - {id: old-scratch, priority: 100, category: scratch, condition: {created_at: {older_than: 14 days}},\n"
        "     action: auto_delete}\n", "2.0.0"))  # fmt: skip
    anchors = su.execute("SELECT rule_id, anchor FROM memgov.auto_delete_anchors()").fetchall()
    assert anchors == [("old-scratch", "created_at")]
    figures = {}
    for background in (2_000, 40_000):
        fresh_table(su, background)
        insert(su, DUE.replace("'user_fact'", "'scratch'").replace("'due '", "'scratch '"), 400)
        insert(su, DUE.replace("'due '", "'old fact '"), 50)  # old, but not scratch: kept
        su.execute(f"VACUUM ANALYZE {TABLE}")
        summary, rows, blocks = measured_sweep(su)
        assert summary["deleted"]["auto_delete"] == 400
        assert (alive(su, "scratch"), alive(su, "old fact"), alive(su, "background")) == (0, 50, background)
        figures[background] = (rows, blocks)
    assert figures[40_000][0] <= 450 * 1.2, figures
    assert figures[40_000][1] <= figures[2_000][1] * 1.1 + 50, figures


@pytest.mark.parametrize(("rules", "anchors"), [
    ("", [("forget-stale-low-confidence", "confidence", 0.3),
          ("forget-unconfirmed-low-confidence", "confidence", 0.3)]),
    ("  - {id: a, priority: 100, condition: {confidence: {lte: 0.5}}, action: auto_delete}\n",
     [("a", "confidence", 0.5)]),
    # above the index's 0.5, an age test bounds the rule instead; with none, nothing does
    ("  - {id: a, priority: 100, condition: {confidence: {lt: 0.7}, created_at: {older_than: 7 days}},"
     " action: auto_delete}\n", [("a", "created_at", None)]),
    ("  - {id: a, priority: 100, condition: {confidence: {lt: 0.7}}, action: auto_delete}\n", [("a", None, None)]),
    ("  - {id: a, priority: 100, category: scratch, action: auto_delete}\n", [("a", None, None)]),
    ("  - {id: a, priority: 100, match: any, when: [{field: confidence, operator: lt, value: 0.2},"
     " {field: created_at, operator: lt, value: 'now() - 7 days'}], action: auto_delete}\n", [("a", None, None)]),
])  # fmt: skip
def test_which_index_range_bounds_each_rule(su, rules, anchors):
    if rules:
        deploy(su, policy_with(rules, "3.0.0"))
    got = su.execute(
        "SELECT rule_id, anchor, confidence_bound::float8, created_bound IS NOT NULL"
        "  FROM memgov.auto_delete_anchors() ORDER BY rule_id"
    ).fetchall()
    assert [(r[0], r[1], r[2]) for r in got] == anchors
    assert all(r[3] == (r[1] == "created_at") for r in got)


# -- the same rows as a walk of the whole table ---------------------------------------------------

#: Every kind of memory the rules below tell apart, with ids that are the same on every fill.
MIXED = """
INSERT INTO memgov.long_term_memory_items
       (memory_id, org_id, category, fact_text, source, confidence, retention_policy, metadata,
        created_at, updated_at, last_confirmed_at)
SELECT md5('mixed' || g)::uuid, (ARRAY['acme', 'beta', 'gamma'])[1 + g %% 3],
       (ARRAY['user_fact', 'scratch', 'preference'])[1 + (g / 3) %% 3], 'mixed ' || g, 'agent_extracted',
       (g %% 10) / 10.0,
       (ARRAY['ttl_30d', 'permanent_until_revoked', 'confidence_based', 'ttl_7d'])[1 + (g / 9) %% 4],
       CASE WHEN g %% 7 = 0 THEN '{"legal_hold": "yes"}' ELSE '{}' END::jsonb,
       now() - ((g %% 6) * 5 || ' days')::interval, now(),
       CASE WHEN g %% 5 = 0 THEN now() - ((g %% 4) * 15 || ' days')::interval END
  FROM generate_series(1, 1500) AS g
"""
RULES = """\
  - {id: legal-hold, priority: 5, when: [{field: operation_type, operator: eq, value: forget},
      {field: metadata.legal_hold, operator: eq, value: "yes"}], action: deny, reason_codes: [LEGAL_HOLD]}
  - {id: low, priority: 100, condition: {confidence: {lt: 0.3}, last_confirmed_at: {older_than: 20 days}},
     action: auto_delete}
  - {id: old-scratch, priority: 110, category: scratch, condition: {created_at: {older_than: 12 days}},
     action: auto_delete}
"""
#: A rule no index bounds, which matches nothing: the sweep must walk the table for it.
WALK_RULE = """\
  - {id: walk, priority: 120, match: any, when: [{field: fact_text, operator: contains, value: NEVER-ANY},
      {field: source, operator: eq, value: system_rule}], action: auto_delete}
"""


def swept(su: psycopg.Connection[Any], rules: str, version: str) -> tuple[set[Any], set[Any]]:
    """The memories left and the (memory, rule) deletions of a sweep of MIXED under ``rules``
    (global, and a tenant override for beta that deletes by confidence only)."""
    wipe(su)
    deploy(su, policy_with(rules, version))
    deploy(su, policy_with(rules.split("  - {id: old-scratch")[0], version + "-beta"), tenant="beta")
    insert(su, MIXED, 1)
    su.execute("CALL memgov.run_maintenance()")
    left = {r[0] for r in su.execute(f"SELECT memory_id FROM {TABLE}")}
    deleted = set(su.execute(
        "SELECT m, d.rule_id FROM memgov.deletion_log d CROSS JOIN LATERAL unnest(d.memory_ids) AS m"
        " WHERE d.reason = 'auto_delete'"
    ).fetchall())  # fmt: skip
    return left, deleted


def test_the_indexes_sweep_the_same_rows_as_a_walk_of_the_table(su):
    indexed = swept(su, RULES, "4.0.0")
    assert {r[0] for r in su.execute("SELECT anchor FROM memgov.auto_delete_anchors()")} == {"confidence", "created_at"}
    walked = swept(su, RULES + WALK_RULE, "5.0.0")
    assert None in {r[0] for r in su.execute("SELECT anchor FROM memgov.auto_delete_anchors()")}
    assert indexed == walked
    left, deleted = indexed
    assert not left & {memory_id for memory_id, _ in deleted}
    assert len(deleted) > 100 and {rule for _, rule in deleted} == {"low", "old-scratch"}
    gone = {memory_id for memory_id, _ in deleted}
    kept = su.execute(
        "SELECT bool_and(NOT (md5('mixed' || g)::uuid = ANY (%s))) FROM generate_series(1, 1500) g"
        " WHERE g %% 7 = 0 OR (ARRAY['ttl_30d', 'permanent_until_revoked', 'confidence_based', 'ttl_7d'])"
        "       [1 + (g / 9) %% 4] = 'permanent_until_revoked'",
        (list(gone),),
    ).fetchone()[0]
    assert kept  # legal holds and permanent memories are never swept
    assert not any(rule == "old-scratch" for memory_id, rule in deleted if memory_id in beta_ids(su))


def beta_ids(su: psycopg.Connection[Any]) -> set[Any]:
    return {r[0] for r in su.execute("SELECT md5('mixed' || g)::uuid FROM generate_series(1, 1500) g WHERE g % 3 = 1")}


def test_a_small_batch_size_resumes_each_range_where_it_stopped(su):
    deploy(su, policy_with(RULES, "6.0.0").replace("batch_size: 5000", "batch_size: 7"))
    insert(su, MIXED, 1)
    expected_low = su.execute(
        f"SELECT count(*) FROM {TABLE} WHERE confidence < 0.3 AND last_confirmed_at < now() - interval '20 days'"
        " AND retention_policy NOT IN ('permanent_until_revoked') AND NOT metadata @> '{\"legal_hold\": \"yes\"}'"
        " AND (retention_policy <> 'ttl_7d' OR created_at > now() - interval '7 days')"
        " AND (retention_policy <> 'ttl_30d' OR created_at > now() - interval '30 days')"
    ).fetchone()[0]
    su.execute("CALL memgov.run_maintenance()")
    summary = su.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
    assert "range" not in summary and "cursor" not in summary
    batches = su.execute("SELECT count(DISTINCT xmin::text) FROM memgov.deletion_log WHERE reason = 'auto_delete'")
    assert batches.fetchone()[0] > 2
    low = su.execute("SELECT sum(memory_count) FROM memgov.deletion_log WHERE rule_id = 'low'").fetchone()[0]
    assert low == expected_low
    # a second run finds nothing the first one left behind
    su.execute("CALL memgov.run_maintenance()")
    again = su.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
    assert again["deleted"]["auto_delete"] == 0


# -- sealing: each row read once ----------------------------------------------------------------

LOG_ROWS = """
INSERT INTO memgov.decision_log (operation, memory_id, org_id, action, enforced, reason_codes, matched_rule_ids,
                                 policy_version, mode)
SELECT 'remember', md5('log' || g)::uuid, 'acme', 'allow', true, '{ALLOWED}', '{r}', '1.0.0', 'enforce'
  FROM generate_series(1, %(n)s) AS g
"""


@pytest.mark.slow(reason="fills tables of thousands of rows: over 2 s")
def test_sealing_reads_each_waiting_row_once_however_many_wait(su):
    per_row = {}
    for waiting in (2_000, 20_000):
        wipe(su)
        su.execute(LOG_ROWS, {"n": waiting})
        su.execute("VACUUM ANALYZE memgov.decision_log")
        _, blocks0 = counters(su, "memgov.decision_log")
        sealed = su.execute("SELECT memgov.seal_decision_log(500)").fetchone()[0]
        _, blocks1 = counters(su, "memgov.decision_log")
        assert sealed["sealed"] == waiting and sealed["seals"] == waiting // 500
        per_row[waiting] = (blocks1 - blocks0) / waiting
        assert su.execute("SELECT memgov.verify_decision_log()").fetchone()[0]["ok"] is True
    # a query per seal read every waiting row again: 40 seals, some 20 times the blocks a row
    assert per_row[20_000] <= per_row[2_000] * 1.2 + 0.005, per_row
