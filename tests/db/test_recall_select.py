"""Reading around the policy (docs/recall.md#a-plain-select): row level security keeps a direct
SELECT, COPY, an upsert and every other path to what the tenant's get rules allow.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests import recall_helpers
from tests.attack_helpers import (
    ORG,
    OTHER,
    refused,
    seed,
    unchanged,
)
from tests.recall_helpers import hidden_rows, last_log, search, visible

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
governed = recall_helpers.governed


# -- attacks: reading around the policy ---------------------------------------------------------
#
# Each attack runs as a real login and must show nothing it may not read and change nothing
# (tables, log, queues); a recall that is answered writes its own log row, so those are
# checked by what they return.


def copied(conn: psycopg.Connection[Any], statement: str) -> str:
    """What a COPY ... TO STDOUT sends the client."""
    with conn.cursor() as cur, cur.copy(statement) as copy:
        return b"".join(bytes(chunk) for chunk in copy).decode()


HIDDEN = "fact_text LIKE '%ulcer%' OR status = 'pending_approval'"


# every way a client reads the table's rows: statements run in one transaction (rolled
# back), the rows of the last one are what the path shows; COPY and get are read apart
PATHS: dict[str, list[str]] = {
    "select": ["SELECT * FROM memgov.long_term_memory_items"],
    "select_where": [f"SELECT fact_text FROM memgov.long_term_memory_items WHERE {HIDDEN}"],
    "temp_view": ["CREATE TEMP VIEW peek AS SELECT * FROM memgov.long_term_memory_items", "SELECT * FROM peek"],
    "copy_table": ["COPY memgov.long_term_memory_items TO STDOUT"],
    "copy_query": ["COPY (SELECT * FROM memgov.long_term_memory_items) TO STDOUT"],
    "update_returning": [
        f"UPDATE memgov.long_term_memory_items SET confidence = confidence WHERE {HIDDEN} RETURNING *"
    ],
    # an UPDATE without a WHERE clause reaches rows unread: it must not reach these
    "blind_update_then_select": [
        "UPDATE memgov.long_term_memory_items SET confidence = 0.61",
        "SELECT * FROM memgov.long_term_memory_items",
    ],
    "writable_cte": [
        "WITH u AS (UPDATE memgov.long_term_memory_items SET confidence = 0.61 RETURNING memory_id)"
        " SELECT m.fact_text FROM memgov.long_term_memory_items m JOIN u USING (memory_id)"
    ],
    # an error that only a hidden row could raise: row level security filters before it
    "error_oracle": [
        "SELECT count(*) FROM memgov.long_term_memory_items"
        f" WHERE CASE WHEN {HIDDEN} THEN 1 / (length(fact_text) - length(fact_text)) ELSE 1 END = 1"
    ],
    "statistics": [
        "SELECT attname, most_common_vals::text, histogram_bounds::text FROM pg_stats"
        " WHERE schemaname = 'memgov' AND tablename = 'long_term_memory_items'"
    ],
    "get": ["SELECT memory_id FROM memgov.long_term_memory_items"],
}


def read_through(conn: psycopg.Connection[Any], path: str) -> str:
    """What ``path`` shows the client, as text."""
    statements = PATHS[path]
    if path.startswith("copy"):
        return copied(conn, statements[0])
    if path == "get":  # every id the client can find, through memgov.get
        ids = [r[0] for r in conn.execute(statements[0]).fetchall()]
        return repr([conn.execute("SELECT * FROM memgov.get(%s)", (i,)).fetchall() for i in ids])
    return in_transaction(conn, statements)


def in_transaction(conn: psycopg.Connection[Any], statements: list[str]) -> str:
    """The last statement's rows, the statements run in one transaction, rolled back."""
    conn.execute("BEGIN")
    try:
        for statement in statements:
            cur = conn.execute(statement)
        return repr(cur.fetchall())
    finally:
        conn.execute("ROLLBACK")


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_pending_or_withheld_row_is_read_through_no_path(governed, writer, path):
    su = governed
    seed(su, org=OTHER, fact_text="globex ulcer notes")  # another tenant's: never read either
    hidden_rows(su, writer)
    with unchanged(su, path):
        shown = read_through(writer, path)
    for secret in ("ulcer", "likes tea", "pending_approval"):
        assert secret not in shown, f"{path} showed {secret!r}: {shown[:300]}"


@pytest.mark.parametrize("path", ["select", "copy_table", "temp_view", "get"])
def test_without_read_rules_only_pending_rows_are_hidden(su, writer, path):
    sensitive, _ = hidden_rows(su, writer)
    shown = read_through(writer, path)
    assert "ulcer" in shown and "likes tea" not in shown
    assert str(sensitive) in shown or path == "get"


def test_search_never_returns_hidden_rows(governed, writer):
    hidden_rows(governed, writer)
    seed(governed, org=OTHER, fact_text="globex green tea for the ulcer")
    assert search(writer, text="ulcer") == [] and search(writer, text="tea") == []
    # the sensitive memory was a candidate that its get decision withheld, the pending one none
    assert (last_log(governed)["returned"], last_log(governed)["withheld"]) == (0, 1)


def test_a_refused_get_tells_nothing_of_the_memory(governed, writer):
    sensitive, pending = hidden_rows(governed, writer)
    with refused(governed, "MG403") as info:
        writer.execute("SELECT * FROM memgov.get(%s)", (sensitive,))
    told = " ".join(str(x) for x in (info.value, info.value.diag.message_detail, info.value.diag.message_hint))
    assert "ulcer" not in told and "green tea" not in told
    with unchanged(governed, "a get of a pending memory"):
        assert writer.execute("SELECT * FROM memgov.get(%s)", (pending,)).fetchall() == []


def test_an_upsert_over_a_hidden_row_is_refused(governed, writer):
    sensitive, pending = hidden_rows(governed, writer)
    for memory_id in (sensitive, pending):
        with refused(governed, "42501", "MG409") as info:
            writer.execute(
                "INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence)"
                " VALUES (%s, 'acme', 'user_fact', 'x', 'agent_extracted', 0.9)"
                " ON CONFLICT (memory_id, org_id) DO UPDATE SET confidence = 0.7 RETURNING fact_text",
                (memory_id,),
            )
        assert "ulcer" not in str(info.value) and "likes tea" not in str(info.value)


def test_a_forged_written_mark_reveals_nothing(governed, writer):
    sensitive, pending = hidden_rows(governed, writer)
    writer.execute("BEGIN")
    xid = writer.execute("SELECT pg_current_xact_id()::text").fetchone()
    assert xid is not None
    for memory_id in (sensitive, pending):
        for guess in (f":{xid[0]}:{memory_id}", f"{xid[0]}:{memory_id}", str(memory_id)):
            for value in (guess, writer.execute("SELECT md5(%s)", (guess,)).fetchone()[0]):
                writer.execute("SELECT set_config('memgov.written', %s, true)", (value,))
                assert visible(writer) == set(), value
    writer.execute("ROLLBACK")


@pytest.mark.parametrize(
    "call",
    [
        "SELECT memgov.row_token(m, 1) FROM memgov.long_term_memory_items m",
        "SELECT memgov.govern('get', memgov.item_from_json(jsonb_build_object('memory_id', %(id)s::text,"
        " 'org_id', 'acme')), 'x', memgov.no_policy_decision(), NULL, p_returned => 1, p_withheld => 0)",
        "SELECT memgov.note_recall('{}')",
        "SELECT memgov.read_decision(memgov.item_from_json('{\"org_id\": \"acme\"}'), 'get', 'x')",
        "SELECT memgov.query_fingerprint('{}')",
    ],
)
def test_a_writer_cannot_call_the_recall_internals(governed, writer, call):
    sensitive, _ = hidden_rows(governed, writer)
    with refused(governed, "42501"):
        writer.execute(call, {"id": sensitive})


def test_another_tenants_rows_stay_unread_by_recall(su, writer):
    theirs = seed(su, org=OTHER, fact_text="globex plans")
    assert search(writer, text="plans") == []
    with unchanged(su, "a get of another tenant's memory"):
        assert writer.execute("SELECT * FROM memgov.get(%s)", (theirs,)).fetchall() == []
        assert visible(writer) == set()


def test_get_allowed_of_another_tenants_row_says_no(governed, writer):
    """The row level security helper decides nothing about another tenant's policy."""
    row = writer.execute(
        "SELECT memgov.get_allowed(memgov.item_from_json(%s))", (Jsonb({"org_id": OTHER, "fact_text": "x"}),)
    ).fetchone()
    assert row == (False,)


def test_a_bound_login_recalls_nothing_of_another_tenant(su, login, logins):
    theirs = seed(su, org=OTHER, fact_text="globex plans")
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.bound, ORG))
    conn = login(logins.bound, OTHER)
    with refused(su, "42501"):
        conn.execute("SELECT * FROM memgov.search('{}')")
    with refused(su, "42501"):
        conn.execute("SELECT * FROM memgov.get(%s)", (theirs,))
