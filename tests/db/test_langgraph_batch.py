"""memgov_pg.langgraph_batch: AsyncMemgovStore's concurrent calls, batched per loop tick, as a
real memgov_writer login makes them. Each put stays its own decision with its own log row
(never merged with another put of its key), an error reaches only its caller, identical
concurrent reads are read once, and a pool runs the puts of different items at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from memgov_pg.errors import PolicyDeniedError, QuarantinedError
from memgov_pg.langgraph import AsyncMemgovStore
from tests.db import test_langgraph as lg
from tests.db.test_langgraph import ORG, STRICT, log_count, rows

policies, su, writer_dsn = lg.policies, lg.su, lg.writer_dsn  # the fixtures of test_langgraph.py

N = 60  # items per scenario: enough for every batch to hold many calls of each kind


async def load(store: AsyncMemgovStore, prefix: str) -> list[Any]:
    """N items put, read, put again, read and listed by concurrent tasks; half of them deleted."""
    calls = []
    for i in range(N):
        ns = (prefix, str(i % 3))
        calls += [
            store.aput(ns, f"k{i}", {"n": i}),
            store.aget(ns, f"k{i}"),
            store.asearch((prefix,), limit=100),
            store.alist_namespaces(prefix=[prefix]),
            store.aput(ns, f"k{i}", {"n": i, "again": True}),
        ]
        if i % 2:
            calls.append(store.adelete(ns, f"k{i}"))
    return await asyncio.gather(*calls)


async def check_load(store: AsyncMemgovStore, prefix: str, su: Any, before: dict[str, int]) -> None:
    """What :func:`load` leaves: each put and delete its own decision and log row (none merged
    with another of its key), the even items stored with their last value, the odd ones gone."""
    assert log_count(su, ORG, "remember") - before["remember"] == N
    assert log_count(su, ORG, "update") - before["update"] == N
    assert log_count(su, ORG, "forget") - before["forget"] == N // 2
    stored = [r for ns in range(3) for r in rows(su, ORG, f"{prefix}.{ns}")]
    assert sorted(int(k[1:]) for k, _, _ in stored) == list(range(0, N, 2))
    assert all(status == "active" for _, _, status in stored)
    for i in range(N):
        item = await store.aget((prefix, str(i % 3)), f"k{i}")
        assert item is None if i % 2 else item.value == {"n": i, "again": True}


def counts(su: Any) -> dict[str, int]:
    return {op: log_count(su, ORG, op) for op in ("remember", "update", "forget", "get")}


@pytest.mark.parametrize("pool", [False, True], ids=["connection", "pool"])
def test_many_concurrent_calls_each_put_decided_and_logged(writer_dsn, su, pool):
    prefix = f"load{int(pool)}"

    async def scenario() -> None:
        kwargs: dict[str, Any] = {"pool_config": {"min_size": 1, "max_size": 4}} if pool else {}
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG, **kwargs) as store:
            before = counts(su)
            results = await load(store, prefix)
            assert len(results) == N * 5 + N // 2
            assert not [r for r in results if isinstance(r, BaseException)]
            await check_load(store, prefix, su, before)

    asyncio.run(scenario())


def test_one_denied_put_among_many_raises_for_its_caller_only(writer_dsn, su):
    describe = lambda ns, key, value: {"category": "constraint" if ns[0] == "q" else "user_fact"}  # noqa: E731

    async def scenario() -> None:
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=STRICT, describe=describe) as store:
            before = log_count(su, STRICT, "remember")
            calls = [store.aput(("many",), f"k{i}", {"n": i}) for i in range(N)]
            calls.insert(N // 2, store.aput(("secrets", "alice"), "k", {"v": "denied"}))
            calls.insert(N // 3, store.aput(("q",), "k", {"v": "quarantined"}))
            results = await asyncio.gather(*calls, return_exceptions=True)
            denied = [r for r in results if isinstance(r, PolicyDeniedError)]
            quarantined = [r for r in results if isinstance(r, QuarantinedError)]
            assert len(denied) == 1 and denied[0].rule_ids == ["no-secrets-namespace"]
            assert results[N // 2 + 1] is denied[0]  # its own caller's
            assert len(quarantined) == 1 and results[N // 3] is quarantined[0]
            assert [r for r in results if r is not None and r not in denied + quarantined] == []
            assert rows(su, STRICT, "secrets.alice") == [] and rows(su, STRICT, "q") == []
            assert [int(k[1:]) for k, _, _ in rows(su, STRICT, "many")] == sorted(range(N), key=lambda i: f"k{i}")
            # one log row per put: the N stored, the denied one (kept) and the quarantined one
            assert log_count(su, STRICT, "remember") - before == N + 2
            assert await store.aget(("secrets", "alice"), "k") is None

    asyncio.run(scenario())


def test_concurrent_puts_of_one_key_are_each_decided_in_order(writer_dsn, su):
    async def scenario() -> None:
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG) as store:
            before = counts(su)
            await asyncio.gather(*(store.aput(("one",), "k", {"n": i}) for i in range(10)))
            assert (await store.aget(("one",), "k")).value == {"n": 9}  # the last call wins
            after = counts(su)
            assert (after["remember"] - before["remember"], after["update"] - before["update"]) == (1, 9)

    asyncio.run(scenario())


def test_identical_concurrent_reads_are_read_once_and_a_failing_read_fails_alone(writer_dsn, su):
    async def scenario() -> None:
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG) as store:
            await store.aput(("dedupe",), "k", {"n": 1})
            before = log_count(su, ORG, "get")
            got = await asyncio.gather(*(store.aget(("dedupe",), "k") for _ in range(5)))
            assert [item.value for item in got] == [{"n": 1}] * 5
            assert log_count(su, ORG, "get") - before == 1  # one governed read, one decision

            results = await asyncio.gather(
                store.aget(("dedupe",), "k"),
                store.asearch(("dedupe",), filter={"n": {"$regex": "x"}}),
                store.asearch(("dedupe",), filter={"n": 1}),
                return_exceptions=True,
            )
            assert results[0].value == {"n": 1}
            assert isinstance(results[1], ValueError) and "$regex" in str(results[1])
            assert [i.key for i in results[2]] == ["k"]

    asyncio.run(scenario())


def test_sync_calls_from_other_threads_are_batched_too(writer_dsn):
    async def scenario() -> None:
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG) as store:

            def work(i: int) -> Any:
                store.put(("threads",), f"k{i}", {"n": i})
                return store.get(("threads",), f"k{i}").value

            values = await asyncio.gather(*(asyncio.to_thread(work, i) for i in range(8)))
            assert values == [{"n": i} for i in range(8)]
            with pytest.raises(asyncio.InvalidStateError):
                store.get(("threads",), "k0")  # on the store's own loop: refused

    asyncio.run(scenario())
