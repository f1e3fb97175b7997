"""The engines' calling conventions, as a host application meets them, against real PostgreSQL
and real login roles: the engine's tenant is an item's default, ``search`` takes the text
first, misuse is a TypeError that says how to call it, and a recall's rows are typed."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memgov_pg import MemoryPolicyEngine, RecalledMemory, SyncMemoryPolicyEngine
from memgov_pg.deploy import deploy
from memgov_pg.errors import NotPermittedError
from tests.attack_helpers import Logins, login_dsn

ORG = "api-acme"
STRICT = "api-strict"  # a tenant whose override denies what the global policy stores


def item(**extra: Any) -> dict[str, Any]:
    """An item without org_id, as a host application writes one for its engine's tenant."""
    return {"project_id": "atlas", "category": "user_fact", "fact_text": "Works on project Atlas",
            "source": "agent_extracted", "confidence": 0.9} | extra  # fmt: skip


@pytest.fixture(scope="module")
def policies(memgov_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = Path(__file__).resolve().parents[2]
    deploy(memgov_dsn, root / "policies" / "default.yaml")
    override = tmp_path_factory.mktemp("api") / "strict.yaml"
    override.write_text(
        'version: "1.0.0-strict"\ndefaults: {on_policy_miss: allow}\nrules:\n'
        "  - {id: no-user-facts, priority: 1, category: user_fact, action: deny, reason_codes: [NO_FACTS]}\n"
        "  - {id: hold-preferences, priority: 2, category: preference, action: require_approval}\n"
    )
    deploy(memgov_dsn, override, tenant=STRICT)


@pytest.fixture(scope="module")
def writer_dsn(memgov_dsn: str, logins: Logins, policies: None) -> str:
    return login_dsn(memgov_dsn, logins.writer)


def rows_of(su: psycopg.Connection[Any], org: str) -> list[tuple[Any, ...]]:
    """The memories stored in tenant ``org`` by the tests of the tenant default."""
    return su.execute(
        "SELECT org_id, fact_text FROM memgov.long_term_memory_items"
        " WHERE org_id = %s AND fact_text ~ '^(a?sync):' ORDER BY fact_text",
        (org,),
    ).fetchall()


# -- the engine's tenant is the item's default -------------------------------------------------


def test_remember_without_org_id_stores_in_the_engines_tenant(writer_dsn, db_conn):
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        stored = engine.remember(item(fact_text="sync: no org_id"))
        explicit_none = engine.remember(item(fact_text="sync: org_id None", org_id=None))
    assert stored.action == explicit_none.action == "allow"

    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
            assert (await engine.remember(item(fact_text="async: no org_id"))).action == "allow"

    asyncio.run(scenario())
    assert rows_of(db_conn, ORG) == [
        (ORG, "async: no org_id"), (ORG, "sync: no org_id"), (ORG, "sync: org_id None")
    ]  # fmt: skip


def test_an_item_naming_another_tenant_is_refused_as_before(writer_dsn, db_conn):
    before = db_conn.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        with pytest.raises(NotPermittedError) as sync_info:
            engine.remember(item(org_id="globex"))
        with pytest.raises(NotPermittedError):
            engine.evaluate(item(org_id="globex"))

    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
            await engine.remember(item(org_id="globex"))

    with pytest.raises(NotPermittedError) as async_info:
        asyncio.run(scenario())
    assert sync_info.value.sqlstate == async_info.value.sqlstate == "42501"
    assert "globex" in str(sync_info.value)
    assert db_conn.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone() == before
    assert rows_of(db_conn, "globex") == []


def test_dry_runs_without_org_id_are_decided_by_the_engines_tenants_policy(writer_dsn):
    """Without the default, memgov.evaluate would decide an item without org_id by the global
    policy, which stores a user fact that this tenant's override denies."""
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=STRICT) as engine:
        decision = engine.evaluate(item())
        assert (decision.action, decision.matched_rule_ids, decision.policy_version) == (
            "deny", ("no-user-facts",), "1.0.0-strict",
        )  # fmt: skip
        assert engine.should_store_in_long_term(item()) is False
        assert engine.requires_user_confirmation(item(category="preference")) is True
        assert engine.for_tenant(ORG).should_store_in_long_term(item()) is True  # the global policy

    async def scenario() -> tuple[str, bool, bool]:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=STRICT) as engine:
            return (
                (await engine.evaluate(item(), "update")).action,
                await engine.should_store_in_long_term(item()),
                await engine.requires_user_confirmation(item(category="preference")),
            )

    assert asyncio.run(scenario()) == ("deny", False, True)


def test_explain_is_the_dry_run_with_every_rules_outcome(writer_dsn, db_conn):
    """memgov.explain through both engines, as a writer login: the decision, and for every write
    rule of the tenant's policy whether it matched; nothing logged, nothing stored."""
    logged = db_conn.execute("SELECT count(*) FROM memgov.decision_log").fetchone()
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=STRICT) as engine:
        explained = engine.explain(item())
    assert (explained["action"], explained["matched_rule_ids"], explained["policy_version"]) == (
        "deny", ["no-user-facts"], "1.0.0-strict",
    )  # fmt: skip
    assert {r["rule_id"]: r["matched"] for r in explained["rules"]} == {
        "no-user-facts": True,
        "hold-preferences": False,
    }

    async def scenario() -> dict[str, Any]:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=STRICT) as engine:
            return await engine.explain(item(category="preference"), "update")

    held = asyncio.run(scenario())
    assert held["action"] == "require_approval" and held["matched_rule_ids"] == ["hold-preferences"]
    assert db_conn.execute("SELECT count(*) FROM memgov.decision_log").fetchone() == logged
    assert rows_of(db_conn, STRICT) == []


def test_an_item_that_is_not_a_mapping_is_a_type_error_before_the_database(writer_dsn):
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        for bad in ("Works on Atlas", [("category", "user_fact")], None):
            with pytest.raises(TypeError, match="an item is a mapping"):
                engine.remember(bad)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="an item is a mapping"):
                engine.evaluate(bad)  # type: ignore[arg-type]
        assert engine.pool.get_stats().get("requests_num", 0) == 0  # no connection was taken


# -- search takes the text first ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def recalled(writer_dsn) -> uuid.UUID:
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        decision = engine.remember(item(fact_text="Atlas ships in March", metadata={"k": "v"}))
    assert decision.memory_id is not None
    return decision.memory_id


def test_search_takes_the_text_as_its_first_argument(writer_dsn, recalled):
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        forms = [
            engine.search("Atlas March"),
            engine.search("Atlas March", project_id="atlas", limit=5),
            engine.search(text="Atlas March"),
            engine.search(query={"text": "Atlas March", "project_id": "atlas"}),
            engine.search({"text": "Atlas March"}),  # the 0.1 form: a query mapping first
            engine.search(query={"project_id": "atlas"}, text="Atlas March"),
        ]
        assert engine.search("Atlas", project_id="elsewhere").memories == ()
    for recall in forms:
        assert [m.memory_id for m in recall.memories] == [recalled]

    async def scenario() -> list[uuid.UUID]:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
            recall = await engine.search("Atlas March", limit=1)
            return [m.memory_id for m in recall.memories]

    assert asyncio.run(scenario()) == [recalled]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((5,), {}, "takes the text to look for as its first argument, a str, not int"),
        ((b"Atlas",), {}, "a str, not bytes"),
        ((["Atlas"],), {}, "a str, not list"),
        (("Atlas",), {"query": {"text": "March"}}, "got the text twice"),
        (({"text": "Atlas"},), {"query": {}}, "got two queries"),
        ((), {"query": "Atlas"}, "takes a mapping of the query's keys, not str"),
    ],
    ids=["int", "bytes", "list", "text-twice", "two-queries", "query-str"],
)
def test_misusing_search_is_a_clear_type_error(writer_dsn, args, kwargs, message):
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        with pytest.raises(TypeError, match=message):
            engine.search(*args, **kwargs)

    async def scenario() -> None:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
            await engine.search(*args, **kwargs)

    with pytest.raises(TypeError, match=message):
        asyncio.run(scenario())


def test_an_id_of_the_wrong_type_is_a_type_error(writer_dsn):
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        with pytest.raises(TypeError, match=r"an id is a uuid\.UUID or its text, not int"):
            engine.get(42)  # type: ignore[arg-type]


# -- a recall's rows are typed ------------------------------------------------------------------------


def test_recalled_memories_are_typed_frozen_rows(writer_dsn, recalled):
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG) as engine:
        recall = engine.search("Atlas March")
        got = engine.get(recalled)
    (memory,) = recall.memories
    assert isinstance(memory, RecalledMemory)
    assert (memory.memory_id, memory.org_id, memory.fact_text) == (recalled, ORG, "Atlas ships in March")
    assert isinstance(memory.confidence, Decimal) and memory.confidence == Decimal("0.900")
    assert isinstance(memory.created_at, dt.datetime) and memory.created_at.tzinfo is not None
    assert isinstance(memory.score, float) and memory.score > 0
    assert memory.metadata == {"k": "v"} and memory.is_sensitive is False
    assert isinstance(memory.decision_id, int) and memory.policy_version == "1.0.0"
    # read as the mappings of 0.1 were
    assert memory["fact_text"] == memory.fact_text and memory.get("score") == memory.score
    assert memory.get("no_such_column", "absent") == "absent"
    with pytest.raises(KeyError):
        memory["no_such_column"]
    assert list(memory.as_dict()) == [f.name for f in dataclasses.fields(RecalledMemory)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        memory.fact_text = "changed"  # type: ignore[misc]
    # a get: the same memory, no score; the counts are ints
    assert got.memory is not None and got.memory.memory_id == recalled and got.memory.score is None
    assert (recall.returned, recall.withheld, got.returned, got.withheld) == (1, 0, 1, 0)
    assert all(type(n) is int for n in (recall.returned, recall.withheld, got.returned, got.withheld))
