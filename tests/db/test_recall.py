"""Governed reads (docs/recall.md), as real writer and reviewer logins: memgov.search and
memgov.get decide, rank, withhold, log and file; under a policy that names neither search nor get,
reads are as they were. A direct SELECT is tests/db/test_recall_select.py, the attacks found by
review tests/db/test_recall_attacks.py.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from tests import recall_helpers
from tests.attack_helpers import (
    ORG,
    OTHER,
    READ_POLICY,
    Logins,
    deploy_policy,
    insert,
    item,
    refused,
    seed,
    unchanged,
)
from tests.recall_helpers import last_log, notices, search, texts, visible

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
governed = recall_helpers.governed


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
