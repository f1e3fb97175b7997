"""memgov_pg.langgraph: LangGraph's BaseStore on memgov, as a real memgov_writer login uses it.
Every put, delete and read is decided by the tenant's policy: a denied put raises and stores
nothing (its log row stays), a held put is invisible until a reviewer on another login approves
it, a quarantined put names its entry, a denied forget keeps the item, read rules withhold
items, and two tenants see nothing of each other."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp

from memgov_pg.deploy import deploy
from memgov_pg.errors import ConflictError, PolicyDeniedError, QuarantinedError
from memgov_pg.langgraph import AsyncMemgovStore, MemgovStore
from tests.attack_helpers import Logins, login_dsn

ORG = "lg-acme"
OTHER = "lg-globex"
STRICT = "lg-strict"  # an override: quarantines, refuses forgets, withholds reads

STRICT_POLICY = """\
version: "1.0.0-lg"
defaults: {on_policy_miss: allow}
rules:
  - {id: quarantine-constraints, priority: 1, category: constraint, action: quarantine}
  - id: keep-project-facts
    priority: 2
    category: project_fact
    condition: {operation_type: [forget]}
    action: deny
    reason_codes: [LEGAL_HOLD]
  - id: withhold-preferences
    priority: 3
    category: preference
    condition: {operation_type: [get, search]}
    action: deny
  - {id: recall, priority: 4, condition: {operation_type: [get, search]}, action: allow}
  - id: no-secrets-namespace
    priority: 5
    when: [{field: store.namespace, operator: regex, value: "^secrets(\\\\.|$)"}]
    action: deny
"""


@pytest.fixture(scope="module")
def policies(memgov_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    deploy(memgov_dsn, Path(__file__).resolve().parents[2] / "policies" / "default.yaml")
    strict = tmp_path_factory.mktemp("lg") / "strict.yaml"
    strict.write_text(STRICT_POLICY)
    deploy(memgov_dsn, strict, tenant=STRICT)


@pytest.fixture(scope="module")
def writer_dsn(memgov_dsn: str, logins: Logins, policies: None) -> str:
    return login_dsn(memgov_dsn, logins.writer)


@pytest.fixture(scope="module")
def su(memgov_dsn: str) -> Any:
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        yield conn


def rows(su: psycopg.Connection[Any], org: str, namespace: str) -> list[tuple[Any, ...]]:
    return su.execute(
        "SELECT item_key, fact_text, status FROM memgov.long_term_memory_items"
        " WHERE org_id = %s AND namespace = %s ORDER BY item_key",
        (org, namespace),
    ).fetchall()


def log_count(su: psycopg.Connection[Any], org: str, operation: str) -> int:
    return su.execute(
        "SELECT count(*) FROM memgov.decision_log WHERE org_id = %s AND operation = %s", (org, operation)
    ).fetchone()[0]


def test_put_get_search_list_delete_as_a_writer(writer_dsn, su):
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG) as store:
        store.setup()
        store.setup()  # idempotent
        puts = log_count(su, ORG, "remember")
        store.put(("users", "alice"), "prefs", {"food": "pizza", "n": 9})
        store.put(("users", "alice"), "other", {"food": "soup", "n": 10})
        store.put(("users", "bob"), "prefs", {"food": "tea", "n": 2})
        assert log_count(su, ORG, "remember") == puts + 3  # one log row per put

        item = store.get(("users", "alice"), "prefs")
        assert item is not None and item.value == {"food": "pizza", "n": 9}
        assert item.namespace == ("users", "alice") and item.key == "prefs"
        first = item.updated_at

        updates = log_count(su, ORG, "update")
        store.put(("users", "alice"), "prefs", {"food": "pasta", "n": 9})
        assert log_count(su, ORG, "update") == updates + 1
        again = store.get(("users", "alice"), "prefs")
        assert again.value == {"food": "pasta", "n": 9} and again.updated_at > first
        assert again.created_at == item.created_at
        assert rows(su, ORG, "users.alice") == [
            ("other", '{"food":"soup","n":10}', "active"),
            ("prefs", '{"food":"pasta","n":9}', "active"),
        ]  # one memory row per (tenant, namespace, key)

        assert [(i.namespace[1], i.key) for i in store.search(("users",))] == [
            ("alice", "prefs"),
            ("bob", "prefs"),
            ("alice", "other"),
        ]  # newest first
        assert {i.key for i in store.search(("users", "alice"))} == {"prefs", "other"}
        # numbers compare as numbers: 9 < 10 (as text "9" > "10")
        assert [i.value["n"] for i in store.search(("users",), filter={"n": {"$gt": 9}})] == [10]
        assert sorted(i.value["n"] for i in store.search(("users",), filter={"n": {"$lte": 9}})) == [2, 9]
        assert [i.value["food"] for i in store.search(("users",), filter={"food": {"$ne": "pasta"}}, limit=1)] == [
            "tea"
        ]
        assert [i.value["food"] for i in store.search(("users",), filter={"food": "soup"})] == ["soup"]
        hits = store.search(("users",), query="pasta")
        assert [i.key for i in hits] == ["prefs"] and hits[0].score > 0
        assert store.list_namespaces() == [("users", "alice"), ("users", "bob")]
        assert store.list_namespaces(max_depth=1) == [("users",)]
        assert store.list_namespaces(suffix=["bob"]) == [("users", "bob")]
        assert store.list_namespaces(limit=1, offset=1) == [("users", "bob")]

        forgets = log_count(su, ORG, "forget")
        store.delete(("users", "alice"), "prefs")
        assert store.get(("users", "alice"), "prefs") is None
        assert log_count(su, ORG, "forget") == forgets + 1
        results = store.batch(
            [
                PutOp(("users", "carol"), "k", {"v": 1}),
                GetOp(("users", "carol"), "k"),
                SearchOp(("users", "bob")),
                ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ]
        )
        assert results[0] is None and results[1] is None  # gets run before puts, as PostgresStore does
        assert [i.key for i in results[2]] == ["prefs"]
        assert store.get(("users", "carol"), "k").value == {"v": 1}


def test_a_denied_put_raises_stores_nothing_and_keeps_its_log_row(writer_dsn, su):
    describe = lambda ns, key, value: {"category": "temporary_context"}  # noqa: E731
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, describe=describe) as store:
        before = log_count(su, ORG, "remember")
        with pytest.raises(PolicyDeniedError) as denied:
            store.put(("denied",), "k", {"v": "scratch"})
        assert "deny-not-long-term" in denied.value.rule_ids
        assert rows(su, ORG, "denied") == []
        assert log_count(su, ORG, "remember") == before + 1
        assert store.get(("denied",), "k") is None


def test_a_held_put_is_invisible_until_a_reviewer_approves_it(writer_dsn, memgov_dsn, logins, su):
    describe = lambda ns, key, value: {"is_sensitive": True}  # noqa: E731
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, describe=describe) as store:
        store.put(("held",), "k", {"diagnosis": "Grippe, prüfen"})
        assert store.get(("held",), "k") is None
        assert store.search(("held",)) == []
        assert rows(su, ORG, "held") == [("k", '{"diagnosis":"Grippe, prüfen"}', "pending_approval")]
        with pytest.raises(ConflictError):  # a pending item cannot change
            store.put(("held",), "k", {"diagnosis": "other"})
        with psycopg.connect(login_dsn(memgov_dsn, logins.reviewer), autocommit=True) as reviewer:
            reviewer.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
            (request_id,) = reviewer.execute(
                "SELECT r.request_id FROM memgov.approval_requests r"
                " JOIN memgov.long_term_memory_items m ON m.memory_id = r.memory_id"
                " WHERE m.namespace = 'held' AND r.status = 'pending'"
            ).fetchone()
            reviewer.execute("SELECT memgov.approve(%s)", (request_id,))
        assert store.get(("held",), "k").value == {"diagnosis": "Grippe, prüfen"}


def test_two_tenants_see_nothing_of_each_other(writer_dsn):
    with (
        MemgovStore.from_conn_string(writer_dsn, org_id=ORG) as acme,
        MemgovStore.from_conn_string(writer_dsn, org_id=OTHER) as globex,
    ):
        acme.put(("shared",), "k", {"who": "acme"})
        assert globex.get(("shared",), "k") is None
        assert globex.search(("shared",)) == []
        assert ("shared",) not in globex.list_namespaces()
        globex.put(("shared",), "k", {"who": "globex"})  # its own item under the same address
        assert acme.get(("shared",), "k").value == {"who": "acme"}
        assert globex.get(("shared",), "k").value == {"who": "globex"}
        globex.delete(("shared",), "k")
        assert acme.get(("shared",), "k").value == {"who": "acme"}


def test_non_ascii_namespaces_keys_and_values(writer_dsn):
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG) as store:
        value = {"text": "Müller mag Käsespätzle 🧀 — 日本語のテキスト", "emoji": "👋"}
        store.put(("ünïcode", "名前"), "clé-🔑", value)
        assert store.get(("ünïcode", "名前"), "clé-🔑").value == value
        assert [i.key for i in store.search(("ünïcode",), query="Käsespätzle")] == ["clé-🔑"]
        assert [i.key for i in store.search(("ünïcode",), filter={"emoji": "👋"})] == ["clé-🔑"]
        assert store.list_namespaces(prefix=["ünïcode"]) == [("ünïcode", "名前")]


def test_quarantine_forget_denial_and_read_rules(writer_dsn, su):
    category = {"q": "constraint", "hold": "project_fact", "hidden": "preference"}
    describe = lambda ns, key, value: {"category": category.get(ns[0], "user_fact")}  # noqa: E731
    with MemgovStore.from_conn_string(writer_dsn, org_id=STRICT, describe=describe) as store:
        with pytest.raises(QuarantinedError) as quarantined:
            store.put(("q",), "k", {"v": 1})
        assert quarantined.value.quarantine_id is not None
        assert rows(su, STRICT, "q") == []

        store.put(("hold",), "k", {"v": 2})
        with pytest.raises(PolicyDeniedError) as denied:
            store.delete(("hold",), "k")
        assert denied.value.rule_ids == ["keep-project-facts"]
        assert store.get(("hold",), "k").value == {"v": 2}

        store.put(("hidden",), "k", {"v": 3})
        assert rows(su, STRICT, "hidden") == [("k", '{"v":3}', "active")]
        assert store.get(("hidden",), "k") is None
        assert store.search(("hidden",)) == []
        assert ("hidden",) not in store.list_namespaces()

        # policies read the item's address: store.namespace, store.key
        with pytest.raises(PolicyDeniedError) as denied:
            store.put(("secrets", "alice"), "k", {"v": 4})
        assert denied.value.rule_ids == ["no-secrets-namespace"]
        assert rows(su, STRICT, "secrets.alice") == []
        store.put(("secretsx",), "k", {"v": 5})
        assert store.get(("secretsx",), "k").value == {"v": 5}


def test_describe_sets_only_memgov_fields(writer_dsn):
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, describe=lambda *_: {"org_id": "x"}) as store:
        with pytest.raises(ValueError, match="org_id"):
            store.put(("d",), "k", {"v": 1})


def test_async_store(writer_dsn):
    async def scenario() -> None:
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG) as store:
            await store.setup()
            await store.aput(("async", "ns"), "k", {"n": 1})
            await store.aput(("async", "ns"), "k", {"n": 2})
            assert (await store.aget(("async", "ns"), "k")).value == {"n": 2}
            assert [i.value for i in await store.asearch(("async",), filter={"n": {"$gte": 2}})] == [{"n": 2}]
            assert await store.alist_namespaces(prefix=["async"]) == [("async", "ns")]
            await store.adelete(("async", "ns"), "k")
            assert await store.aget(("async", "ns"), "k") is None
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG, pool_config={"max_size": 2}) as store:
            await store.aput(("async", "pool"), "k", {"n": 3})
            assert (await store.aget(("async", "pool"), "k")).value == {"n": 3}

    asyncio.run(scenario())
