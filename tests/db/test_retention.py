"""Retention (docs/retention.md): the trigger's bookkeeping, and CALL memgov.run_maintenance()
on both sides of every boundary. The run itself (summary, batches, dry run, legal hold) is in
test_retention_runs.py, one run at a time and killed runs in test_retention_locking.py.

Time is moved by back-dating rows as a superuser through memgov_owner (the
engine's own path), never by a setting a writer could use.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from psycopg import errors

from tests import retention_helpers
from tests.attack_helpers import connect_as_role
from tests.retention_helpers import ORG, POLICY, alive, backdate, deletions, deploy, logged_ids, remember, row, sweep

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
su = retention_helpers.su
writer = retention_helpers.writer


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
