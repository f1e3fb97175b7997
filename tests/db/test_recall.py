"""Governed reads (docs/recall.md), as real writer and reviewer logins: memgov.search and
memgov.get decide, rank, withhold, log and file; row level security keeps a direct SELECT
to what the tenant's get rules allow; under a policy that names neither search nor get,
reads are as they were."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.attack_helpers import (
    ORG,
    OTHER,
    POLICY,
    READ_POLICY,
    Logins,
    deploy_policy,
    insert,
    item,
    refused,
    seed,
    unchanged,
)
from tests.waiting import blocked_by, join, wait_for


@pytest.fixture
def governed(su: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The attack policy with read rules, globally."""
    deploy_policy(su, "2.0.0", READ_POLICY)
    return su


def search(conn: psycopg.Connection[Any], **query: Any) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT * FROM memgov.search(%s)", (Jsonb(query),))
    names = [c.name for c in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def texts(rows: list[dict[str, Any]]) -> list[str]:
    return [r["fact_text"] for r in rows]


def last_log(su: psycopg.Connection[Any]) -> dict[str, Any]:
    cur = su.execute("SELECT * FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1")
    row = cur.fetchone()
    assert row is not None
    return dict(zip([c.name for c in cur.description or ()], row, strict=True))


def visible(conn: psycopg.Connection[Any]) -> set[str]:
    return {r[0] for r in conn.execute("SELECT fact_text FROM memgov.long_term_memory_items").fetchall()}


def notices(conn: psycopg.Connection[Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """The (SQLSTATE, detail) of each notice the connection receives from now on (a
    Diagnostic is only readable inside the handler)."""
    got: list[tuple[str | None, dict[str, Any]]] = []
    conn.add_notice_handler(lambda n: got.append((n.sqlstate, json.loads(n.message_detail or "{}"))))
    return got


# -- reads that no rule governs --------------------------------------------------------------


def test_search_ranks_the_tenants_active_memories_and_logs_a_fingerprint(su, writer):
    seed(su, fact_text="prefers green tea in the morning", confidence="0.9")
    seed(su, fact_text="green tea, green tea, always green tea", confidence="0.5")
    seed(su, fact_text="drinks coffee", confidence="0.9")
    seed(su, org=OTHER, fact_text="globex drinks green tea")
    insert(writer, item("held", fact_text="likes green tea a bit"))  # pending: never recalled
    seed(
        su,
        fact_text="old green tea habit",
        retention_policy="ttl_7d",
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=8),
    )  # expired

    rows = search(writer, text="green tea")
    assert sorted(texts(rows)) == ["green tea, green tea, always green tea", "prefers green tea in the morning"]
    assert rows[0]["score"] >= rows[1]["score"] > 0
    assert all(r["org_id"] == ORG for r in rows)
    log = last_log(su)
    assert (log["operation"], log["action"], log["reason_codes"]) == ("search", "allow", ["READS_NOT_GOVERNED"])
    assert (log["returned"], log["withheld"], log["memory_id"]) == (2, 0, None)
    assert len(log["query_fingerprint"]) == 64 and "green" not in json.dumps(log, default=str)
    # the same query, the same fingerprint; another query, another
    search(writer, text="green tea")
    assert last_log(su)["query_fingerprint"] == log["query_fingerprint"]
    search(writer, text="coffee")
    assert last_log(su)["query_fingerprint"] != log["query_fingerprint"]


def test_score_weighs_confidence_and_freshness(su, writer):
    confident = seed(su, fact_text="uses rust", confidence="1.0")
    unsure = seed(su, fact_text="uses rust", confidence="0.2")
    sixty_days_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=60)
    stale = seed(su, fact_text="uses rust", confidence="1.0", created_at=sixty_days_ago, updated_at=sixty_days_ago)
    rows = search(writer, text="rust")
    assert [r["memory_id"] for r in rows] == [confident, unsure, stale]
    # 30 days halve a score, confidence 0.2 weighs 0.6, 60 days a quarter
    assert rows[1]["score"] == pytest.approx(rows[0]["score"] * 0.6, rel=1e-3)
    assert rows[2]["score"] == pytest.approx(rows[0]["score"] * 0.25, rel=1e-3)


def test_filters_apply_only_when_the_query_names_them(su, writer):
    seed(su, fact_text="a", project_id="atlas", agent_id="bot", category="user_fact", confidence="0.9")
    seed(su, fact_text="b", project_id="atlas", category="preference", confidence="0.3")
    seed(su, fact_text="c", project_id="zeus", context_source="mcp", confidence="0.5")
    assert sorted(texts(search(writer))) == ["a", "b", "c"]
    assert sorted(texts(search(writer, project_id="atlas"))) == ["a", "b"]
    assert texts(search(writer, project_id="atlas", agent_id="bot")) == ["a"]
    assert texts(search(writer, categories=["preference"])) == ["b"]
    assert sorted(texts(search(writer, categories="user_fact"))) == ["a", "c"]
    assert sorted(texts(search(writer, min_confidence=0.5))) == ["a", "c"]
    # context_source is the channel the recall comes from: the decision reads it, no filter
    assert sorted(texts(search(writer, context_source="mcp"))) == ["a", "b", "c"]
    assert len(search(writer, limit=2)) == 2
    assert search(writer, text="?!") == []  # no word to match: nothing


@pytest.mark.parametrize(
    "query",
    [
        {"txt": "tea"},
        {"limit": 0},
        {"limit": 1001},
        {"limit": 2.5},
        {"categories": []},
        {"categories": [1]},
        {"min_confidence": 2},
        {"project_id": 7},
        ["text"],
    ],
)
def test_a_malformed_query_is_22023_and_changes_nothing(su, writer, query):
    with refused(su, "22023"):
        writer.execute("SELECT * FROM memgov.search(%s)", (Jsonb(query),))


def test_a_recall_needs_the_sessions_tenant(su, login, logins):
    conn = login(logins.writer, None)
    with refused(su, "42501"):
        conn.execute("SELECT * FROM memgov.search('{}')")
    with refused(su, "42501"):
        conn.execute("SELECT * FROM memgov.get(%s)", (uuid.uuid4(),))


def test_get_returns_one_active_memory_of_the_tenant_and_logs_it(su, writer):
    mine = seed(su, fact_text="likes green tea")
    theirs = seed(su, org=OTHER, fact_text="globex secret plan")
    row = writer.execute("SELECT memory_id, fact_text, score FROM memgov.get(%s)", (mine,)).fetchall()
    assert row == [(mine, "likes green tea", None)]
    log = last_log(su)
    assert (log["operation"], log["memory_id"], log["returned"], log["withheld"]) == ("get", mine, 1, 0)
    with unchanged(su, "a get of another tenant's memory"):
        assert writer.execute("SELECT * FROM memgov.get(%s)", (theirs,)).fetchall() == []
        assert writer.execute("SELECT * FROM memgov.get(%s)", (uuid.uuid4(),)).fetchall() == []


def test_without_read_rules_a_select_shows_active_rows_and_pending_ones_to_reviewers(su, writer, reviewer):
    seed(su, fact_text="likes green tea")
    seed(su, fact_text="is sensitive", is_sensitive=True)
    row = insert(writer, item("held")).fetchone()  # the writer's own RETURNING reads its pending row
    assert row is not None and row[1] == "pending_approval"
    assert visible(writer) == {"likes green tea", "is sensitive"}
    assert visible(reviewer) == {"likes green tea", "is sensitive", "likes tea"}
    # recall never returns pending rows, not even to a reviewer
    assert texts(search(writer, text="tea")) == texts(search(reviewer, text="tea")) == ["likes green tea"]


# -- reads a policy governs ------------------------------------------------------------------


# A read claims no source: the sources: map says who may write (and forget) a memory of a
# source, the read rules say who reads it. The attack policy restricts user_confirmed to
# reviewers and admins, system_rule to admins.
WITHHOLD_INTERNAL = """
  - id: withhold-internal-rules
    priority: 4
    when:
      - {{field: operation_type, operator: eq, value: get}}
      - {{field: source, operator: eq, value: system_rule}}
      - {{field: metadata.internal, operator: eq, value: "yes"}}
    action: deny
    reason_codes: [INTERNAL_RULE]
"""


def trusted_memories(login: Any, logins: Logins) -> dict[str, uuid.UUID]:
    """Memories of acme that only a reviewer or an admin may write, written by their logins (the
    user-facing application's, a writer and reviewer, for what the user confirmed)."""
    reviewer, admin = login(logins.both), login(logins.admin)
    made = {}
    for conn, key, extra in (
        (reviewer, "confirmed", {"source": "user_confirmed", "fact_text": "confirmed: prefers oolong tea"}),
        (reviewer, "confirmed sensitive", {"source": "user_confirmed", "fact_text": "confirmed: tea for the ulcer",
                                           "is_sensitive": True}),
        (admin, "rule", {"source": "system_rule", "fact_text": "rule: answer tea questions in Ukrainian"}),
        (admin, "internal rule", {"source": "system_rule", "fact_text": "rule: tea escalations go to ops",
                                  "metadata": Jsonb({"internal": "yes"})}),
    ):  # fmt: skip
        row = insert(conn, item("allowed", **extra)).fetchone()
        assert row is not None and row[1] == "active", key
        made[key] = row[0]
    return made


def test_under_read_rules_a_writer_reads_what_the_user_confirmed_and_the_system_rules(governed, login, logins):
    su = governed
    deploy_policy(su, "2.1.0", READ_POLICY + WITHHOLD_INTERNAL)
    made = trusted_memories(login, logins)
    agent_fact = seed(su, fact_text="agent: drinks tea daily")
    writer = login(logins.writer)
    readable = {"confirmed: prefers oolong tea", "rule: answer tea questions in Ukrainian", "agent: drinks tea daily"}

    assert visible(writer) == readable  # a plain SELECT
    assert set(texts(search(writer, text="tea"))) == readable
    assert (last_log(su)["returned"], last_log(su)["withheld"]) == (3, 2)
    for key in ("confirmed", "rule"):
        rows = writer.execute("SELECT memory_id, source FROM memgov.get(%s)", (made[key],)).fetchall()
        assert [r[0] for r in rows] == [made[key]], key
        log = last_log(su)
        assert (log["operation"], log["action"], log["reason_codes"], log["login"]) == (
            "get", "allow", ["DEFAULT_POLICY"], logins.writer)  # fmt: skip
    assert writer.execute("SELECT memory_id FROM memgov.get(%s)", (agent_fact,)).fetchall() == [(agent_fact,)]

    # what a read rule withholds stays withheld, whatever the source
    for key, rule, reason in (("confirmed sensitive", "withhold-sensitive", "SENSITIVE_RECALL"),
                              ("internal rule", "withhold-internal-rules", "INTERNAL_RULE")):  # fmt: skip
        with refused(su, "MG403") as info:
            writer.execute("SELECT * FROM memgov.get(%s)", (made[key],))
        decision = json.loads(info.value.diag.message_detail or "{}")
        assert (decision["matched_rule_ids"], decision["reason_codes"]) == ([rule], [reason])


def test_under_read_rules_a_writer_still_may_not_write_or_forget_a_trusted_memory(governed, login, logins):
    su = governed
    made = trusted_memories(login, logins)
    writer = login(logins.writer)
    assert {"confirmed: prefers oolong tea", "rule: answer tea questions in Ukrainian"} <= visible(writer)
    for key in ("confirmed", "rule"):
        with refused(su, "MG403") as info:
            writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'rewritten' WHERE memory_id = %s",
                           (made[key],))  # fmt: skip
        assert "SOURCE_NOT_PERMITTED" in str(info.value), key
        with refused(su, "MG403") as info:
            writer.execute("SELECT memgov.forget(%s)", (made[key],))
        assert "SOURCE_NOT_PERMITTED" in str(info.value), key


@pytest.mark.parametrize("reads", ["governed", "not governed"])
@pytest.mark.parametrize("key", ["confirmed", "rule"])
def test_x_a_writer_cannot_launder_a_trusted_memory_into_its_own_source(su, login, logins, key, reads):
    """An update claims the stored row's source too: calling a system_rule memory agent_extracted
    does not let a writer rewrite it (now that it reads it under read rules, as it always could
    without them)."""
    if reads == "governed":
        deploy_policy(su, "2.0.0", READ_POLICY)
    made = trusted_memories(login, logins)
    writer = login(logins.writer)
    assert "rule: answer tea questions in Ukrainian" in visible(writer)
    with refused(su, "MG403") as info:
        writer.execute(
            "UPDATE memgov.long_term_memory_items SET source = 'agent_extracted', fact_text = 'rewritten'"
            " WHERE memory_id = %s",
            (made[key],),
        )
    assert "SOURCE_NOT_PERMITTED" in str(info.value)


def test_a_get_rule_withholds_a_row_from_search_get_and_select(governed, writer, reviewer):
    su = governed
    plain = seed(su, fact_text="likes green tea")
    sensitive = seed(su, fact_text="green tea for the ulcer", is_sensitive=True)
    rows = search(writer, text="green tea")
    assert [r["memory_id"] for r in rows] == [plain]
    log = last_log(su)
    assert (log["action"], log["returned"], log["withheld"], log["policy_version"]) == ("allow", 1, 1, "2.0.0")
    assert visible(writer) == {"likes green tea"} and visible(reviewer) == {"likes green tea"}
    with refused(su, "MG403") as info:
        writer.execute("SELECT * FROM memgov.get(%s)", (sensitive,))
    assert "withhold-sensitive" in str(info.value)
    assert json.loads(info.value.diag.message_detail or "{}")["reason_codes"] == ["SENSITIVE_RECALL"]


def test_search_fills_its_limit_past_withheld_rows(governed, writer):
    su = governed
    for i in range(3):
        seed(su, fact_text=f"tea note {i}", is_sensitive=True, confidence="1.0")
    for i in range(2):
        seed(su, fact_text=f"tea remark {i}", confidence="0.5")
    rows = search(writer, text="tea", limit=2)
    assert sorted(texts(rows)) == ["tea remark 0", "tea remark 1"]
    assert (last_log(su)["returned"], last_log(su)["withheld"]) == (2, 3)


def test_a_search_from_an_untrusted_channel_is_denied(governed, writer):
    seed(governed, fact_text="likes green tea")
    with refused(governed, "MG403") as info:
        search(writer, text="tea", context_source="untrusted")
    assert "deny-untrusted-recall" in str(info.value) and info.value.diag.message_detail


def test_a_search_for_a_secret_is_held_filed_and_never_replayed(governed, writer, reviewer):
    su = governed
    seed(su, fact_text="likes green tea")
    got = notices(writer)
    assert search(writer, text="password: hunter2hunter2") == []
    assert [n[0] for n in got] == ["MG203"]
    detail = got[0][1]
    request = su.execute(
        "SELECT request_id, operation, payload, status, decision_id FROM memgov.approval_requests"
    ).fetchall()
    assert len(request) == 1 and request[0][0] == uuid.UUID(detail["request_id"])
    assert request[0][1:4] == ("search", {"query": {"text": "password: hunter2hunter2", "limit": 20}}, "pending")
    log = last_log(su)
    assert (log["decision_id"], log["action"], log["matched_rule_ids"]) == (
        request[0][4], "require_approval", ["hold-secret-searches"])  # fmt: skip
    assert "hunter2" not in json.dumps(log, default=str)
    with refused(su, "MG409"):
        reviewer.execute("SELECT memgov.approve(%s)", (request[0][0],))
    reviewer.execute("SELECT memgov.deny(%s, 'no')", (request[0][0],))
    assert su.execute("SELECT status FROM memgov.approval_requests").fetchone() == ("denied",)


def test_a_quarantined_read_is_filed_and_never_released(governed, writer, reviewer):
    su = governed
    pii = seed(su, fact_text="mail olena@example.com", context_source="custom")  # quarantine-untrusted-pii
    got = notices(writer)
    assert writer.execute("SELECT * FROM memgov.get(%s)", (pii,)).fetchall() == []
    assert [n[0] for n in got] == ["MG204"]
    entry = su.execute("SELECT quarantine_id, operation, memory_id, payload FROM memgov.quarantine").fetchall()
    assert len(entry) == 1 and entry[0][1:] == ("get", pii, {"memory_id": str(pii)})
    with refused(su, "MG409"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (entry[0][0],))
    reviewer.execute("SELECT memgov.purge_quarantine(%s)", (entry[0][0],))


def test_monitor_mode_returns_everything_and_counts_what_it_would_withhold(governed, writer):
    su = governed
    deploy_policy(su, "2.1.0", READ_POLICY.replace("mode: enforce", "mode: monitor"))
    seed(su, fact_text="likes green tea")
    seed(su, fact_text="green tea for the ulcer", is_sensitive=True)
    assert len(search(writer, text="green tea")) == 2
    log = last_log(su)
    assert (log["enforced"], log["returned"], log["withheld"]) == (False, 2, 1)
    assert len(visible(writer)) == 2
    assert len(search(writer, text="tea", context_source="untrusted")) == 2  # a deny not enforced


def test_a_writer_reads_back_its_own_write_that_its_get_rules_withhold(governed, writer):
    row = insert(writer, item("allowed", is_sensitive=True)).fetchone()
    assert row is not None and row[1] == "active"  # RETURNING of the INSERT itself
    assert visible(writer) == set()  # any later statement: withheld
    cur = writer.execute("UPDATE memgov.long_term_memory_items SET confidence = 0.8 RETURNING memory_id")
    assert cur.fetchall() == []


def test_a_tenant_override_without_read_rules_keeps_reads_open(governed, login, logins):
    su = governed
    seed(su, org=OTHER, fact_text="globex sensitive", is_sensitive=True)
    gwriter = login(logins.gwriter, OTHER)
    assert visible(gwriter) == {"globex sensitive"}
    assert texts(search(gwriter)) == ["globex sensitive"]
    assert last_log(su)["reason_codes"] == ["READS_NOT_GOVERNED"]


def test_the_evaluated_search_item_carries_the_querys_fields(governed, writer):
    """memgov.evaluate of a search decides what memgov.search decides."""
    decision = writer.execute(
        "SELECT memgov.evaluate(%s, 'search')", (Jsonb({"org_id": ORG, "fact_text": "token: ghp_" + "a" * 36}),)
    ).fetchone()
    assert decision is not None and decision[0]["matched_rule_ids"] == ["hold-secret-searches"]


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


def hidden_rows(su: psycopg.Connection[Any], writer: psycopg.Connection[Any]) -> tuple[uuid.UUID, uuid.UUID]:
    """A sensitive memory (withheld where reads are governed) and a pending one, both of
    acme, as committed rows the writer did not just write; ANALYZE fills pg_stats."""
    sensitive = seed(su, fact_text="green tea for the ulcer", is_sensitive=True)
    row = insert(writer, item("held")).fetchone()
    assert row is not None and row[1] == "pending_approval"
    su.execute("ANALYZE memgov.long_term_memory_items")
    return sensitive, row[0]


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
