"""One engine, many callers: concurrent remember() calls through a psycopg_pool pool, as
a real writer login, with zero errors, every decision returned, and no pooled
connection (nor any backend of the login) left inside a transaction afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memgov_pg.decisions import Decision
from memgov_pg.deploy import deploy
from memgov_pg.engine import MemoryPolicyEngine, SyncMemoryPolicyEngine
from memgov_pg.errors import PolicyDeniedError
from tests.attack_helpers import ORG, Logins, login_dsn
from tests.waiting import DEADLINE

ROOT = Path(__file__).resolve().parents[2]


def item(n: int, **extra: Any) -> dict[str, Any]:
    return {"org_id": ORG, "project_id": "concurrency", "category": "user_fact", "fact_text": f"Fact number {n}",
            "source": "agent_extracted", "confidence": 0.9} | extra  # fmt: skip


@pytest.fixture(scope="module")
def writer_dsn(memgov_dsn: str, logins: Logins) -> Iterator[str]:
    deploy(memgov_dsn, ROOT / "policies" / "default.yaml")
    yield login_dsn(memgov_dsn, logins.writer)


def idle_in_transaction(memgov_dsn: str, role: str) -> int:
    """Backends of ``role`` in the test database that sit inside a transaction."""
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        row = su.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = %s"
            " AND state LIKE 'idle in transaction%%'",
            (role,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def stored(memgov_dsn: str, decisions: list[Decision]) -> int:
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        row = su.execute(
            "SELECT count(*) FROM memgov.long_term_memory_items WHERE memory_id = ANY(%s)",
            ([d.memory_id for d in decisions],),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def async_pool_is_clean(pool: AsyncConnectionPool[Any]) -> None:
    """Take every connection the pool may hold at once; each must be idle, outside a transaction."""
    async with AsyncExitStack() as stack:
        conns = [await stack.enter_async_context(pool.connection()) for _ in range(pool.max_size)]
        assert [c.info.transaction_status for c in conns] == [TransactionStatus.IDLE] * pool.max_size


def sync_pool_is_clean(pool: ConnectionPool[Any]) -> None:
    with ExitStack() as stack:
        conns = [stack.enter_context(pool.connection()) for _ in range(pool.max_size)]
        assert [c.info.transaction_status for c in conns] == [TransactionStatus.IDLE] * pool.max_size


def check_decisions(decisions: list[Any], n: int) -> None:
    assert len(decisions) == n
    assert all(isinstance(d, Decision) and d.action == "allow" and d.memory_id for d in decisions), decisions
    assert len({d.memory_id for d in decisions}) == n


def test_gather_100_calls_on_one_async_engine(writer_dsn: str, memgov_dsn: str, logins: Logins) -> None:
    async def scenario() -> list[Any]:
        async with await MemoryPolicyEngine.connect(writer_dsn, org_id=ORG, max_size=8) as engine:
            decisions = await asyncio.gather(*(engine.remember(item(n)) for n in range(100)))
            await async_pool_is_clean(engine.pool)
            return list(decisions)

    decisions = asyncio.run(scenario())
    check_decisions(decisions, 100)
    assert stored(memgov_dsn, decisions) == 100
    assert idle_in_transaction(memgov_dsn, logins.writer) == 0


def test_16_threads_on_one_sync_engine(writer_dsn: str, memgov_dsn: str, logins: Logins) -> None:
    with SyncMemoryPolicyEngine.connect(writer_dsn, org_id=ORG, max_size=4) as engine:
        with ThreadPoolExecutor(max_workers=16) as executor:
            decisions = list(executor.map(lambda n: engine.remember(item(1000 + n)), range(64)))
        sync_pool_is_clean(engine.pool)
        assert idle_in_transaction(memgov_dsn, logins.writer) == 0
    check_decisions(decisions, 64)
    assert stored(memgov_dsn, decisions) == 64


def test_pool_of_4_shared_by_64_tasks(writer_dsn: str, memgov_dsn: str, logins: Logins) -> None:
    async def scenario() -> tuple[list[Any], list[Any]]:
        # 64 tasks queue for 4 connections: each may wait as long as a loaded machine needs
        async with AsyncConnectionPool(writer_dsn, min_size=1, max_size=4, open=False, timeout=DEADLINE) as pool:
            await pool.open(wait=True, timeout=DEADLINE)
            engine = MemoryPolicyEngine.from_pool(pool)  # no tenant of its own: each task names one
            view = engine.for_tenant(ORG)

            async def task(n: int) -> Decision:
                return await view.remember(item(2000 + n))

            decisions = await asyncio.gather(*(task(n) for n in range(64)))
            # errors return their connection clean too
            denied = await asyncio.gather(
                *(view.remember(item(n, fact_text="password: hunter2hunter2")) for n in range(8)),
                return_exceptions=True,
            )
            await async_pool_is_clean(pool)
            assert idle_in_transaction(memgov_dsn, logins.writer) == 0
            await engine.close()  # a shared pool stays open
            assert not pool.closed
            return list(decisions), list(denied)

    decisions, denied = asyncio.run(scenario())
    check_decisions(decisions, 64)
    assert stored(memgov_dsn, decisions) == 64
    assert all(isinstance(e, PolicyDeniedError) and e.rule_id == "block-secrets" for e in denied), denied
