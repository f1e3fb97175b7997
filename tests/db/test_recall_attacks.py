"""Governed reads (docs/recall.md): the tenant's text search configuration, and the attacks
found by review, each a way around the read test.
"""

from __future__ import annotations

import json
import threading
import uuid
from decimal import Decimal

import psycopg
import pytest

from tests import recall_helpers
from tests.attack_helpers import (
    ORG,
    OTHER,
    POLICY,
    deploy_policy,
    insert,
    item,
    refused,
    seed,
    unchanged,
)
from tests.recall_helpers import hidden_rows, last_log, notices, search, texts, visible
from tests.waiting import blocked_by, join, wait_for

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
governed = recall_helpers.governed


# -- the tenant's text search configuration ----------------------------------------------------


def test_a_tenants_text_search_configuration_stems_and_indexes_anew(su, writer):
    running = seed(su, fact_text="went running in the park")
    before = su.execute("SELECT updated_at FROM memgov.long_term_memory_items WHERE memory_id = %s", (running,))
    assert search(writer, text="runs") == []  # simple: no stemming
    deploy_policy(su, "3.0.0", POLICY + "search: {{text_config: english}}\n")
    # the tenant's memories were indexed anew in the deploy, and did not change for it
    row = su.execute(
        "SELECT search_config::text, updated_at FROM memgov.long_term_memory_items WHERE memory_id = %s", (running,)
    ).fetchone()
    assert row == ("english", before.fetchone()[0])
    assert [r["memory_id"] for r in search(writer, text="runs")] == [running]
    insert(writer, item("allowed", fact_text="likes swimming"))
    assert texts(search(writer, text="swim")) == ["likes swimming"]
    # globex's own policy names no configuration: simple, as before
    seed(su, org=OTHER, fact_text="went running")
    assert su.execute(
        "SELECT search_config::text FROM memgov.long_term_memory_items WHERE org_id = %s", (OTHER,)
    ).fetchone() == ("simple",)


def test_an_unknown_text_search_configuration_is_refused_at_deploy(su):
    seed(su, fact_text="went running in the park")
    with refused(su, "42704") as info:
        deploy_policy(su, "3.0.0", POLICY + "search: {{text_config: klingon}}\n")
    assert "klingon" in str(info.value)


def test_a_held_read_expires_with_approval_ttl_and_deletes_nothing(governed, writer):
    su = governed
    kept = seed(su, fact_text="likes green tea")
    assert search(writer, text="password: hunter2hunter2") == []  # held: hold-secret-searches
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("UPDATE memgov.approval_requests SET requested_at = now() - interval '8 days'")
    su.execute("CALL memgov.run_maintenance()")
    assert su.execute("SELECT operation, status FROM memgov.approval_requests").fetchall() == [("search", "expired")]
    assert su.execute("SELECT memory_id FROM memgov.long_term_memory_items").fetchall() == [(kept,)]


# -- attacks found by review: each was a way around the read test ------------------------------


def test_a_mark_made_in_another_tenant_opens_nothing_here(governed, writer):
    """The write trigger's mark names the tenant: writing a hidden row's memory_id into
    another tenant, then reading in this one, shows nothing."""
    sensitive, pending = hidden_rows(governed, writer)
    for memory_id in (sensitive, pending):
        with unchanged(governed, "a mark made in tenant zzz"):
            writer.execute("BEGIN")
            try:
                writer.execute("SET LOCAL memgov.org_id = 'zzz'")
                insert(writer, item("allowed", org="zzz", memory_id=memory_id))
                writer.execute("SET LOCAL memgov.org_id = 'acme'")
                shown = repr(writer.execute("SELECT * FROM memgov.long_term_memory_items").fetchall())
                updated = writer.execute(
                    "UPDATE memgov.long_term_memory_items SET is_sensitive = false WHERE memory_id = %s"
                    " RETURNING fact_text", (memory_id,)).fetchall()  # fmt: skip
            finally:
                writer.execute("ROLLBACK")
        assert "ulcer" not in shown and "likes tea" not in shown and updated == []


SWITCHES_MID_STATEMENT = {
    "target_list": ["SELECT set_config('memgov.org_id', %(to)s, false), * FROM memgov.long_term_memory_items"],
    "cursor": [
        "DECLARE c CURSOR FOR SELECT * FROM memgov.long_term_memory_items",
        "FETCH 1 FROM c",
        "SELECT set_config('memgov.org_id', %(to)s, true)",
        "FETCH ALL FROM c",
    ],
    "lateral_update": [
        "UPDATE memgov.long_term_memory_items SET is_sensitive = false FROM (VALUES (1), (2)) v(i)"
        " CROSS JOIN LATERAL (SELECT set_config('memgov.org_id', CASE WHEN v.i = 1 THEN 'acme' ELSE %(to)s END,"
        " false)) s(x) WHERE s.x IS NOT NULL RETURNING *"
    ],
}


@pytest.mark.parametrize("to", ["globex", ""])
@pytest.mark.parametrize("attack", sorted(SWITCHES_MID_STATEMENT))
def test_switching_the_tenant_during_a_statement_shows_nothing_more(governed, writer, attack, to):
    """globex's own policy does not govern reads: a statement that switches to it (or to no
    tenant) while it runs still reads acme's rows by acme's rules."""
    seed(governed, fact_text="likes green tea")  # a visible row, scanned before the switch
    hidden_rows(governed, writer)
    writer.execute("BEGIN")
    try:
        for statement in SWITCHES_MID_STATEMENT[attack]:
            cur = writer.execute(statement, {"to": to} if "%(to)s" in statement else None)
        shown = repr(cur.fetchall())
    finally:
        writer.execute("ROLLBACK")
        writer.execute("SET memgov.org_id = 'acme'")
    assert "ulcer" not in shown and "likes tea" not in shown, shown[:300]


def test_an_agent_is_not_told_how_many_rows_a_search_withheld(governed, writer, reviewer):
    hidden_rows(governed, writer)
    for conn, told in ((writer, None), (reviewer, 1)):
        conn.execute("BEGIN")
        assert search(conn, text="ulcer") == []
        outcome = json.loads(conn.execute("SELECT current_setting('memgov.last_recall')").fetchone()[0])
        conn.execute("COMMIT")
        assert (outcome["returned"], outcome["withheld"]) == (0, told)
    assert last_log(governed)["withheld"] == 1  # the log has the count, for those who read it


def test_where_reads_are_not_governed_an_agent_is_told_nothing_was_withheld(su, writer):
    """No get rule can withhold a row: the count is 0 for everyone, and telling it tells nothing."""
    seed(su, fact_text="likes green tea")
    writer.execute("BEGIN")
    assert texts(search(writer, text="tea")) == ["likes green tea"]
    outcome = json.loads(writer.execute("SELECT current_setting('memgov.last_recall')").fetchone()[0])
    writer.execute("COMMIT")
    assert (outcome["returned"], outcome["withheld"], outcome["reason_codes"]) == (1, 0, ["READS_NOT_GOVERNED"])


def test_a_whole_limit_written_as_a_decimal_is_a_limit(su, writer):
    for i in range(3):
        seed(su, fact_text=f"tea {i}")
    assert len(search(writer, text="tea", limit=2.0)) == 2


def test_a_bound_login_is_refused_a_tenant_it_is_not_granted_before_any_decision(su, login, logins):
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.bound, ORG))
    conn = login(logins.bound, OTHER)
    got = notices(conn)
    with refused(su, "42501"):
        insert(conn, item("held", org=OTHER))
    with refused(su, "42501"):  # the setting switched inside the statement itself
        conn.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
            " SELECT %s, 'user_fact', 'likes tea', 'agent_extracted', 0.5"
            " FROM (SELECT set_config('memgov.org_id', %s, false)) s", (OTHER, OTHER))  # fmt: skip
    assert got == []  # no decision was announced either


def test_a_writer_sees_its_pending_row_until_its_transaction_ends(su, writer):
    writer.execute("BEGIN")
    row = insert(writer, item("held")).fetchone()
    assert row is not None and row[1] == "pending_approval"
    assert visible(writer) == {"likes tea"}
    writer.execute("COMMIT")
    assert visible(writer) == set()


def test_a_mark_from_an_upsert_that_lost_a_race_opens_nothing(governed, writer, memgov_dsn):
    """An INSERT ... ON CONFLICT DO NOTHING naming the id of another session's uncommitted
    row is marked before it waits and loses; the row that session commits is another
    row version, and stays hidden."""
    memory_id = uuid.uuid4()
    shown: list[str] = []

    def attacker() -> None:
        writer.execute("BEGIN")
        try:
            writer.execute(
                "INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence)"
                " VALUES (%s, 'acme', 'user_fact', 'likes green tea', 'agent_extracted', 0.9) ON CONFLICT DO NOTHING",
                (memory_id,),
            )
            shown.append(repr(writer.execute("SELECT * FROM memgov.long_term_memory_items").fetchall()))
        finally:
            writer.execute("ROLLBACK")

    with psycopg.connect(memgov_dsn) as victim:
        victim.execute("SET ROLE memgov_owner")
        insert(victim, item("allowed", memory_id=memory_id, fact_text="walrus medical notes", is_sensitive=True))
        thread = threading.Thread(target=attacker)
        thread.start()
        wait_for(lambda: blocked_by(governed, writer.info.backend_pid, victim.info.backend_pid),
                 "the attacker's INSERT to wait on the uncommitted row")  # fmt: skip
        victim.commit()
        join(thread, "the attacker")
    assert shown and "walrus" not in shown[0], shown


def test_a_mark_kept_from_a_rolled_back_savepoint_opens_nothing(governed, writer):
    memory_id = uuid.uuid4()
    writer.execute("BEGIN")
    try:
        writer.execute("SAVEPOINT s")
        insert(writer, item("allowed", memory_id=memory_id))
        token = writer.execute("SELECT current_setting('memgov.written')").fetchone()[0]
        writer.execute("ROLLBACK TO SAVEPOINT s")
        seed(governed, memory_id=memory_id, fact_text="otter medical notes", is_sensitive=True)  # committed apart
        writer.execute("SELECT set_config('memgov.written', %s, true)", (token,))
        shown = repr(writer.execute("SELECT * FROM memgov.long_term_memory_items").fetchall())
    finally:
        writer.execute("ROLLBACK")
    assert "otter" not in shown


@pytest.mark.parametrize("word", ["zebra", "giraffe"])
def test_what_a_search_returns_tells_nothing_of_withheld_rows(governed, writer, word):
    """Withheld rows of the writer's own ahead of a visible canary: the search still finds
    the canary, whether or not another hidden row holds the word."""
    seed(governed, fact_text="zebra diagnosis", is_sensitive=True)
    for i in range(12):
        insert(writer, item("allowed", fact_text=f"marker own hidden {i}", is_sensitive=True, confidence=Decimal("1")))
    insert(writer, item("allowed", fact_text="marker canary", confidence=Decimal("0.75")))
    assert texts(search(writer, text=f"marker or {word}", limit=1)) == ["marker canary"]
