"""TTL of the governed LangGraph store, as real logins use it: a writer names a time to live
(ttl_minutes), the engine sets expires_at from it (never past the retention policy's expiry),
a read refreshes it (memgov.refresh_ttl), an expired memory is never returned, swept or not,
and a writer's sweeper (memgov.sweep_expired) deletes its own tenant's expired memories only,
logged as the sweep logs. Each attack is refused and leaves every table, log and queue as it was.

"Time passes" by moving expires_at or created_at as memgov_owner (the engine's own path), so
no test waits for a clock."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from typing import Any

import psycopg
import pytest

pytest.importorskip("langgraph.store.base")

from memgov_pg.langgraph import AsyncMemgovStore, MemgovStore
from memgov_pg.langgraph_ttl import check_ttl_config, ttl_minutes
from tests.attack_helpers import ORG, OTHER, Logins, as_json, bind, item, login_dsn, refused, unchanged

NS = "users.alice"


def remember(conn: psycopg.Connection[Any], key: str, *, org: str = ORG, kind: str = "allowed",
             **extra: Any) -> uuid.UUID:  # fmt: skip
    """A store item put through memgov.remember by ``conn``'s login; its memory_id."""
    row = item(kind, org, namespace=NS, item_key=key, **extra)
    got = conn.execute("SELECT memgov.remember(%s)", (as_json(row),)).fetchone()[0]
    assert got["action"] == "allow", got
    return uuid.UUID(got["memory_id"])


def stored(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> dict[str, Any] | None:
    cur = su.execute(
        "SELECT created_at, updated_at, expires_at, ttl_minutes, fact_text FROM memgov.long_term_memory_items"
        " WHERE memory_id = %s",
        (memory_id,),
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([c.name for c in cur.description or ()], row, strict=True))


def move(su: psycopg.Connection[Any], memory_id: uuid.UUID, column: str, to: str) -> None:
    """Let time pass for one memory: set an engine column to ``now() + to`` as memgov_owner."""
    assert column in ("expires_at", "created_at")
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            f"UPDATE memgov.long_term_memory_items SET {column} = now() + %s::interval WHERE memory_id = %s",
            (to, memory_id),
        )


def expire(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> None:
    move(su, memory_id, "expires_at", "-1 minute")


def ttl_deletions(su: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return su.execute(
        "SELECT org_id, reason, run_id, memory_ids FROM memgov.deletion_log WHERE reason = 'ttl' ORDER BY deletion_id"
    ).fetchall()


@pytest.fixture
def gwriter(login, logins: Logins) -> psycopg.Connection[Any]:
    return login(logins.gwriter, OTHER)


# -- the engine sets the expiry ------------------------------------------------------------


def test_the_engine_sets_expires_at_from_ttl_minutes(su, writer):
    memory_id = remember(writer, "k", ttl_minutes=30)
    row = stored(su, memory_id)
    assert row["ttl_minutes"] == 30 and row["expires_at"] - row["created_at"] == dt.timedelta(minutes=30)
    # no TTL: no expiry, as before
    assert stored(su, remember(writer, "none"))["expires_at"] is None
    # an update starts the TTL again from its own time, and may change or drop it
    writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = 5 WHERE memory_id = %s", (memory_id,))
    row = stored(su, memory_id)
    assert row["expires_at"] - row["updated_at"] == dt.timedelta(minutes=5)
    writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = NULL WHERE memory_id = %s", (memory_id,))
    assert stored(su, memory_id)["expires_at"] is None


def test_a_ttl_never_outlives_the_retention_policy(su, writer):
    week = dt.timedelta(days=7)
    memory_id = remember(writer, "k", retention_policy="ttl_7d", ttl_minutes=30 * 24 * 60)
    row = stored(su, memory_id)
    assert row["expires_at"] - row["created_at"] == week  # 30 days asked, 7 promised
    move(su, memory_id, "created_at", "-7 days 1 minute")  # a minute before its retention ends
    with writer.transaction():
        assert writer.execute("SELECT memgov.refresh_ttl(%s)", ([memory_id],)).fetchone()[0] == 1
    row = stored(su, memory_id)
    assert row["expires_at"] - row["created_at"] == week  # the refresh is capped too


def test_writers_name_a_duration_never_a_time(su, writer):
    memory_id = remember(writer, "k", ttl_minutes=10)
    for ttl in (0, -5):
        with refused(su, "23514"):
            writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = %s WHERE memory_id = %s",
                           (ttl, memory_id))  # fmt: skip
        with refused(su, "23514"):
            writer.execute("SELECT memgov.remember(%s)", (as_json(item(ttl_minutes=ttl, namespace=NS, item_key="x")),))
    with refused(su, "42501"):  # expires_at is the engine's column
        writer.execute(
            "UPDATE memgov.long_term_memory_items SET expires_at = now() - interval '1 day' WHERE memory_id = %s",
            (memory_id,),
        )
    with refused(su, "42501"):
        writer.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence, expires_at)"
            " VALUES (%s, 'user_fact', 'x', 'agent_extracted', 0.9, now() - interval '1 day')",
            (OTHER,),
        )


def test_a_ttl_on_a_held_memory_is_a_forget_its_rules_refuse(su, writer, gwriter):
    held = remember(writer, "held", kind="legal")  # legal-hold-no-forget denies its forget
    with refused(su, "MG403"):
        writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = 1 WHERE memory_id = %s", (held,))
    theirs = remember(gwriter, "theirs", org=OTHER)
    with unchanged(su, "a TTL on another tenant's memory"):
        cur = writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = 1 WHERE memory_id = %s", (theirs,))
        assert cur.rowcount == 0


# -- refresh ---------------------------------------------------------------------------------


def test_refresh_starts_the_ttl_again_and_keeps_updated_at(su, writer):
    memory_id = remember(writer, "k", ttl_minutes=10)
    no_ttl = remember(writer, "plain")
    move(su, memory_id, "expires_at", "1 minute")  # nine minutes have passed
    before = stored(su, memory_id)
    with writer.transaction():
        refreshed = writer.execute("SELECT memgov.refresh_ttl(%s)", ([memory_id, no_ttl],)).fetchone()[0]
        now = writer.execute("SELECT now()").fetchone()[0]
    after = stored(su, memory_id)
    assert refreshed == 1
    assert after["expires_at"] == now + dt.timedelta(minutes=10)
    assert after["updated_at"] == before["updated_at"] and after["fact_text"] == before["fact_text"]
    assert stored(su, no_ttl)["expires_at"] is None


def test_refresh_never_brings_back_an_expired_memory_nor_reaches_another_tenant(su, writer, gwriter):
    gone = remember(writer, "gone", ttl_minutes=10)
    expire(su, gone)
    theirs = remember(gwriter, "theirs", org=OTHER, ttl_minutes=10)
    move(su, theirs, "expires_at", "1 minute")
    with unchanged(su, "a refresh of an expired memory and of another tenant's"):
        assert writer.execute("SELECT memgov.refresh_ttl(%s)", ([gone, theirs],)).fetchone()[0] == 0


def test_a_bound_writer_cannot_refresh_or_sweep_in_another_tenant(su, login, logins):
    theirs = remember(login(logins.gwriter, OTHER), "theirs", org=OTHER, ttl_minutes=10)
    expire(su, theirs)
    bind(su, logins.bound, ORG)
    intruder = login(logins.bound, OTHER)  # bound to acme, asks for globex
    with refused(su, "42501"):
        intruder.execute("SELECT memgov.refresh_ttl(%s)", ([theirs],))
    with refused(su, "42501"):
        intruder.execute("SELECT memgov.sweep_expired(100)")
    with refused(su, "42501"):
        login(logins.bound, None).execute("SELECT memgov.sweep_expired(100)")  # no tenant at all


def test_clients_without_the_writer_role_cannot_refresh_or_sweep(su, reviewer, login, logins):
    memory_id = remember(login(logins.writer), "k", ttl_minutes=10)
    expire(su, memory_id)
    for conn in (reviewer, login(logins.nobody)):
        with refused(su, "42501"):
            conn.execute("SELECT memgov.sweep_expired(100)")
        with refused(su, "42501"):
            conn.execute("SELECT memgov.refresh_ttl(%s)", ([memory_id],))


# -- expired memories are gone -----------------------------------------------------------------


def test_an_expired_memory_is_never_returned_swept_or_not(su, writer, reviewer):
    gone = remember(writer, "gone", ttl_minutes=10)
    kept = remember(writer, "kept", ttl_minutes=10)
    expire(su, gone)
    assert stored(su, gone) is not None  # unswept
    ids = {r[0] for r in writer.execute("SELECT memory_id FROM memgov.long_term_memory_items")}
    assert ids == {kept}
    assert {r[0] for r in reviewer.execute("SELECT memory_id FROM memgov.long_term_memory_items")} == {kept}
    assert writer.execute("SELECT * FROM memgov.get(%s)", (gone,)).fetchall() == []
    assert {r[0] for r in writer.execute("SELECT memory_id FROM memgov.search('{}')")} == {kept}
    with unchanged(su, "an UPDATE of an expired memory"):  # it would start the TTL again
        cur = writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = 60 WHERE memory_id = %s", (gone,))
        assert cur.rowcount == 0
    # an UPDATE without WHERE reaches the live memory only
    assert writer.execute("UPDATE memgov.long_term_memory_items SET ttl_minutes = 60").rowcount == 1
    assert stored(su, gone)["ttl_minutes"] == 10 and stored(su, kept)["ttl_minutes"] == 60


# -- the writer's sweep ----------------------------------------------------------------------


def test_sweep_expired_deletes_the_own_tenants_expired_memories_and_logs_them(su, writer, gwriter):
    item_ttl = remember(writer, "ttl", ttl_minutes=10)
    week = remember(writer, "week", retention_policy="ttl_7d")
    live = remember(writer, "live", ttl_minutes=10)
    held = remember(writer, "held", kind="legal", ttl_minutes=10)  # a forget rule holds it
    theirs = remember(gwriter, "theirs", org=OTHER, ttl_minutes=10)
    for memory_id in (item_ttl, held, theirs):
        expire(su, memory_id)
    move(su, week, "created_at", "-8 days")

    assert writer.execute("SELECT memgov.sweep_expired(1000)").fetchone()[0] == 2
    assert stored(su, item_ttl) is None and stored(su, week) is None
    assert all(stored(su, m) is not None for m in (live, held, theirs))
    assert ttl_deletions(su) == [(ORG, "ttl", None, sorted([item_ttl, week]))]
    with unchanged(su, "a second sweep"):
        assert writer.execute("SELECT memgov.sweep_expired(1000)").fetchone()[0] == 0
    # the other tenant's writer sweeps its own
    assert gwriter.execute("SELECT memgov.sweep_expired()").fetchone()[0] == 1
    assert stored(su, theirs) is None and ttl_deletions(su)[-1][:2] == (OTHER, "ttl")


def test_sweep_expired_cannot_delete_what_has_not_expired(su, writer):
    remember(writer, "a", ttl_minutes=1)
    remember(writer, "b", retention_policy="ttl_7d")
    remember(writer, "c")
    with unchanged(su, "a sweep of live memories"):
        assert writer.execute("SELECT memgov.sweep_expired(1000)").fetchone()[0] == 0
    for size in (0, -1, 10001, None):
        with refused(su, "22023"):
            writer.execute("SELECT memgov.sweep_expired(%s)", (size,))


def test_sweep_expired_takes_batches(su, writer):
    ids = [remember(writer, f"k{i}", ttl_minutes=10) for i in range(3)]
    for memory_id in ids:
        expire(su, memory_id)
    assert writer.execute("SELECT memgov.sweep_expired(2)").fetchone()[0] == 2
    assert writer.execute("SELECT memgov.sweep_expired(2)").fetchone()[0] == 1
    assert [len(r[3]) for r in ttl_deletions(su)] == [2, 1]


# -- the store -----------------------------------------------------------------------------------


def test_ttl_minutes_and_config():
    assert [ttl_minutes(t) for t in (None, 0.1, 1, 1.5, 60)] == [None, 1, 1, 2, 60]
    for bad in (0, -1, float("nan"), float("inf"), True, "5"):
        with pytest.raises(ValueError):
            ttl_minutes(bad)  # type: ignore[arg-type]
    assert check_ttl_config(None) is None
    assert check_ttl_config({"default_ttl": 5, "refresh_on_read": False}) == {
        "default_ttl": 5,
        "refresh_on_read": False,
    }
    with pytest.raises(ValueError):
        check_ttl_config({"default_tll": 5})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValueError):
        check_ttl_config({"sweep_interval_minutes": 0})


def store_row(su: psycopg.Connection[Any], namespace: str, key: str) -> dict[str, Any] | None:
    got = su.execute(
        "SELECT memory_id FROM memgov.long_term_memory_items WHERE org_id = %s AND namespace = %s AND item_key = %s",
        (ORG, namespace, key),
    ).fetchone()
    return None if got is None else stored(su, got[0]) | {"memory_id": got[0]}


def test_the_store_puts_refreshes_and_sweeps_as_a_writer(su, memgov_dsn, logins):
    config = {"default_ttl": 0.5, "refresh_on_read": False}
    with MemgovStore.from_conn_string(login_dsn(memgov_dsn, logins.writer), org_id=ORG, ttl=config) as store:
        assert store.supports_ttl
        store.put(("users",), "default", {"v": 1})  # default_ttl 0.5: one whole minute
        store.put(("users",), "hour", {"v": 2}, ttl=60)
        store.put(("users",), "forever", {"v": 3}, ttl=None)
        assert store_row(su, "users", "default")["ttl_minutes"] == 1
        assert store_row(su, "users", "hour")["ttl_minutes"] == 60
        assert store_row(su, "users", "forever")["ttl_minutes"] is None

        hour = store_row(su, "users", "hour")
        move(su, hour["memory_id"], "expires_at", "1 minute")
        before = store_row(su, "users", "hour")["expires_at"]
        assert store.get(("users",), "hour").value == {"v": 2}  # refresh_on_read False: not refreshed
        assert store_row(su, "users", "hour")["expires_at"] == before
        store.get(("users",), "hour", refresh_ttl=True)
        assert store_row(su, "users", "hour")["expires_at"] > before
        move(su, hour["memory_id"], "expires_at", "1 minute")
        before = store_row(su, "users", "hour")["expires_at"]
        assert [i.key for i in store.search(("users",), refresh_ttl=True)] == ["forever", "hour", "default"]
        assert store_row(su, "users", "hour")["expires_at"] > before

        # expired: gone for get, search and list_namespaces, before any sweep
        expire(su, store_row(su, "users", "default")["memory_id"])
        assert store.get(("users",), "default") is None
        assert [i.key for i in store.search(("users",))] == ["forever", "hour"]
        # a put of the expired key sweeps what hides it and remembers the new value
        store.put(("users",), "default", {"v": 4}, ttl=None)
        assert store.get(("users",), "default").value == {"v": 4}
        assert [r[0] for r in ttl_deletions(su)] == [ORG]

        expire(su, store_row(su, "users", "hour")["memory_id"])
        assert store.sweep_ttl() == 1 and store_row(su, "users", "hour") is None
        assert store.list_namespaces() == [("users",)]


def wait_for(check, seconds: float = 60.0) -> bool:
    """Whether ``check()`` holds within ``seconds`` (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_the_sweeper_thread_sweeps_as_a_writer_login(su, memgov_dsn, logins):
    config = {"default_ttl": 10, "sweep_interval_minutes": 0.001}
    with MemgovStore.from_conn_string(login_dsn(memgov_dsn, logins.writer), org_id=ORG, ttl=config) as store:
        store.put(("s",), "gone", {"v": 1})
        store.put(("s",), "kept", {"v": 2})
        expire(su, store_row(su, "s", "gone")["memory_id"])
        future = store.start_ttl_sweeper()
        thread = store._ttl_sweeper_thread
        store.start_ttl_sweeper()  # a second start: the same thread runs on
        assert store._ttl_sweeper_thread is thread
        assert wait_for(lambda: store_row(su, "s", "gone") is None)
        assert store.stop_ttl_sweeper(timeout=30)
        assert future.result(timeout=30) is None
        assert store_row(su, "s", "kept") is not None and [r[0] for r in ttl_deletions(su)] == [ORG]


def test_the_async_store_and_its_sweeper_task(su, memgov_dsn, logins):
    async def main() -> None:
        config = {"default_ttl": 10, "sweep_interval_minutes": 0.001}
        dsn = login_dsn(memgov_dsn, logins.writer)
        async with AsyncMemgovStore.from_conn_string(dsn, org_id=ORG, ttl=config) as store:
            await store.aput(("a",), "gone", {"v": 1}, ttl=5)
            await store.aput(("a",), "kept", {"v": 2})
            assert store_row(su, "a", "gone")["ttl_minutes"] == 5
            assert store_row(su, "a", "kept")["ttl_minutes"] == 10
            before = store_row(su, "a", "kept")["expires_at"]
            move(su, store_row(su, "a", "kept")["memory_id"], "expires_at", "1 minute")
            await store.aget(("a",), "kept")  # refresh_on_read defaults to true
            assert store_row(su, "a", "kept")["expires_at"] >= before
            expire(su, store_row(su, "a", "gone")["memory_id"])
            assert await store.aget(("a",), "gone") is None
            task = await store.start_ttl_sweeper()
            deadline = time.monotonic() + 60
            while store_row(su, "a", "gone") is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert store_row(su, "a", "gone") is None
            assert await store.stop_ttl_sweeper(timeout=30) and task.done()
            assert store_row(su, "a", "kept") is not None

    asyncio.run(main())


def test_search_pages_over_live_items_only(su, memgov_dsn, logins):
    with MemgovStore.from_conn_string(
        login_dsn(memgov_dsn, logins.writer), org_id=ORG, ttl={"default_ttl": 10}
    ) as store:
        for key in ("c", "b", "expired", "a"):  # newest last
            store.put(("page",), key, {"k": key})
        expire(su, store_row(su, "page", "expired")["memory_id"])
        assert [i.key for i in store.search(("page",), limit=2, offset=0)] == ["a", "b"]
        assert [i.key for i in store.search(("page",), limit=2, offset=2)] == ["c"]
        assert store.list_namespaces(prefix=("page",)) == [("page",)]
        expired_only = ("page", "gone")
        store.put(expired_only, "x", {"k": "x"})
        expire(su, store_row(su, "page.gone", "x")["memory_id"])
        assert expired_only not in store.list_namespaces(prefix=("page",))
