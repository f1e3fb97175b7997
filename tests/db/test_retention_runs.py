"""Retention runs (docs/retention.md): approvals expiring, the run's summary, its batches and
deletion log, legal hold, dry run, and who may run it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests import retention_helpers
from tests.attack_helpers import connect_as_role
from tests.retention_helpers import ORG, alive, backdate, deletions, deploy, remember, row, seed_expired, sweep
from tests.waiting import wait_for

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
su = retention_helpers.su
writer = retention_helpers.writer


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
