"""The Python API: MemoryPolicyEngine (async) and its sync twin, as an agent's login
role and a reviewer's, against real PostgreSQL. The engine holds no rule: every
answer here comes from the database."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from memgov_pg import MemoryPolicyEngine, PolicyDeniedError, QuarantinedError, SyncMemoryPolicyEngine
from memgov_pg.decisions import Decision, FeedbackResult, ReviewResult
from memgov_pg.deploy import deploy
from memgov_pg.errors import (
    ConnectionFailed,
    HeldForApprovalError,
    MemgovError,
    NotFoundError,
    NotPermittedError,
    RecallHeldError,
    RecallQuarantinedError,
    SQLError,
    TenantRequiredError,
)

ROOT = Path(__file__).resolve().parents[2]
AGENT = "memgov_test_agent"
REVIEWER = "memgov_test_reviewer"


def item(**extra: Any) -> dict[str, Any]:
    return {"org_id": "acme", "project_id": "p1", "category": "user_fact", "fact_text": "Name is Olena",
            "source": "agent_extracted", "confidence": 0.9} | extra  # fmt: skip


@pytest.fixture(scope="module")
def dsns(memgov_dsn):
    """DSNs of two login roles: an agent (memgov_writer) and an application (memgov_reviewer)."""
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        for role, group in ((AGENT, "memgov_writer"), (REVIEWER, "memgov_reviewer")):
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT {group} TO {role}")
    deploy(memgov_dsn, ROOT / "policies" / "default.yaml")
    params = conninfo.conninfo_to_dict(memgov_dsn)
    return {
        role: conninfo.make_conninfo(**(params | {"user": role}))  # type: ignore[arg-type]
        for role in (AGENT, REVIEWER)
    }


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_dry_run_questions(dsns):
    async def scenario() -> tuple[bool, bool, bool, bool]:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as engine:
            return (
                await engine.should_store_in_long_term(item(confidence=0.9)),
                await engine.requires_user_confirmation(item(confidence=0.9)),
                await engine.should_store_in_long_term(item(confidence=0.7)),
                await engine.requires_user_confirmation(item(confidence=0.7)),
            )

    assert run(scenario()) == (True, False, False, True)


def test_remember_allow_and_pending(dsns):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as engine:
            return await engine.remember(item()), await engine.remember(item(confidence=0.5))

    stored, held = run(scenario())
    assert isinstance(stored, Decision) and stored.action == "allow" and stored.memory_id
    assert stored["action"] == "allow" and stored["memory_id"] == str(stored.memory_id)  # the JSON stays readable
    assert held.action == "require_approval" and held.request_id and held.policy_version


def test_raise_on_hold(dsns):
    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as engine:
            await engine.remember(item(confidence=0.5), raise_on_hold=True)

    with pytest.raises(HeldForApprovalError) as info:
        run(scenario())
    assert info.value.request_id and info.value.sqlstate == "MG201"


def test_no_tenant_is_an_error_before_the_database(dsns):
    with SyncMemoryPolicyEngine.connect(dsns[AGENT]) as engine:
        with pytest.raises(TenantRequiredError, match="for_tenant"):
            engine.remember(item())
        assert engine.for_tenant("acme").evaluate(item()).action == "allow"
        assert engine.pool.get_stats()["requests_num"] == 1  # only the for_tenant call took a connection


def test_for_tenant_shares_the_pool_and_sets_the_tenant(dsns, db_conn):
    async def scenario() -> tuple[Decision, Decision]:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id="acme", max_size=2) as engine:
            globex = engine.for_tenant("globex")
            assert globex.pool is engine.pool and globex.org_id == "globex" and engine.org_id == "acme"
            return await engine.remember(item()), await globex.remember(item(org_id="globex"))

    acme, globex = run(scenario())
    rows = db_conn.execute(
        "SELECT org_id FROM memgov.long_term_memory_items WHERE memory_id = ANY(%s) ORDER BY org_id",
        ([acme.memory_id, globex.memory_id],),
    ).fetchall()
    assert rows == [("acme",), ("globex",)]


def test_remember_denied_raises_and_is_logged(dsns, db_conn):
    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as engine:
            await engine.remember(item(fact_text="password: hunter2hunter2"))

    with pytest.raises(PolicyDeniedError) as info:
        run(scenario())
    assert info.value.rule_id == "block-secrets"
    assert info.value.reason_codes == ["SECRET_DETECTED"]
    logged = db_conn.execute(
        "SELECT action, actor FROM memgov.decision_log WHERE decision_id = %s", (info.value.decision["decision_id"],)
    ).fetchone()
    assert logged == ("deny", AGENT)


def test_remember_quarantined_raises(dsns, db_conn, memgov_dsn, tmp_path):
    # a tenant override that quarantines everything from an untrusted channel
    path = tmp_path / "quarantine.yaml"
    path.write_text(
        'version: "1.0.0"\ndefaults: {on_policy_miss: allow}\nrules:\n'
        "  - {id: untrusted, priority: 1, condition: {context.source: custom}, action: quarantine}\n"
    )
    deploy(memgov_dsn, path, tenant="quarantined-org")

    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id="quarantined-org") as engine:
            await engine.remember(item(org_id="quarantined-org", context_source="custom"))

    with pytest.raises(QuarantinedError) as info:
        run(scenario())
    assert info.value.quarantine_id
    assert db_conn.execute(
        "SELECT count(*) FROM memgov.quarantine WHERE quarantine_id = %s", (info.value.quarantine_id,)
    ).fetchone() == (1,)


def test_review_and_feedback_round_trip(dsns, db_conn):
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent, \
            SyncMemoryPolicyEngine.connect(dsns[REVIEWER], org_id="acme") as app:  # fmt: skip
        held = agent.remember(item(fact_text="Prefers tea", confidence=0.6))
        approved = app.approve(held["request_id"], note="user said yes")
        assert isinstance(approved, ReviewResult) and approved.status == "approved"
        assert approved.decision is not None and approved.decision.action == "allow"  # what was done
        assert approved.policy_action == "require_approval" and approved.memory_id == held.memory_id
        memory_id = held["memory_id"]
        confirmed = app.confirm(memory_id)
        assert isinstance(confirmed, FeedbackResult) and confirmed.confidence_after == Decimal("0.7")
        assert app.reject(memory_id)["confidence_after"] == pytest.approx(0.4)
        edited = app.edit(memory_id, "Prefers green tea")
        assert edited["action"] == "allow" and edited["confidence_after"] == pytest.approx(0.8)
        with pytest.raises(PolicyDeniedError):
            app.edit(memory_id, "api_key=abcdef0123456789abcdef")
        assert db_conn.execute(
            "SELECT fact_text FROM memgov.long_term_memory_items WHERE memory_id = %s", (memory_id,)
        ).fetchone() == ("Prefers green tea",)
        assert agent.forget(memory_id)["action"] == "allow"
        second = agent.remember(item(fact_text="Likes jazz", confidence=0.4))
        assert app.deny(second["request_id"])["status"] == "denied"


def test_agents_cannot_give_feedback(dsns):
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent:
        stored = agent.remember(item(fact_text="Lives in Kyiv"))
        with pytest.raises(NotPermittedError) as info:
            agent.confirm(stored["memory_id"])
    assert info.value.sqlstate == "42501"


def test_apply_retention_policy(dsns, db_conn):
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent:
        kept = agent.remember(item(fact_text="Kept forever"))
        assert agent.apply_retention_policy(kept["memory_id"])["deleted"] is False
        expiring = agent.remember(item(fact_text="Short lived", retention_policy="ttl_7d"))
    with db_conn.transaction():
        db_conn.execute("SET LOCAL ROLE memgov_owner")
        db_conn.execute(
            "UPDATE memgov.long_term_memory_items SET created_at = now() - interval '8 days' WHERE memory_id = %s",
            (expiring["memory_id"],),
        )
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent:
        result = agent.apply_retention_policy(expiring["memory_id"])
    assert result == {"memory_id": expiring["memory_id"], "deleted": True, "reason": "ttl", "rule_id": None}


def test_feedback_on_another_tenants_memory_is_an_error(dsns):
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent:
        stored = agent.remember(item(fact_text="Acme only"))
    with SyncMemoryPolicyEngine.connect(dsns[REVIEWER], org_id="globex") as other:
        with pytest.raises(NotFoundError) as info:
            other.confirm(stored["memory_id"])
    assert info.value.sqlstate == "MG404"


def test_any_other_database_error_is_a_memgov_error_with_its_sqlstate(dsns):
    """An oversized item (54000) is not one of the named refusals: SQLError, not a bare psycopg error."""
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent:
        with pytest.raises(SQLError) as info:
            agent.remember(item(fact_text="x" * 70_000))
        assert agent.pool.get_stats()["pool_available"] == agent.pool.get_stats()["pool_size"]
    assert info.value.sqlstate == "54000"
    assert isinstance(info.value, MemgovError)
    assert isinstance(info.value.__cause__, psycopg.Error)


def test_a_pool_that_times_out_is_connection_failed(dsns):
    """Every connection of the pool is taken: the next call waits `timeout` seconds, then ConnectionFailed."""
    from psycopg_pool import ConnectionPool

    with ConnectionPool(dsns[AGENT], min_size=1, max_size=1, timeout=0.5) as pool:
        engine = SyncMemoryPolicyEngine.from_pool(pool, org_id="acme")
        with pool.connection(), pytest.raises(ConnectionFailed):
            engine.evaluate(item())
        assert engine.evaluate(item()).action == "allow"


# -- reads: search and get (docs/recall.md) -----------------------------------------------------


@pytest.fixture(scope="module")
def recall_org(memgov_dsn, dsns, tmp_path_factory):
    """Tenant recall-org under the memproof example (it governs reads) plus two read rules
    that hold a search for salaries and quarantine a get of a temporary note."""
    source = (ROOT / "policies" / "examples" / "memproof.yaml").read_text()
    read_rules = """rules:
  - {id: hold-salary-searches, priority: 1, action: require_approval,
     when: [{field: operation_type, operator: eq, value: search},
            {field: fact_text, operator: contains, value: salary}]}
  - {id: quarantine-scratch-gets, priority: 2, action: quarantine,
     when: [{field: operation_type, operator: eq, value: get},
            {field: category, operator: eq, value: temporary_context}]}
"""
    source = source.replace("rules:\n", read_rules, 1)
    path = tmp_path_factory.mktemp("recall") / "recall.yaml"
    path.write_text(source)
    deploy(memgov_dsn, path, tenant="recall-org")
    return "recall-org"


def test_search_and_get_where_reads_are_not_governed(dsns):
    with SyncMemoryPolicyEngine.connect(dsns[AGENT], org_id="acme") as agent:
        stored = agent.remember(item(fact_text="Drinks rooibos in the evening"))
        recall = agent.search(text="rooibos", limit=5)
        assert [m["memory_id"] for m in recall.memories] == [stored.memory_id]
        assert recall.memories[0]["score"] > 0 and recall.returned == 1
        # no get rule can withhold a row here: the count is 0, and an agent is told so
        assert (recall.withheld, recall.withheld_disclosed) == (0, True)
        assert recall.decision.reason_codes == ("READS_NOT_GOVERNED",) and recall.decision.decision_id
        assert agent.search({"text": "rooibos"}, project_id="nope").memories == ()
        got = agent.get(stored.memory_id)
        assert got.memory is not None and got.memory["fact_text"] == "Drinks rooibos in the evening"
        assert agent.get("00000000-0000-0000-0000-000000000000").memory is None
        with pytest.raises(SQLError) as info:
            agent.search(limit=0)
        assert info.value.sqlstate == "22023"


def test_search_and_get_under_read_rules(dsns, db_conn, recall_org):
    def remember(**extra: Any) -> Decision:
        with db_conn.transaction():  # on the engine's path: stored as written
            db_conn.execute("SET LOCAL ROLE memgov_owner")
            row = db_conn.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, project_id, category, fact_text, source,"
                " confidence, is_sensitive) VALUES (%(org_id)s, 'p1', %(category)s, %(fact_text)s,"
                " 'agent_extracted', 0.9, %(is_sensitive)s) RETURNING memory_id",
                {"org_id": recall_org, "category": "user_fact", "is_sensitive": False} | extra,
            ).fetchone()
        return row[0]

    plain = remember(fact_text="Walks to work")
    sensitive = remember(fact_text="Walks with a cane after surgery", is_sensitive=True)
    scratch = remember(fact_text="Walks the dog at noon today", category="temporary_context")

    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(dsns[AGENT], org_id=recall_org) as agent:
            recall = await agent.search(text="walks", project_id="p1")
            assert {m["memory_id"] for m in recall.memories} == {plain}
            # an agent is not told what it may not read: 0, and not disclosed
            assert (recall.returned, recall.withheld, recall.withheld_disclosed) == (1, 0, False)
            assert recall.decision.matched_rule_ids == ("allow-recall",)
            with pytest.raises(PolicyDeniedError) as denied:
                await agent.get(sensitive)
            assert denied.value.rule_ids == ["withhold-sensitive"]
            with pytest.raises(PolicyDeniedError) as untrusted:
                await agent.search(text="walks", project_id="p1", context_source="custom")
            assert untrusted.value.rule_ids == ["deny-recall-from-untrusted"]
            with pytest.raises(RecallHeldError) as held:
                await agent.search(text="salary of the team", project_id="p1")
            assert held.value.sqlstate == "MG203" and held.value.request_id
            with pytest.raises(RecallQuarantinedError) as quarantined:
                await agent.get(scratch)
            assert quarantined.value.sqlstate == "MG204" and quarantined.value.quarantine_id
            assert (await agent.get(plain)).memory is not None

    run(scenario())
    with SyncMemoryPolicyEngine.connect(dsns[REVIEWER], org_id=recall_org) as app:  # it reads the log: it is told
        recall = app.search(text="walks", project_id="p1")
    assert (recall.returned, recall.withheld, recall.withheld_disclosed) == (1, 2, True)  # sensitive, scratch
    # the refused reads were filed (committed), for reviewers to see
    assert db_conn.execute(
        "SELECT operation, status FROM memgov.approval_requests WHERE org_id = %s", (recall_org,)
    ).fetchall() == [("search", "pending")]
    assert db_conn.execute(
        "SELECT operation, memory_id FROM memgov.quarantine WHERE org_id = %s", (recall_org,)
    ).fetchall() == [("get", scratch)]
