"""Retention (docs/retention.md): the trigger's bookkeeping, and CALL memgov.run_maintenance()
on both sides of every boundary, batches, the advisory lock, a killed run.

Time is moved by back-dating rows as a superuser through memgov_owner (the
engine's own path), never by a setting a writer could use.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.attack_helpers import AsRole, connect_as_role
from tests.clean_slate import fresh
from tests.waiting import DEADLINE, blocked_by, join, wait_for

POLICY = """
version: "{version}"
defaults: {{on_policy_miss: allow}}
sources: {{user_confirmed: ["*"]}}
retention: {{batch_size: {batch_size}, confidence_floor: {floor}, confidence_grace: 30 days, approval_ttl: 7 days}}
rules:
  - {{id: hold-words, priority: 20, when: [{{field: fact_text, operator: contains, value: HOLDME}}],
      action: require_approval}}
  - {{id: drop-scratch, priority: 100, category: scratch, condition: {{confidence: {{lt: 0.5}}}},
      action: auto_delete, reason_codes: [SCRATCH]}}
"""
ORG = "acme"


def deploy(conn: psycopg.Connection[Any], version: str = "1.0.0", *, batch_size: int = 5000,
           floor: str = "0.3", tenant: str = "*", text: str | None = None) -> None:  # fmt: skip
    source = text or POLICY.format(version=version, batch_size=batch_size, floor=floor)
    conn.execute(compile_policy(load_policy(source), tenant).install_sql())


@pytest.fixture
def su(db_conn):
    """Superuser connection; every test starts from empty tables and the test policy."""
    fresh(db_conn, deploy)
    return db_conn


@pytest.fixture
def writer(as_role: AsRole) -> psycopg.Connection[Any]:
    """memgov_writer by SET ROLE in tenant acme (not a login: the attack tests use logins)."""
    return as_role("memgov_writer")


def remember(conn: psycopg.Connection[Any], text: str = "a fact", confidence: str = "0.9",
             retention: str = "permanent_until_revoked", category: str = "user_fact",
             org: str = ORG) -> uuid.UUID:  # fmt: skip
    return conn.execute(
        "INSERT INTO memgov.long_term_memory_items"
        " (org_id, category, fact_text, source, confidence, retention_policy)"
        " VALUES (%s, %s, %s, 'agent_extracted', %s, %s) RETURNING memory_id",
        (org, category, text, Decimal(confidence), retention),
    ).fetchone()[0]


def backdate(su: psycopg.Connection[Any], memory_id: uuid.UUID, column: str, age: str) -> None:
    """Let ``age`` pass for one engine-maintained timestamp of a memory (as memgov_owner)."""
    assert column in ("created_at", "low_confidence_since", "last_confirmed_at")
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            f"UPDATE memgov.long_term_memory_items SET {column} = now() - %s::interval WHERE memory_id = %s",
            (age, memory_id),
        )


def row(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> dict[str, Any] | None:
    cur = su.execute("SELECT * FROM memgov.long_term_memory_items WHERE memory_id = %s", (memory_id,))
    found = cur.fetchone()
    return None if found is None else dict(zip([c.name for c in cur.description], found, strict=True))


def alive(su: psycopg.Connection[Any], *ids: uuid.UUID) -> set[uuid.UUID]:
    return {r[0] for r in su.execute(
        "SELECT memory_id FROM memgov.long_term_memory_items WHERE memory_id = ANY(%s)", (list(ids),))}  # fmt: skip


def sweep(conn: psycopg.Connection[Any], dry_run: bool = False) -> dict[str, Any]:
    conn.execute("CALL memgov.run_maintenance(%s)", (dry_run,))
    return conn.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]


def deletions(su: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """A row per deleted memory (the log holds a row per batch and tenant, with their ids)."""
    return su.execute(
        "SELECT m.memory_id, d.org_id, d.reason, d.rule_id, d.policy_version"
        " FROM memgov.deletion_log d CROSS JOIN LATERAL unnest(d.memory_ids) AS m(memory_id)"
        " ORDER BY d.deletion_id, m.memory_id"
    ).fetchall()


def logged_ids(conn: psycopg.Connection[Any], where: str = "true", params: tuple[Any, ...] = ()) -> list[uuid.UUID]:
    return [r[0] for r in conn.execute(
        f"SELECT unnest(memory_ids) FROM memgov.deletion_log WHERE {where}", params)]  # fmt: skip


# -- bookkeeping by the trigger -------------------------------------------------------------


def test_expires_at_follows_retention_policy_and_created_at(writer, su):
    week = remember(writer, retention="ttl_7d")
    month = remember(writer, retention="ttl_30d")
    forever = remember(writer)
    for memory_id, days in ((week, 7), (month, 30)):
        r = row(su, memory_id)
        assert (r["expires_at"] - r["created_at"]).total_seconds() == days * 86400
    assert row(su, forever)["expires_at"] is None
    backdate(su, week, "created_at", "3 days")
    r = row(su, week)
    assert (r["expires_at"] - r["created_at"]).total_seconds() == 7 * 86400

    # a new retention_policy recomputes it
    writer.execute(
        "UPDATE memgov.long_term_memory_items SET retention_policy = 'ttl_30d' WHERE memory_id = %s", (week,)
    )
    r = row(su, week)
    assert (r["expires_at"] - r["created_at"]).total_seconds() == 30 * 86400
    writer.execute(
        "UPDATE memgov.long_term_memory_items SET retention_policy = 'permanent_until_revoked' WHERE memory_id = %s",
        (week,),
    )
    assert row(su, week)["expires_at"] is None


def test_low_confidence_since_is_set_below_the_floor_and_cleared_above(writer, su):
    memory_id = remember(writer, confidence="0.2", retention="confidence_based")
    r = row(su, memory_id)
    assert r["low_confidence_since"] == r["created_at"]
    backdate(su, memory_id, "low_confidence_since", "10 days")
    since = row(su, memory_id)["low_confidence_since"]

    def set_confidence(value: str) -> None:
        writer.execute(
            "UPDATE memgov.long_term_memory_items SET confidence = %s WHERE memory_id = %s", (Decimal(value), memory_id)
        )

    set_confidence("0.25")  # still below: the clock keeps running
    assert row(su, memory_id)["low_confidence_since"] == since
    set_confidence("0.3")  # at the floor is not below it
    assert row(su, memory_id)["low_confidence_since"] is None
    set_confidence("0.1")  # below again: a new clock
    assert row(su, memory_id)["low_confidence_since"] > since

    # only confidence_based memories carry it; a new retention_policy recomputes it
    writer.execute("UPDATE memgov.long_term_memory_items SET retention_policy = 'ttl_7d' WHERE memory_id = %s",
                   (memory_id,))  # fmt: skip
    assert row(su, memory_id)["low_confidence_since"] is None
    writer.execute(
        "UPDATE memgov.long_term_memory_items SET retention_policy = 'confidence_based' WHERE memory_id = %s",
        (memory_id,),
    )
    assert row(su, memory_id)["low_confidence_since"] is not None
    assert row(su, remember(writer, confidence="0.9", retention="confidence_based"))["low_confidence_since"] is None
    assert row(su, remember(writer, confidence="0.1"))["low_confidence_since"] is None  # permanent


def test_feedback_keeps_the_clock_too(writer, su, memgov_dsn):
    memory_id = remember(writer, confidence="0.5", retention="confidence_based")
    with connect_as_role(memgov_dsn, "memgov_reviewer") as reviewer:
        reviewer.execute("SELECT memgov.reject(%s)", (memory_id,))  # 0.2
        assert row(su, memory_id)["low_confidence_since"] is not None
        reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,))  # 0.3
        assert row(su, memory_id)["low_confidence_since"] is None


def test_writers_cannot_set_the_engines_columns(writer):
    memory_id = remember(writer, retention="ttl_7d")
    for column in ("expires_at", "low_confidence_since"):
        with pytest.raises(errors.InsufficientPrivilege):
            writer.execute(
                f"UPDATE memgov.long_term_memory_items SET {column} = now() + interval '1 year' WHERE memory_id = %s",
                (memory_id,),
            )


# -- what the sweep deletes ------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "kept_age", "gone_age"), [
    ("ttl_7d", "6 days 23 hours", "7 days 1 minute"),
    ("ttl_30d", "29 days 23 hours", "30 days 1 minute"),
])  # fmt: skip
def test_ttl_on_both_sides_of_the_boundary(writer, su, policy, kept_age, gone_age):
    kept = remember(writer, "kept", retention=policy)
    gone = remember(writer, "gone", retention=policy)
    backdate(su, kept, "created_at", kept_age)
    backdate(su, gone, "created_at", gone_age)
    summary = sweep(su)
    assert alive(su, kept, gone) == {kept}
    assert summary["deleted"] == {"ttl": 1, "confidence": 0, "auto_delete": 0}
    assert deletions(su) == [(gone, ORG, "ttl", None, "1.0.0")]


def test_confidence_based_on_both_sides_of_the_grace(writer, su):
    kept = remember(writer, "kept", confidence="0.2", retention="confidence_based")
    gone = remember(writer, "gone", confidence="0.2", retention="confidence_based")
    above = remember(writer, "above the floor", confidence="0.3", retention="confidence_based")
    backdate(su, kept, "low_confidence_since", "29 days 23 hours")
    backdate(su, gone, "low_confidence_since", "30 days 1 minute")
    backdate(su, above, "created_at", "400 days")
    summary = sweep(su)
    assert alive(su, kept, gone, above) == {kept, above}
    assert summary["deleted"]["confidence"] == 1
    assert deletions(su) == [(gone, ORG, "confidence", None, "1.0.0")]


def test_raising_confidence_resets_the_grace(writer, su, memgov_dsn):
    memory_id = remember(writer, confidence="0.25", retention="confidence_based")
    backdate(su, memory_id, "low_confidence_since", "60 days")
    with connect_as_role(memgov_dsn, "memgov_reviewer") as reviewer:
        reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,))  # 0.35: above the floor
        sweep(su)
        assert alive(su, memory_id) == {memory_id}
        (before_reject,) = su.execute("SELECT now()").fetchone()
        reviewer.execute("SELECT memgov.reject(%s)", (memory_id,))  # 0.05: below again, a fresh clock
    sweep(su)
    assert alive(su, memory_id) == {memory_id}
    assert row(su, memory_id)["low_confidence_since"] >= before_reject


def test_a_lowered_floor_spares_memories_now_above_it(writer, su):
    memory_id = remember(writer, confidence="0.25", retention="confidence_based")
    backdate(su, memory_id, "low_confidence_since", "60 days")
    deploy(su, "2.0.0", floor="0.2")
    assert su.execute("SELECT memgov.apply_retention(%s)", (memory_id,)).fetchone()[0]["deleted"] is False
    sweep(su)
    assert alive(su, memory_id) == {memory_id}


def test_auto_delete_rules_but_never_permanent_until_revoked(writer, su):
    scratch = remember(writer, "scratch note", confidence="0.4", category="scratch", retention="ttl_30d")
    confident = remember(writer, "confident scratch", confidence="0.6", category="scratch", retention="ttl_30d")
    permanent = remember(writer, "permanent scratch", confidence="0.0", category="scratch")
    old_permanent = remember(writer, "old and unsure", confidence="0.0")
    backdate(su, permanent, "created_at", "1000 days")
    backdate(su, old_permanent, "created_at", "1000 days")
    summary = sweep(su)
    assert alive(su, scratch, confident, permanent, old_permanent) == {confident, permanent, old_permanent}
    assert summary["deleted"] == {"ttl": 0, "confidence": 0, "auto_delete": 1}
    assert deletions(su) == [(scratch, ORG, "auto_delete", "drop-scratch", "1.0.0")]
    assert su.execute("SELECT memgov.apply_retention(%s)", (permanent,)).fetchone()[0]["deleted"] is False


def test_each_tenant_is_swept_by_its_own_policy(writer, su, memgov_dsn):
    no_auto_delete = POLICY.replace('version: "{version}"', 'version: "7.0.0"').split("  - {{id: drop-scratch")[0]
    deploy(su, tenant="beta", text=no_auto_delete.format(batch_size=5000, floor="0.3"))
    acme = remember(writer, "acme scratch", confidence="0.1", category="scratch", retention="ttl_30d")
    with connect_as_role(memgov_dsn, "memgov_writer", "beta") as beta_writer:
        beta = remember(beta_writer, "beta scratch", confidence="0.1", category="scratch", retention="ttl_30d",
                        org="beta")  # fmt: skip
        beta_week = remember(beta_writer, "beta week", retention="ttl_7d", org="beta")
    backdate(su, beta_week, "created_at", "8 days")
    sweep(su)
    assert alive(su, acme, beta, beta_week) == {beta}
    assert sorted(deletions(su), key=str) == sorted(
        [(acme, ORG, "auto_delete", "drop-scratch", "1.0.0"), (beta_week, "beta", "ttl", None, "7.0.0")], key=str
    )


def test_the_auto_delete_walk_covers_the_whole_table_in_small_batches(su):
    deploy(su, "2.0.0", batch_size=7)
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence,"
            " retention_policy)"
            " SELECT %s, CASE WHEN g %% 10 = 0 THEN 'scratch' ELSE 'user_fact' END, 'row ' || g,"
            " 'agent_extracted', 0.1, CASE WHEN g %% 20 = 0 THEN 'permanent_until_revoked' ELSE 'ttl_30d' END"
            " FROM generate_series(1, 600) g",
            (ORG,),
        )
    summary = sweep(su)
    assert summary["deleted"]["auto_delete"] == 30  # 60 scratch rows, half of them permanent
    left = su.execute(
        "SELECT count(*) FILTER (WHERE category = 'scratch'), count(*) FROM memgov.long_term_memory_items"
    ).fetchone()
    assert left == (30, 570)
    assert "cursor" not in summary and "blocks" not in summary
    batches = su.execute("SELECT count(DISTINCT xmin::text) FROM memgov.deletion_log").fetchone()[0]
    assert batches > 1


@pytest.mark.parametrize(("rules", "bound", "kept"), [
    ("[{id: a, priority: 10, category: scratch, condition: {confidence: {lt: 0.5}}, action: auto_delete}]",
     "0.5", "high"),
    ("[{id: a, priority: 10, condition: {confidence: {lte: 0.2}, last_confirmed_at: null}, action: auto_delete},"
     " {id: b, priority: 20, condition: {confidence: {lt: 0.4}}, action: auto_delete}]", "0.4", "high"),
    ("[{id: a, priority: 10, condition: {confidence: {lt: 0.5}}, action: auto_delete},"
     " {id: b, priority: 20, category: scratch, action: auto_delete}]", None, "high"),  # b matches any confidence
    ("[{id: a, priority: 10, match: any, when: [{field: confidence, operator: lt, value: 0.5},"
     " {field: category, operator: eq, value: scratch}], action: auto_delete}]", None, "high"),
    ("[{id: a, priority: 10, condition: {confidence: {gt: 0.9}}, action: auto_delete}]", None, "low"),
])  # fmt: skip
def test_the_walk_passes_over_confidences_no_auto_delete_rule_can_match(writer, su, rules, bound, kept):
    text = POLICY.split("rules:")[0].format(version="8.0.0", batch_size=5000, floor="0.3") + f"rules: {rules}\n"
    deploy(su, text=text)
    got = su.execute("SELECT memgov.auto_delete_confidence_bound()").fetchone()[0]
    assert got == (None if bound is None else Decimal(bound))
    # whatever the bound, the walk deletes what the rules match and nothing else
    low = remember(writer, "scratch", confidence="0.1", category="scratch", retention="ttl_30d")
    high = remember(writer, "confident", confidence="0.95", category="user_fact", retention="ttl_30d")
    sweep(su)
    assert alive(su, low, high) == {high if kept == "high" else low}


def test_no_auto_delete_rule_means_no_table_walk(writer, su):
    deploy(su, text=POLICY.split("  - {{id: drop-scratch")[0].format(version="3.0.0", batch_size=1, floor="0.3"))
    for i in range(50):
        remember(writer, f"fact {i}", confidence="0.1", category="scratch", retention="ttl_30d")
    before = su.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
    summary = sweep(su)
    after = su.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
    assert summary["deleted"]["auto_delete"] == 0
    # batch_size 1: a walk would have committed one transaction per row
    assert after - before < 20


def test_the_deletion_log_never_holds_the_text(writer, su):
    marker = f"the-secret-recipe-{uuid.uuid4()}"
    gone = remember(writer, marker, retention="ttl_7d")
    backdate(su, gone, "created_at", "8 days")
    sweep(su)
    assert row(su, gone) is None
    columns = [r[0] for r in su.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = 'memgov' AND table_name = 'deletion_log' ORDER BY ordinal_position")]  # fmt: skip
    assert columns == ["deletion_id", "deleted_at", "org_id", "reason", "rule_id", "policy_version", "run_id",
                       "memory_count", "memory_ids"]  # fmt: skip
    logged = su.execute("SELECT to_jsonb(d) FROM memgov.deletion_log d").fetchall()
    assert len(logged) == 1 and marker not in str(logged)
    assert logged[0][0]["memory_ids"] == [str(gone)] and logged[0][0]["deleted_at"]
    assert marker not in str(su.execute("SELECT summary FROM memgov.maintenance_runs").fetchall())


def test_reviewers_read_their_tenants_deletions_only(writer, su, memgov_dsn):
    gone = remember(writer, retention="ttl_7d")
    backdate(su, gone, "created_at", "8 days")
    sweep(su)
    with connect_as_role(memgov_dsn, "memgov_reviewer") as reviewer:
        assert logged_ids(reviewer) == [gone]
    with connect_as_role(memgov_dsn, "memgov_reviewer", "beta") as other:
        assert other.execute("SELECT count(*) FROM memgov.deletion_log").fetchone()[0] == 0
    with connect_as_role(memgov_dsn, "memgov_writer") as w, pytest.raises(errors.InsufficientPrivilege):
        w.execute("SELECT count(*) FROM memgov.deletion_log")


# -- approvals -------------------------------------------------------------------------------


def test_stale_approval_requests_expire(writer, su):
    stale = remember(writer, "HOLDME stale")
    fresh = remember(writer, "HOLDME fresh")
    kept_row = remember(writer, "an active fact")
    writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'HOLDME changed' WHERE memory_id = %s",
                   (kept_row,))  # fmt: skip
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("UPDATE memgov.approval_requests SET requested_at = now() - interval '7 days 1 minute'"
                      " WHERE memory_id = ANY(%s)", ([stale, kept_row],))  # fmt: skip
        su.execute("UPDATE memgov.approval_requests SET requested_at = now() - interval '6 days 23 hours'"
                      " WHERE memory_id = %s", (fresh,))  # fmt: skip
    summary = sweep(su)
    assert summary["expired"] == {"approvals": 2}
    requests = dict(
        su.execute(
            "SELECT memory_id, status || '/' || coalesce(decided_by, '-') FROM memgov.approval_requests"
        ).fetchall()
    )
    assert requests == {stale: "expired/memgov", kept_row: "expired/memgov", fresh: "pending/-"}
    # a held INSERT goes with its request; a held UPDATE leaves the row as it was
    assert alive(su, stale, fresh, kept_row) == {fresh, kept_row}
    assert row(su, kept_row)["fact_text"] == "an active fact"


# -- the run: summary, batches, dry run, who may run it ------------------------------------------


def test_summary_is_recorded_and_a_second_run_finds_nothing(writer, su):
    ids = [remember(writer, f"fact {i}", retention="ttl_7d") for i in range(3)]
    for memory_id in ids:
        backdate(su, memory_id, "created_at", "8 days")
    first = sweep(su)
    assert first["deleted"]["ttl"] == 3 and first["dry_run"] is False
    assert set(first) >= {"run_id", "started_at", "finished_at", "cron_history_pruned", "expired"}
    assert "cursor" not in first
    su.execute("SET synchronous_commit = remote_apply")
    second = sweep(su)
    assert second["deleted"] == {"ttl": 0, "confidence": 0, "auto_delete": 0}
    # the batches commit without waiting for the disk; the caller's session keeps its setting
    assert su.execute("SHOW synchronous_commit").fetchone()[0] == "remote_apply"
    su.execute("RESET synchronous_commit")
    runs = su.execute("SELECT status, run_by FROM memgov.maintenance_runs ORDER BY run_id").fetchall()
    assert runs == [("finished", "postgres"), ("finished", "postgres")]


def seed_expired(su: psycopg.Connection[Any], n: int, text: str = "expired", retention: str = "ttl_7d",
                 org: str = ORG) -> None:  # fmt: skip
    """n expired memories, inserted on the engine's path (as memgov_owner) in one statement."""
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "INSERT INTO memgov.long_term_memory_items"
            " (org_id, category, fact_text, source, confidence, retention_policy, created_at)"
            " SELECT %s, 'user_fact', %s || ' ' || g, 'agent_extracted', 0.9, %s, now() - interval '8 days'"
            " FROM generate_series(1, %s) g",
            (org, text, retention, n),
        )


def test_each_batch_is_its_own_transaction(su):
    deploy(su, "2.0.0", batch_size=10)
    seed_expired(su, 35)
    summary = sweep(su)
    assert summary["deleted"]["ttl"] == 35
    batches = su.execute(
        "SELECT count(DISTINCT xmin::text) FROM memgov.deletion_log WHERE run_id = %s", (summary["run_id"],)
    ).fetchone()[0]
    assert batches == 4  # 10 + 10 + 10 + 5, each committed on its own


def test_one_log_row_per_batch_and_tenant_holds_the_ids_it_deleted(su):
    deploy(su, "2.0.0", batch_size=10)
    seed_expired(su, 15)
    seed_expired(su, 8, org="beta")
    due = {r[0]: r[1] for r in su.execute(
        "SELECT memory_id, org_id FROM memgov.long_term_memory_items WHERE expires_at <= now()")}  # fmt: skip
    summary = sweep(su)
    assert summary["deleted"]["ttl"] == 23
    rows = su.execute(
        "SELECT org_id, reason, run_id, memory_count, memory_ids, xmin::text FROM memgov.deletion_log"
    ).fetchall()
    # three batches (10 + 10 + 3), each writing a row per tenant it deleted from
    assert len({r[5] for r in rows}) == 3
    assert len(rows) == len({(r[0], r[5]) for r in rows}) <= 6
    assert sum(r[3] for r in rows) == 23 and all(r[3] == len(r[4]) for r in rows)
    assert all(r[1] == "ttl" and r[2] == summary["run_id"] for r in rows)
    logged = [(memory_id, r[0]) for r in rows for memory_id in r[4]]
    assert sorted(logged, key=str) == sorted(due.items(), key=str)  # each once, under its own tenant

    # "was this memory deleted, when, why, by which run": the GIN index finds its row
    memory_id = next(iter(due))
    found = su.execute(
        "SELECT org_id, reason, run_id FROM memgov.deletion_log WHERE memory_ids @> ARRAY[%s]::uuid[]",
        (memory_id,),
    ).fetchall()
    assert found == [(due[memory_id], "ttl", summary["run_id"])]
    with su.transaction():
        su.execute("SET LOCAL enable_seqscan = off")
        explain = "EXPLAIN SELECT * FROM memgov.deletion_log WHERE memory_ids @> ARRAY[%s]::uuid[]"
        plan = "\n".join(r[0] for r in su.execute(explain, (memory_id,)))
    assert "deletion_log_memory_ids_idx" in plan


def test_no_client_role_may_write_the_deletion_log(su, memgov_dsn):
    seed_expired(su, 1)
    sweep(su)
    for role in ("memgov_writer", "memgov_reviewer", "memgov_admin"):
        for statement in (
            "INSERT INTO memgov.deletion_log (org_id, reason, memory_count, memory_ids)"
            " VALUES ('acme', 'ttl', 1, ARRAY[gen_random_uuid()])",
            "UPDATE memgov.deletion_log SET memory_ids = ARRAY[gen_random_uuid()], memory_count = 1",
            "DELETE FROM memgov.deletion_log",
        ):
            with connect_as_role(memgov_dsn, role) as conn, pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
    assert su.execute("SELECT sum(memory_count) FROM memgov.deletion_log").fetchone()[0] == 1


HOLD_POLICY = """
version: "{version}"
mode: {mode}
defaults: {{on_policy_miss: allow}}
rules:
  - {{id: legal-hold, priority: 10, match: {match},
      when: [{{field: operation_type, operator: {operator}, value: {value}}},
             {{field: metadata.legal_hold, operator: eq, value: "yes"}}],
      action: {action}, reason_codes: [LEGAL_HOLD]}}
"""


@pytest.mark.parametrize(("operator", "value", "match", "mode", "action", "holds"), [
    ("eq", "forget", "all", "enforce", "deny", True),
    ("in", "[forget, update]", "all", "strict", "deny", True),
    ("neq", "remember", "all", "enforce", "deny", True),
    ("nin", "[remember]", "all", "enforce", "deny", True),
    ("eq", "remember", "any", "enforce", "deny", True),  # any: the metadata test alone may match a forget
    ("eq", "remember", "all", "enforce", "deny", False),
    ("in", "[remember, update]", "all", "enforce", "deny", False),
    ("neq", "forget", "all", "enforce", "deny", False),
    ("nin", "[forget, get]", "all", "enforce", "deny", False),
    ("eq", "forget", "all", "monitor", "deny", False),  # monitor mode never enforces a deny
    ("eq", "forget", "all", "enforce", "quarantine", False),
    ("eq", "forget", "all", "enforce", "require_approval", False),
])  # fmt: skip
def test_which_policies_may_hold_a_memory(su, operator, value, match, mode, action, holds):
    text = HOLD_POLICY.format(version="5.0.0", mode=mode, match=match, operator=operator, value=value, action=action)
    deploy(su, text=text)
    assert su.execute("SELECT memgov.policy_may_hold('*', '5.0.0')").fetchone()[0] is holds
    with su.transaction(force_rollback=True):  # an administrator may ask too
        su.execute("SET LOCAL ROLE memgov_admin")
        assert su.execute("SELECT memgov.policy_may_hold('*', '5.0.0')").fetchone()[0] is holds
    # what the sweep relies on: a policy that may not hold never denies a forget by a rule
    held = su.execute(
        "SELECT (d).enforced AND (d).action = 'deny' AND cardinality((d).matched_rule_ids) > 0"
        "  FROM (SELECT memgov.decide(memgov.item_from_json(%s::jsonb), 'forget', 'memgov_owner') AS d) s",
        (
            '{"org_id": "acme", "category": "user_fact", "fact_text": "x", "source": "agent_extracted",'
            ' "confidence": 0.5, "metadata": {"legal_hold": "yes"}}',
        ),
    ).fetchone()[0]
    assert held is holds


def test_the_default_policy_cannot_hold(su):
    """Its deny rules decide what is stored (remember, update): its sweep decides nothing per memory."""
    default = (Path(__file__).resolve().parents[2] / "policies" / "default.yaml").read_text(encoding="utf-8")
    policy = load_policy(default)
    su.execute(compile_policy(policy, "beta").install_sql())
    assert su.execute("SELECT memgov.policy_may_hold('beta', %s)", (policy.version,)).fetchone()[0] is False


def forget_decisions_of_a_sweep(dsn: str, su: psycopg.Connection[Any]) -> int:
    """How many times a sweep (in a session of its own) asked for a forget decision."""
    (oid,) = su.execute("SELECT 'memgov.forget_denied_by_rule(memgov.long_term_memory_items)'::regprocedure::oid"
                           ).fetchone()  # fmt: skip
    su.execute("SELECT pg_stat_reset_single_function_counters(%s)", (oid,))
    with psycopg.connect(dsn, autocommit=True, options="-c track_functions=all") as conn:
        pid = conn.info.backend_pid
        conn.execute("CALL memgov.run_maintenance()")
    # a backend's function counts reach the statistics when it exits
    wait_for(lambda: not su.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0],
             "the sweep's backend to exit")  # fmt: skip
    su.execute("SELECT pg_stat_clear_snapshot()")
    calls = su.execute("SELECT calls FROM pg_stat_user_functions WHERE funcid = %s", (oid,)).fetchone()
    return 0 if calls is None else int(calls[0])


def seed_legal(su: psycopg.Connection[Any], org: str, hold: str) -> uuid.UUID:
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        return su.execute(
            "INSERT INTO memgov.long_term_memory_items"
            " (org_id, category, fact_text, source, confidence, retention_policy, created_at, metadata)"
            " VALUES (%s, 'user_fact', 'a contract', 'agent_extracted', 0.9, 'ttl_7d', now() - interval '8 days',"
            " jsonb_build_object('legal_hold', %s::text)) RETURNING memory_id",
            (org, hold),
        ).fetchone()[0]


def test_only_tenants_whose_policy_may_hold_pay_for_a_forget_decision(su, memgov_dsn):
    holding = HOLD_POLICY.format(version="6.0.0", mode="enforce", match="all", operator="eq", value="forget",
                                 action="deny")  # fmt: skip
    not_holding = holding.replace("operator: eq, value: forget", "operator: eq, value: remember")
    # the global policy cannot hold: no forget decision at all
    deploy(su, text=not_holding.replace('"6.0.0"', '"6.1.0"'))
    free = [seed_legal(su, ORG, "yes") for _ in range(3)]
    assert forget_decisions_of_a_sweep(memgov_dsn, su) == 0
    assert alive(su, *free) == set()

    # tenant acme's own policy holds: its memories are decided (and held), beta's follow the global one
    deploy(su, tenant=ORG, text=holding)
    held, released = seed_legal(su, ORG, "yes"), seed_legal(su, ORG, "no")
    others = [seed_legal(su, "beta", "yes") for _ in range(4)]
    assert forget_decisions_of_a_sweep(memgov_dsn, su) == 2
    assert alive(su, held, released, *others) == {held}

    # the reverse: the global policy holds, acme's own (now) does not
    deploy(su, text=holding.replace('"6.0.0"', '"6.2.0"'))
    deploy(su, tenant=ORG, text=not_holding.replace('"6.0.0"', '"6.3.0"'))
    acme = seed_legal(su, ORG, "yes")
    beta = [seed_legal(su, "beta", "yes"), seed_legal(su, "beta", "no")]
    assert forget_decisions_of_a_sweep(memgov_dsn, su) == 2  # beta's two; acme's policy cannot hold
    assert alive(su, held, acme, *beta) == {beta[0]}


def test_dry_run_counts_and_deletes_nothing(writer, su):
    seed_expired(su, 4)
    scratch = remember(writer, "scratch", confidence="0.1", category="scratch", retention="ttl_30d")
    low = remember(writer, "low", confidence="0.1", retention="confidence_based")
    backdate(su, low, "low_confidence_since", "31 days")
    held = remember(writer, "HOLDME")
    su.execute("UPDATE memgov.approval_requests SET requested_at = now() - interval '8 days'")
    before = su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0]
    preview = sweep(su, dry_run=True)
    assert preview["dry_run"] is True
    assert preview["deleted"] == {"ttl": 4, "confidence": 1, "auto_delete": 1}
    assert preview["expired"] == {"approvals": 1}
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == before
    assert deletions(su) == []
    real = sweep(su)
    assert real["deleted"] == preview["deleted"] and real["expired"] == preview["expired"]
    assert alive(su, scratch, low, held) == set()


def test_memgov_admin_may_run_it_and_others_may_not(su, memgov_dsn):
    su.execute("DROP ROLE IF EXISTS retention_admin_login")
    su.execute("CREATE ROLE retention_admin_login LOGIN IN ROLE memgov_admin")
    try:
        seed_expired(su, 2)
        with connect_as_role(memgov_dsn, "retention_admin_login", None) as conn:
            assert sweep(conn)["deleted"]["ttl"] == 2
        assert su.execute("SELECT run_by FROM memgov.maintenance_runs").fetchone()[0] == "retention_admin_login"
    finally:
        su.execute("DROP OWNED BY retention_admin_login")
        su.execute("DROP ROLE retention_admin_login")
    for role in ("memgov_writer", "memgov_reviewer"):
        with connect_as_role(memgov_dsn, role) as conn, pytest.raises(errors.InsufficientPrivilege):
            conn.execute("CALL memgov.run_maintenance()")


# -- one run at a time; killed and failed runs -------------------------------------------------


class Sweeper:
    """CALL memgov.run_maintenance() on its own connection, in a thread."""

    def __init__(self, dsn: str, **settings: str) -> None:
        options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        self.conn = psycopg.connect(dsn, autocommit=True, options=options)
        self.pid = self.conn.info.backend_pid
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.conn.execute("CALL memgov.run_maintenance()")
        except BaseException as exc:
            self.error = exc

    def start(self) -> Sweeper:
        self.thread.start()
        return self

    def join(self) -> None:
        join(self.thread, "the sweep")

    def close(self) -> None:
        self.conn.close()


@contextmanager
def stalled_mid_run(su: psycopg.Connection[Any], dsn: str) -> Iterator[tuple[Sweeper, int, psycopg.Connection[Any]]]:
    """A sweep (in a thread) that has committed its first batch and waits inside its second,
    its deletions there uncommitted, for as long as the stall (yielded, with the run's id)
    holds the deletion log: whatever the machine's speed, the sweep cannot run ahead.

    A gate holds the deletion log (SHARE) when the sweep starts, so the first batch waits at
    its log INSERT; the stall queues for the same lock behind it; when the gate lets go, the
    first batch commits and its release grants the stall the lock before the second batch
    asks for it. The sweep is yours to end (join, cancel, terminate) and close."""
    with psycopg.connect(dsn, autocommit=True) as gate, psycopg.connect(dsn, autocommit=True) as stall:
        gate.execute("BEGIN")
        gate.execute("LOCK TABLE memgov.deletion_log IN SHARE MODE")
        sweeper = Sweeper(dsn).start()
        wait_for(lambda: blocked_by(su, sweeper.pid, gate.info.backend_pid), "the first batch to wait")
        stall.execute("BEGIN")
        queued = threading.Thread(target=stall.execute, args=("LOCK TABLE memgov.deletion_log IN SHARE MODE",))
        queued.start()
        wait_for(lambda: blocked_by(su, stall.info.backend_pid, sweeper.pid), "the stall to queue behind it")
        gate.execute("ROLLBACK")
        join(queued, "the stall's lock")
        wait_for(lambda: blocked_by(su, sweeper.pid, stall.info.backend_pid), "the second batch to wait")
        (run_id,) = su.execute("SELECT run_id FROM memgov.maintenance_runs WHERE status = 'running'").fetchone()
        try:
            yield sweeper, int(run_id), stall
        finally:
            if stall.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                stall.execute("ROLLBACK")


def test_a_second_run_while_one_holds_the_lock_returns_at_once(su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=20)
    seed_expired(su, 1000)
    with stalled_mid_run(su, memgov_dsn) as (first, run_id, stall):
        try:
            # a second run waiting for the lease would wait for the stalled first: a bound
            # far beyond a quick return turns that into a failure instead of a hang
            with psycopg.connect(memgov_dsn, autocommit=True, options="-c statement_timeout=120s") as second:
                notices: list[str | None] = []
                second.add_notice_handler(lambda diag: notices.append(diag.sqlstate))
                second.execute("CALL memgov.run_maintenance()")
            assert notices == ["MG409"]
            assert blocked_by(su, first.pid, stall.info.backend_pid)  # returned while the first still waits
            assert su.execute("SELECT count(*) FROM memgov.maintenance_runs").fetchone()[0] == 1
            stall.execute("ROLLBACK")
            first.join()
            assert first.error is None
        finally:
            first.close()
    assert su.execute("SELECT run_id, status FROM memgov.maintenance_runs").fetchall() == [(run_id, "finished")]
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0


def test_a_killed_run_loses_nothing_and_the_next_run_finishes(writer, su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=25)
    seed_expired(su, 2000)
    fresh = [remember(writer, f"fresh {i}", retention="ttl_7d") for i in range(5)]
    expired_ids = {r[0] for r in su.execute(
        "SELECT memory_id FROM memgov.long_term_memory_items WHERE expires_at <= now()")}  # fmt: skip
    with stalled_mid_run(su, memgov_dsn) as (killed, run_id, stall):
        try:
            assert su.execute("SELECT pg_terminate_backend(%s)", (killed.pid,)).fetchone()[0]
            stall.execute("ROLLBACK")
            killed.join()
            assert isinstance(killed.error, psycopg.OperationalError)
        finally:
            killed.close()

    # what the killed run committed is deleted and logged, its last batch rolled back whole
    status, logged_by_summary = su.execute(
        "SELECT status, (summary #>> '{deleted,ttl}')::int FROM memgov.maintenance_runs WHERE run_id = %s", (run_id,)
    ).fetchone()
    assert status == "running"  # nobody has marked it yet
    remaining = {r[0] for r in su.execute("SELECT memory_id FROM memgov.long_term_memory_items")}
    logged = logged_ids(su, "run_id = %s", (run_id,))
    assert 0 < len(logged) == logged_by_summary < len(expired_ids)
    assert set(logged) | (remaining & expired_ids) == expired_ids
    assert not set(logged) & remaining

    # the next run finishes the work and marks the killed one
    summary = sweep(su)
    assert summary["deleted"]["ttl"] == len(expired_ids) - len(logged)
    assert su.execute(
        "SELECT status, finished_at IS NOT NULL FROM memgov.maintenance_runs WHERE run_id = %s", (run_id,)
    ).fetchone() == ("interrupted", True)
    assert alive(su, *expired_ids) == set()
    assert alive(su, *fresh) == set(fresh)
    all_logged = logged_ids(su)
    assert sorted(all_logged, key=str) == sorted(expired_ids, key=str)  # each exactly once


def test_a_failed_run_releases_the_lock_of_its_session(su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=20)
    seed_expired(su, 1000)
    with stalled_mid_run(su, memgov_dsn) as (failed, _, stall):
        try:
            su.execute("SELECT pg_cancel_backend(%s)", (failed.pid,))
            failed.join()
            stall.execute("ROLLBACK")
            assert isinstance(failed.error, errors.QueryCanceled)
            # its session lives on, and the next run (from another session) is not locked out
            assert failed.conn.execute("SELECT 1").fetchone() == (1,)
            summary = sweep(su)
            assert summary["deleted"]["ttl"] > 0
            assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0
            assert su.execute("SELECT array_agg(status ORDER BY run_id) FROM memgov.maintenance_runs"
                                 ).fetchone()[0] == ["interrupted", "finished"]  # fmt: skip
        finally:
            failed.close()


def pauses(watcher: psycopg.Connection[Any], sweeper: Sweeper) -> int:
    """Watch the sweep until it ends: how often it was seen asleep between batches."""
    slept = 0
    deadline = time.monotonic() + DEADLINE
    while sweeper.thread.is_alive():
        assert time.monotonic() < deadline, "the sweep did not end"
        row = watcher.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (sweeper.pid,)).fetchone()
        slept += row is not None and row[0] == "PgSleep"
        time.sleep(0.01)
    return slept


def test_the_sweep_yields_while_other_sessions_are_busy(su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=10)
    seed_expired(su, 300)
    with psycopg.connect(memgov_dsn, autocommit=True) as busy:
        busy.execute("BEGIN")
        busy.execute("SELECT 1")  # idle in transaction: a session at work
        # each pause is as long as it may be (1 s): the watcher cannot miss the first
        sweeper = Sweeper(memgov_dsn, **{"memgov.maintenance_yield": "1000"}).start()
        try:
            wait_for(lambda: su.execute(
                "SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = %s", (sweeper.pid,)
            ).fetchone()[0], "the sweep to pause between batches")  # fmt: skip
            busy.execute("ROLLBACK")
            sweeper.join()
            assert sweeper.error is None
        finally:
            sweeper.close()
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0


def test_the_sweep_runs_at_full_speed_when_nobody_else_is_busy(su, memgov_server, memgov_dsn):
    """Watched from another database, whose sessions the sweep does not count: were it to
    pause at all, it would sleep a full second after each of its ten batches."""
    deploy(su, "2.0.0", batch_size=10)
    seed_expired(su, 100)
    with psycopg.connect(memgov_server.dsn("postgres"), autocommit=True) as watcher:
        sweeper = Sweeper(memgov_dsn, **{"memgov.maintenance_yield": "1000"}).start()
        try:
            slept = pauses(watcher, sweeper)
            sweeper.join()
            assert sweeper.error is None
        finally:
            sweeper.close()
    assert slept == 0
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0


# -- pg_cron history ---------------------------------------------------------------------------


def test_prunes_its_own_pg_cron_history_when_it_can_see_it(su, memgov_dsn):
    """pg_cron lives in the cron database only; a stand-in `cron` schema here shows which rows go."""
    database = su.execute("SELECT current_database()").fetchone()[0]
    su.execute("""
        CREATE SCHEMA cron;
        CREATE TABLE cron.job (jobid bigint, jobname text, database text, command text, username text);
        CREATE TABLE cron.job_run_details (runid bigint, jobid bigint, status text, end_time timestamptz);
    """)
    try:
        su.execute(
            "INSERT INTO cron.job VALUES (1, 'memgov-maintenance:' || %(db)s, %(db)s, 'CALL memgov.run_maintenance()',"
            " 'postgres'), (2, 'other-job', %(db)s, 'VACUUM', 'postgres'),"
            " (3, 'memgov-maintenance:elsewhere', 'elsewhere', 'CALL memgov.run_maintenance()', 'postgres')",
            {"db": database},
        )
        su.execute(
            "INSERT INTO cron.job_run_details VALUES (1, 1, 'succeeded', now() - interval '8 days'),"
            " (2, 1, 'succeeded', now() - interval '1 day'), (3, 2, 'succeeded', now() - interval '30 days'),"
            " (4, 3, 'succeeded', now() - interval '30 days')"
        )
        # a memgov_admin that may not read schema cron: nothing pruned, no error
        su.execute("DROP ROLE IF EXISTS cron_blind_admin")
        su.execute("CREATE ROLE cron_blind_admin LOGIN IN ROLE memgov_admin")
        with connect_as_role(memgov_dsn, "cron_blind_admin", None) as blind:
            assert sweep(blind)["cron_history_pruned"] == 0
        assert sweep(su)["cron_history_pruned"] == 1
        assert [r[0] for r in su.execute("SELECT runid FROM cron.job_run_details ORDER BY runid")] == [2, 3, 4]
    finally:
        su.execute("DROP SCHEMA cron CASCADE")
        su.execute("DROP OWNED BY cron_blind_admin")
        su.execute("DROP ROLE IF EXISTS cron_blind_admin")


# -- static check -------------------------------------------------------------------------------


def test_feedback_and_retention_code_passes_plpgsql_check(db_conn, plpgsql_check):
    routines = [
        "memgov.memory_for_feedback(uuid)",
        "memgov.record_feedback(memgov.long_term_memory_items, text, numeric, text)",
        "memgov.confirm(uuid)",
        "memgov.reject(uuid)",
        "memgov.edit(uuid, text)",
        "memgov.forget(uuid)",
        "memgov.forget_filter(jsonb)",
        "memgov.forget_where(jsonb, boolean)",
        "memgov.sweep_batch(bigint, text, integer)",
        "memgov.start_maintenance(boolean)",
        "memgov.finish_maintenance(bigint, jsonb, bigint)",
        "memgov.run_maintenance(boolean)",
        "memgov.apply_retention(uuid)",
    ]
    for routine in routines:
        problems = db_conn.execute(
            "SELECT level, message, lineno FROM plpgsql_check_function_tb(%s::regprocedure) WHERE level = 'error'",
            (routine,),
        ).fetchall()
        assert problems == [], f"{routine}: {problems}"
