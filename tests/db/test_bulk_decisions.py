"""A bulk statement logs each of its distinct decisions once, and its rows name that row:
as real logins, with the attacks a client could try on the statement's state."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from tests.attack_helpers import ORG, deploy_policy, memgov_tables, refused, unchanged
from tests.clean_slate import fresh

# Two ways to store a row (a preference by its rule, anything else by on_policy_miss), a
# hold for uncertain preferences, a denial of secrets.
POLICY = """
version: "{version}"
description: {description}
mode: enforce
defaults: {{on_policy_miss: allow}}
rules:
  - id: block-secrets
    priority: 10
    when: [{{field: content.contains_secret, operator: eq, value: true}}]
    action: deny
    reason_codes: [SECRET_DETECTED]
  - id: hold-uncertain-preferences
    priority: 20
    category: preference
    condition: {{confidence: {{lte: 0.7}}}}
    action: require_approval
  - id: store-preferences
    priority: 30
    category: preference
    action: allow
"""

BULK = """
INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)
SELECT 'acme', (ARRAY['preference', 'user_fact'])[1 + i %% 2], 'fact number ' || i || ' of the bulk',
       'agent_extracted', 0.9
  FROM generate_series(1, %(n)s) AS i
RETURNING memory_id, status
"""


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins) -> psycopg.Connection[Any]:
    """The superuser: empty tables, this module's policy for every tenant."""
    fresh(db_conn, slate)
    return db_conn


def slate(conn: psycopg.Connection[Any]) -> None:
    if "tenant_grants" in memgov_tables(conn):
        with conn.transaction():
            conn.execute("SET LOCAL ROLE memgov_owner")
            conn.execute("DELETE FROM memgov.tenant_grants")
    deploy_policy(conn, text=POLICY, description="bulk decisions")


def log_rows(su: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    cur = su.execute(
        "SELECT decision_id, operation, memory_id, memory_ids, memory_count, action, matched_rule_ids, actor, login"
        "  FROM memgov.decision_log ORDER BY decision_id"
    )
    names = [c.name for c in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def named(su: psycopg.Connection[Any]) -> dict[uuid.UUID, int]:
    return dict(su.execute("SELECT memory_id, decision_id FROM memgov.long_term_memory_items").fetchall())


def test_a_bulk_insert_logs_each_distinct_decision_once_and_its_rows_name_it(su, writer, logins):
    rows = writer.execute(BULK, {"n": 40}).fetchall()
    assert len(rows) == 40 and {status for _, status in rows} == {"active"}
    log = log_rows(su)
    assert len(log) == 2, log
    for entry in log:
        assert entry["memory_id"] is None and entry["memory_count"] == 20 == len(entry["memory_ids"])
        assert (entry["operation"], entry["action"], entry["login"]) == ("remember", "allow", logins.writer)
    # every memory names the row that lists it, and nothing else lists it
    listed = {m: e["decision_id"] for e in log for m in e["memory_ids"]}
    assert listed == named(su)
    # a memory's decisions: WHERE memory_id = $1 OR memory_ids @> ARRAY[$1]
    some = rows[0][0]
    found = su.execute(
        "SELECT decision_id FROM memgov.decision_log WHERE memory_id = %s OR memory_ids @> ARRAY[%s::uuid]",
        (some, some),
    ).fetchall()
    assert found == [(named(su)[some],)]


def test_a_single_row_keeps_a_row_of_its_own_and_a_bulk_statements_held_rows_too(su, writer):
    writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES ('acme', 'user_fact', 'likes green tea', 'agent_extracted', 0.9)"
    )
    # three stored, two held (low-confidence preferences): each held row has its request and its row
    writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) VALUES"
        " ('acme', 'user_fact', 'one', 'agent_extracted', 0.9),"
        " ('acme', 'preference', 'two', 'agent_extracted', 0.6),"
        " ('acme', 'user_fact', 'three', 'agent_extracted', 0.9),"
        " ('acme', 'preference', 'four', 'agent_extracted', 0.5),"
        " ('acme', 'user_fact', 'five', 'agent_extracted', 0.9)"
    )
    log = log_rows(su)
    single = [e for e in log if e["memory_id"] is not None]
    shared = [e for e in log if e["memory_ids"] is not None]
    assert [e["action"] for e in single] == ["allow", "require_approval", "require_approval"]
    assert len(shared) == 1 and shared[0]["memory_count"] == 3
    requests = su.execute("SELECT decision_id FROM memgov.approval_requests ORDER BY decision_id").fetchall()
    assert [r[0] for r in requests] == [e["decision_id"] for e in single if e["action"] == "require_approval"]


def test_statements_apart_keep_their_rows_apart(su, writer):
    with writer.transaction():
        for text in ("first fact", "second fact"):
            writer.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
                " VALUES ('acme', 'user_fact', %s, 'agent_extracted', 0.9)",
                (text,),
            )
    assert [e["memory_count"] for e in log_rows(su)] == [None, None]


def test_a_bulk_update_shares_its_decisions_too(su, writer):
    writer.execute(BULK, {"n": 10})
    before = len(log_rows(su))
    writer.execute("UPDATE memgov.long_term_memory_items SET confidence = 0.95 WHERE category = 'user_fact'")
    updates = [e for e in log_rows(su)[before:]]
    assert [(e["operation"], e["memory_count"]) for e in updates] == [("update", 5)]
    assert set(updates[0]["memory_ids"]) == {
        m for (m,) in su.execute("SELECT memory_id FROM memgov.long_term_memory_items WHERE category = 'user_fact'")
    }


def test_the_sealed_log_verifies_with_shared_decisions(su, writer):
    writer.execute(BULK, {"n": 30})
    su.execute("CALL memgov.run_maintenance()")
    report = su.execute("SELECT memgov.verify_decision_log()").fetchone()[0]
    assert report["ok"] and report["unsealed_rows"] == 0 and report["rows"] == 2, report


# -- what a client may try on the statement's state ----------------------------------------


def test_a_forged_batch_names_no_other_decision(su, writer, reviewer):
    """A writer that sets memgov.batch to point at another decision (the held row's, logged in
    this transaction) gets log rows of its own: no memory names a decision not its own."""
    with writer.transaction():
        held = writer.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
            " VALUES ('acme', 'preference', 'held one', 'agent_extracted', 0.6) RETURNING decision_id"
        ).fetchone()[0]
        stamp = writer.execute("SELECT statement_timestamp()::text").fetchone()[0]
        key = f"remember\x1facme\x1f{writer.info.user}\x1fallow"
        for forged in (
            f"{stamp}\x1c{held}",  # the first row's part, naming the held decision
            f"{stamp}\x1c{held}\x1e{key}\x1d{held:020d}",  # an entry without the engine's seal
        ):
            writer.execute("SELECT set_config('memgov.batch', %s, true)", (forged,))
            writer.execute(BULK.replace("RETURNING memory_id, status", ""), {"n": 6})
    log = {e["decision_id"]: e for e in log_rows(su)}
    for memory_id, decision_id in named(su).items():
        entry = log[decision_id]
        assert memory_id in (entry["memory_ids"] or [entry["memory_id"]])
        if decision_id == held:
            assert entry["action"] == "require_approval" and entry["memory_id"] == memory_id


def test_setting_the_batch_inside_the_statement_never_mislabels_a_memory(su, writer):
    """set_config on memgov.batch from the statement's own SELECT list, row by row: each memory
    still names a decision with its own decision's rule, and the log stays verifiable."""
    writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " SELECT 'acme', (ARRAY['preference', 'user_fact'])[1 + i % 2], 'tampered ' || i"
        "        || left(set_config('memgov.batch', CASE WHEN i % 3 = 0 THEN '' ELSE"
        "           current_setting('memgov.batch', true) || E'\\x1eforged\\x1d00000000000000000001' END, true), 0),"
        "        'agent_extracted', 0.9"
        "   FROM generate_series(1, 24) AS i"
    )
    rules = {"preference": ["store-preferences"], "user_fact": []}
    rows = su.execute(
        "SELECT m.category, d.matched_rule_ids, d.memory_id = m.memory_id OR d.memory_ids @> ARRAY[m.memory_id]"
        "  FROM memgov.long_term_memory_items m JOIN memgov.decision_log d USING (org_id, decision_id)"
    ).fetchall()
    assert len(rows) == 24
    for category, rule_ids, listed in rows:
        assert rule_ids == rules.get(category, rule_ids), (category, rule_ids)
        assert listed is not False
    su.execute("CALL memgov.run_maintenance()")
    assert su.execute("SELECT memgov.verify_decision_log()").fetchone()[0]["ok"]


def test_a_direct_call_of_list_shared_lists_nothing_untrue(su, writer, login, logins):
    """The statement's end runs as the client, so a writer may call memgov.list_shared itself:
    it cannot attach a memory to a decision that memory does not name, nor touch another
    transaction's or tenant's log row."""
    mine = writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES ('acme', 'user_fact', 'a fact of mine', 'agent_extracted', 0.9) RETURNING memory_id, decision_id"
    ).fetchone()
    other = (
        login(logins.gwriter, "globex")
        .execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
            " VALUES ('globex', 'user_fact', 'a fact of theirs', 'agent_extracted', 0.9)"
            " RETURNING memory_id, decision_id"
        )
        .fetchone()
    )
    call = "SELECT memgov.list_shared(ARRAY[ROW(%s, %s, %s::uuid[])::memgov.shared_decision])"
    attempts = [
        ("acme", mine[1], [mine[0], uuid.uuid4()]),  # a memory that does not exist
        ("acme", mine[1], [mine[0], other[0]]),  # another tenant's memory
        ("globex", other[1], [other[0], mine[0]]),  # another tenant's decision
    ]
    for org, decision_id, memory_ids in attempts:
        with unchanged(su, "list_shared by hand"), refused(su, "0A000"):
            with writer.transaction():
                writer.execute(call, (org, decision_id, memory_ids))
    # in the transaction of its own write, too
    with unchanged(su, "list_shared in the write's transaction"), refused(su, "0A000"):
        with writer.transaction():
            fresh = writer.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
                " VALUES ('acme', 'user_fact', 'a fresh fact', 'agent_extracted', 0.9) RETURNING memory_id, decision_id"
            ).fetchone()
            writer.execute(call, ("acme", fresh[1], [fresh[0], mine[0]]))


def test_a_guessed_engine_mark_writes_nothing_ungoverned(su, writer):
    """memgov's own writes are marked with a hash under the session's secret: a writer that
    sets the mark to what it can see or guess is governed as before."""
    key_guesses = ["on", "engine", "true", "0", "1", str(writer.execute("SELECT pg_current_xact_id()").fetchone()[0])]
    for guess, keyed in [(g, k) for g in key_guesses for k in ("", "on")]:
        with unchanged(su, f"engine_write = {guess!r}"), refused(su, "MG403"):
            with writer.transaction():
                writer.execute("SELECT set_config('memgov.session_keyed', %s, true)", (keyed,))
                writer.execute("SELECT set_config('memgov.engine_write', %s, true)", (guess,))
                writer.execute(
                    "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
                    " VALUES ('acme', 'user_fact', 'password: hunter2hunter2', 'agent_extracted', 0.9)"
                )


def test_no_memgov_function_leaves_its_engine_mark_set(su, writer, reviewer):
    held = writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES ('acme', 'preference', 'likes tea', 'agent_extracted', 0.6) RETURNING memory_id"
    ).fetchone()[0]
    stored = writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES ('acme', 'user_fact', 'likes green tea', 'agent_extracted', 0.9) RETURNING memory_id"
    ).fetchone()[0]
    with reviewer.transaction():
        for call in (
            "SELECT memgov.confirm(%s)",
            "SELECT memgov.reject(%s)",
            "SELECT memgov.edit(%s, 'likes black tea')",
        ):
            reviewer.execute(call, (stored,))
            assert reviewer.execute("SELECT current_setting('memgov.engine_write', true)").fetchone()[0] in (None, "")
        reviewer.execute("SELECT memgov.confirm(%s)", (held,))  # the approval of a pending memory
        assert reviewer.execute("SELECT current_setting('memgov.engine_write', true)").fetchone()[0] in (None, "")


@pytest.mark.parametrize("who", ["writer", "reviewer", "admin", "superuser"])
def test_a_direct_delete_is_refused_for_every_role(su, login, logins, who):
    su.execute(
        "SET ROLE memgov_owner; INSERT INTO memgov.long_term_memory_items"
        " (org_id, category, fact_text, source, confidence) VALUES ('acme', 'user_fact', 'x', 'agent_extracted', 0.9);"
        " RESET ROLE"
    )
    conn = su if who == "superuser" else login(getattr(logins, who))
    # no client role holds the DELETE privilege at all; a superuser meets the trigger
    with unchanged(su, f"DELETE as {who}"), refused(su, "42501", "MG403") as info:
        conn.execute("DELETE FROM memgov.long_term_memory_items WHERE org_id = %s", (ORG,))
    if who == "superuser":
        assert info.value.sqlstate == "MG403" and "memgov.forget" in (info.value.diag.message_hint or "")
