"""``MemoryPolicyEngine``: the Python face of the SQL engine.

Every method is one call of a ``memgov.*`` SQL function (or, for the review queues, a read
of them) on a connection taken from a ``psycopg_pool`` pool, in its own transaction, with
``memgov.org_id`` set for that transaction (``set_config(..., true)``). An item without
``org_id`` is in the engine's tenant. The connection goes back to the pool clean,
after an error too, so one engine serves concurrent tasks and threads. No rule is
evaluated here: the database decides, this module only carries the answer.

    async with await MemoryPolicyEngine.connect(dsn, org_id="acme", max_size=8) as engine:
        decision = await engine.remember({...})          # a Decision
        await engine.for_tenant("globex").evaluate({...})  # same pool, another tenant

``SyncMemoryPolicyEngine`` is the same over a ``ConnectionPool``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any, Self
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .decisions import Decision, FeedbackResult, QuarantineResult, Recall, ReviewResult
from .errors import (
    ConnectionFailed,
    HeldForApprovalError,
    MemgovError,
    PolicyDeniedError,
    QuarantinedError,
    RecallHeldError,
    RecallQuarantinedError,
    TenantRequiredError,
    engine_error,
)
from .resources import query
from .review import (
    QUARANTINE_STATUSES,
    REQUEST_STATUSES,
    ApprovalRecord,
    QuarantineRecord,
    list_params,
    not_found,
)
from .tenants import check_tenant_id

#: a memory item as the SQL functions take it (the JSON of docs/reference.md)
Item = Mapping[str, Any]


def _tenant(org_id: str | None) -> str:
    if org_id is None:
        raise TenantRequiredError("no tenant: give org_id= to the engine or call engine.for_tenant(org_id)")
    return org_id


def _translate(exc: psycopg.Error) -> MemgovError:
    """The memgov exception for a database error: MG403 / MG404 / MG409 / 42501 their own
    classes, any other SQLSTATE a SQLError, a lost connection ConnectionFailed."""
    translated = engine_error(exc)
    assert translated is not None  # every psycopg error has a translation
    return translated


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _id(value: UUID | str) -> str:
    if not isinstance(value, UUID | str):
        raise TypeError(f"an id is a uuid.UUID or its text, not {type(value).__name__}")
    return str(value)


def _filter(where: Mapping[str, Any], org_id: str | None) -> Jsonb:
    """A ``memgov.forget_where`` filter, in the engine's tenant when it names none (the
    database checks the rest: keys, values, a scope)."""
    if not isinstance(where, Mapping):
        raise TypeError(f"a filter is a mapping, not {type(where).__name__}")
    given = dict(where)
    if "org_id" not in given:
        given["org_id"] = _tenant(org_id)
    return Jsonb({k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in given.items()})


def _item(item: Item, org_id: str) -> Jsonb:
    """``item`` as the JSON the SQL functions take, in the engine's tenant when it names none
    (an item that names another tenant is sent as it is: the database refuses it)."""
    if not isinstance(item, Mapping):
        raise TypeError(f"an item is a mapping of the memory's columns, not {type(item).__name__}")
    values = dict(item)
    if values.get("org_id") is None:
        values["org_id"] = org_id
    return Jsonb(values)


def recall_query(
    text: str | Mapping[str, Any] | None, query: Mapping[str, Any] | None, filters: Mapping[str, Any]
) -> dict[str, Any]:
    """A recall query (docs/recall.md) from ``search``'s arguments: the text to look for, a
    ``query`` mapping and keyword filters. A mapping as ``text`` is the query (the form of
    0.1, ``search({"text": "tea"})``). Misuse is a TypeError that says how to call it."""
    if isinstance(text, Mapping):
        if query is not None:
            raise TypeError("search() got two queries: a mapping as its first argument and query=")
        text, query = None, text
    elif text is not None and not isinstance(text, str):
        raise TypeError(
            f"search() takes the text to look for as its first argument, a str, not {type(text).__name__};"
            " filters are keywords: search('tea', project_id='atlas', limit=5)"
        )
    if query is not None and not isinstance(query, Mapping):
        raise TypeError(f"search(query=...) takes a mapping of the query's keys, not {type(query).__name__}")
    merged = {**dict(query or {}), **filters}
    if text is not None:
        if "text" in merged:
            raise TypeError("search() got the text twice: as its first argument and in query=")
        merged["text"] = text
    return merged


class MemoryPolicyEngine:
    """Async engine over a ``psycopg_pool.AsyncConnectionPool``: safe for concurrent calls.

    Build it with :meth:`connect` (the engine owns and closes its pool) or :meth:`from_pool`
    (the caller's pool, left open by :meth:`close`).
    """

    def __init__(self, pool: AsyncConnectionPool[Any], *, org_id: str | None = None, owns_pool: bool = False) -> None:
        """An engine over ``pool`` acting in tenant ``org_id``; ``owns_pool``: :meth:`close` closes it."""
        self.pool = pool
        self.org_id = None if org_id is None else check_tenant_id(org_id)
        self._owns_pool = owns_pool

    @classmethod
    def from_pool(cls, pool: AsyncConnectionPool[Any], *, org_id: str | None = None) -> Self:
        """An engine over an existing (open) pool; the pool stays the caller's."""
        return cls(pool, org_id=org_id)

    @classmethod
    async def connect(
        cls, conninfo: str, *, org_id: str | None = None, min_size: int = 1, max_size: int = 4, **kwargs: Any
    ) -> Self:
        """Open a pool of ``min_size``..``max_size`` connections to ``conninfo`` and an engine over it.

        ``kwargs`` are connection parameters (``AsyncConnection.connect``). Raises
        ConnectionFailed when the first connection cannot be made.
        """
        from .db import describe, first_line

        if org_id is not None:
            check_tenant_id(org_id)  # before a connection is opened
        try:
            probe = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            raise ConnectionFailed(f"cannot connect to {describe(conninfo)}: {first_line(exc)}") from None
        await probe.close()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo, min_size=min_size, max_size=max_size, kwargs=kwargs or None, open=False
        )
        await pool.open(wait=True)
        return cls(pool, org_id=org_id, owns_pool=True)

    def for_tenant(self, org_id: str) -> MemoryPolicyEngine:
        """A light view of this engine acting in tenant ``org_id``, sharing its pool."""
        return MemoryPolicyEngine(self.pool, org_id=org_id)

    async def close(self) -> None:
        """Close the pool if this engine opened it (:meth:`connect`); a shared pool stays open."""
        if self._owns_pool:
            await self.pool.close()

    async def __aenter__(self) -> Self:
        """The engine itself; leaving the block calls :meth:`close`."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the engine (:meth:`close`)."""
        await self.close()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        org_id = _tenant(self.org_id)
        try:
            async with self.pool.connection() as conn, conn.transaction():
                await conn.execute(query("set_tenant"), {"org_id": org_id})
                yield conn
        except psycopg.Error as exc:  # psycopg_pool's PoolTimeout is one too
            raise _translate(exc) from exc

    async def _one(self, name: str, params: dict[str, Any]) -> Any:
        async with self._transaction() as conn:
            cur = await conn.execute(query(name), params)
            row = await cur.fetchone()
        return row[0] if row else None

    async def _rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            return await (await cur.execute(query(name), params)).fetchall()

    # -- decisions without writing -----------------------------------------------
    async def evaluate(self, item: Item, operation: str = "remember") -> Decision:
        """The decision the active policy takes on ``item`` (a dry run); an item without
        ``org_id`` is in the engine's tenant."""
        params = {"item": _item(item, _tenant(self.org_id)), "operation": operation}
        return Decision.from_json(_mapping(await self._one("evaluate", params)))

    async def explain(self, item: Item, operation: str = "remember") -> dict[str, Any]:
        """The decision of :meth:`evaluate` as JSON, with ``rules``: for every enabled write rule
        whether it matched and the first condition that failed (``memgov evaluate --explain``)."""
        params = {"item": _item(item, _tenant(self.org_id)), "operation": operation}
        return dict(_mapping(await self._one("explain", params)))

    async def should_store_in_long_term(self, item: Item) -> bool:
        """True when the policy would store ``item`` right away."""
        return (await self.evaluate(item)).action == "allow"

    async def requires_user_confirmation(self, item: Item) -> bool:
        """True when the policy would hold ``item`` for the user's approval."""
        return (await self.evaluate(item)).action == "require_approval"

    # -- reads -------------------------------------------------------------------------
    async def _recall(self, name: str, params: dict[str, Any]) -> Recall:
        async with self._transaction() as conn:
            cur = conn.cursor(row_factory=dict_row)
            rows = await (await cur.execute(query(name), params)).fetchall()
            outcome = await (await conn.execute(query("last_recall"))).fetchone()
        return Recall.from_rows(rows, _mapping(outcome[0] if outcome else None)).raise_for()

    async def search(
        self, text: str | Mapping[str, Any] | None = None, *, query: Mapping[str, Any] | None = None, **filters: Any
    ) -> Recall:
        """The tenant's memories that match ``text`` (a web-search style query) and the
        filters (``project_id``, ``categories``, ``min_confidence``, ``limit`` ...:
        docs/recall.md, as keywords or a ``query`` mapping), best first, as the policy allows:
        ``search("Atlas", project_id="p1", limit=5)``. Raises PolicyDeniedError,
        RecallHeldError or RecallQuarantinedError when it refuses, TypeError when misused."""
        return await self._recall("search", {"query": Jsonb(recall_query(text, query, filters))})

    async def get(self, memory_id: UUID | str) -> Recall:
        """One memory (``recall.memory``; None when there is no such active memory in the
        tenant), as the policy allows; raises like :meth:`search`."""
        return await self._recall("get", {"memory_id": _id(memory_id)})

    # -- writes --------------------------------------------------------------------
    async def remember(self, item: Item, *, raise_on_hold: bool = False) -> Decision:
        """Store ``item`` (without ``org_id``: in the engine's tenant) as the policy decides; raises
        PolicyDeniedError / QuarantinedError, and HeldForApprovalError for a held write when
        ``raise_on_hold``."""
        params = {"item": _item(item, _tenant(self.org_id))}
        decision = Decision.from_json(_mapping(await self._one("remember", params)))
        return decision.raise_for(held=raise_on_hold)

    async def forget(self, memory_id: UUID | str) -> Decision:
        """Delete a memory as the policy decides; raises PolicyDeniedError when it refuses."""
        return Decision.from_json(_mapping(await self._one("forget", {"memory_id": _id(memory_id)}))).raise_for()

    async def forget_where(self, where: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Forget every memory ``where`` matches (in the engine's tenant unless it names
        ``org_id``), each decided as :meth:`forget` decides one; nothing raises for a refused
        memory: returns the counts ``{forgotten, held, denied, pending, dry_run}``. ``dry_run``
        decides and counts and changes nothing. A malformed filter raises SQLError (22023)."""
        params = {"filter": _filter(where, self.org_id), "dry_run": dry_run}
        return dict(_mapping(await self._one("forget_where", params)))

    async def confirm(self, memory_id: UUID | str) -> FeedbackResult:
        """The user confirms a memory (reviewer role): its confidence rises, a pending one is approved."""
        return FeedbackResult.from_json(_mapping(await self._one("confirm", {"memory_id": _id(memory_id)})))

    async def reject(self, memory_id: UUID | str) -> FeedbackResult:
        """The user rejects a memory (reviewer role): its confidence falls, or it is deleted."""
        return FeedbackResult.from_json(_mapping(await self._one("reject", {"memory_id": _id(memory_id)})))

    async def edit(self, memory_id: UUID | str, new_text: str) -> FeedbackResult:
        """The user corrects a memory's text (reviewer role); raises PolicyDeniedError when refused."""
        result = FeedbackResult.from_json(
            _mapping(await self._one("edit", {"memory_id": _id(memory_id), "new_text": new_text}))
        )
        if result.decision is not None:
            result.decision.raise_for()
        return result

    async def approve(self, request_id: UUID | str, note: str | None = None) -> ReviewResult:
        """Approve a held write (reviewer role); the current policy re-decides it."""
        return ReviewResult.from_json(
            _mapping(await self._one("approve", {"request_id": _id(request_id), "note": note}))
        )

    async def deny(self, request_id: UUID | str, note: str | None = None) -> ReviewResult:
        """Deny a held write (reviewer role)."""
        return ReviewResult.from_json(_mapping(await self._one("deny", {"request_id": _id(request_id), "note": note})))

    async def apply_retention_policy(self, memory_id: UUID | str) -> dict[str, Any]:
        """Apply the retention sweep's rules to one memory now: ``{memory_id, deleted, reason, rule_id}``."""
        return dict(_mapping(await self._one("apply_retention", {"memory_id": _id(memory_id)})))

    # -- the review queues (reviewer role; docs/review.md) ---------------------------------
    async def list_approvals(self, status: str | None = "pending", *, limit: int = 50) -> tuple[ApprovalRecord, ...]:
        """The tenant's approval requests in ``status`` (None: every status), oldest first."""
        rows = await self._rows("approvals_list", list_params(REQUEST_STATUSES, status, limit, self.org_id, None))
        return tuple(ApprovalRecord.from_row(r) for r in rows)

    async def show_approval(self, request_id: UUID | str) -> ApprovalRecord:
        """One approval request of the tenant, its payload whole; NotFoundError (MG404) when there is none."""
        rows = await self._rows("approvals_list", list_params(REQUEST_STATUSES, None, 1, self.org_id, request_id))
        if not rows:
            raise not_found("approval request", request_id, self.org_id)
        return ApprovalRecord.from_row(rows[0])

    async def list_quarantine(self, status: str | None = "held", *, limit: int = 50) -> tuple[QuarantineRecord, ...]:
        """The tenant's quarantine entries in ``status`` (None: every status), oldest first."""
        rows = await self._rows("quarantine_list", list_params(QUARANTINE_STATUSES, status, limit, self.org_id, None))
        return tuple(QuarantineRecord.from_row(r) for r in rows)

    async def show_quarantine(self, quarantine_id: UUID | str) -> QuarantineRecord:
        """One quarantine entry of the tenant, its payload whole; NotFoundError (MG404) when there is none."""
        params = list_params(QUARANTINE_STATUSES, None, 1, self.org_id, quarantine_id)
        rows = await self._rows("quarantine_list", params)
        if not rows:
            raise not_found("quarantine entry", quarantine_id, self.org_id)
        return QuarantineRecord.from_row(rows[0])

    async def release_quarantine(self, quarantine_id: UUID | str) -> QuarantineResult:
        """Apply a quarantined write as it was made (never by the login that made it); raises
        PolicyDeniedError when the active policy now denies it."""
        params = {"quarantine_id": _id(quarantine_id)}
        return QuarantineResult.from_json(_mapping(await self._one("release_quarantine", params)))

    async def purge_quarantine(self, quarantine_id: UUID | str) -> QuarantineResult:
        """Erase a quarantined write's payload; the entry stays as a record."""
        params = {"quarantine_id": _id(quarantine_id)}
        return QuarantineResult.from_json(_mapping(await self._one("purge_quarantine", params)))


class SyncMemoryPolicyEngine:
    """The same engine over a ``psycopg_pool.ConnectionPool``: safe to share between threads."""

    def __init__(self, pool: ConnectionPool[Any], *, org_id: str | None = None, owns_pool: bool = False) -> None:
        """An engine over ``pool`` acting in tenant ``org_id``; ``owns_pool``: :meth:`close` closes it."""
        self.pool = pool
        self.org_id = None if org_id is None else check_tenant_id(org_id)
        self._owns_pool = owns_pool

    @classmethod
    def from_pool(cls, pool: ConnectionPool[Any], *, org_id: str | None = None) -> Self:
        """An engine over an existing (open) pool; the pool stays the caller's."""
        return cls(pool, org_id=org_id)

    @classmethod
    def connect(
        cls, conninfo: str, *, org_id: str | None = None, min_size: int = 1, max_size: int = 4, **kwargs: Any
    ) -> Self:
        """Open a pool of ``min_size``..``max_size`` connections to ``conninfo`` and an engine over it.

        ``kwargs`` are connection parameters. Raises ConnectionFailed when the first
        connection cannot be made.
        """
        from .db import connect

        if org_id is not None:
            check_tenant_id(org_id)  # before a connection is opened
        connect(conninfo, **kwargs).close()  # a clear error for a bad DSN or login
        pool: ConnectionPool[Any] = ConnectionPool(
            conninfo, min_size=min_size, max_size=max_size, kwargs=kwargs or None, open=False
        )
        pool.open(wait=True)
        return cls(pool, org_id=org_id, owns_pool=True)

    def for_tenant(self, org_id: str) -> SyncMemoryPolicyEngine:
        """A light view of this engine acting in tenant ``org_id``, sharing its pool."""
        return SyncMemoryPolicyEngine(self.pool, org_id=org_id)

    def close(self) -> None:
        """Close the pool if this engine opened it (:meth:`connect`); a shared pool stays open."""
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> Self:
        """The engine itself; leaving the block calls :meth:`close`."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the engine (:meth:`close`)."""
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        org_id = _tenant(self.org_id)
        try:
            with self.pool.connection() as conn, conn.transaction():
                conn.execute(query("set_tenant"), {"org_id": org_id})
                yield conn
        except psycopg.Error as exc:  # psycopg_pool's PoolTimeout is one too
            raise _translate(exc) from exc

    def _one(self, name: str, params: dict[str, Any]) -> Any:
        with self._transaction() as conn:
            row = conn.execute(query(name), params).fetchone()
        return row[0] if row else None

    def _rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self._transaction() as conn:
            return conn.cursor(row_factory=dict_row).execute(query(name), params).fetchall()

    def evaluate(self, item: Item, operation: str = "remember") -> Decision:
        """The decision the active policy takes on ``item`` (a dry run); an item without
        ``org_id`` is in the engine's tenant."""
        params = {"item": _item(item, _tenant(self.org_id)), "operation": operation}
        return Decision.from_json(_mapping(self._one("evaluate", params)))

    def explain(self, item: Item, operation: str = "remember") -> dict[str, Any]:
        """:meth:`evaluate` with every rule's outcome (see :meth:`MemoryPolicyEngine.explain`)."""
        params = {"item": _item(item, _tenant(self.org_id)), "operation": operation}
        return dict(_mapping(self._one("explain", params)))

    def should_store_in_long_term(self, item: Item) -> bool:
        """True when the policy would store ``item`` right away."""
        return self.evaluate(item).action == "allow"

    def requires_user_confirmation(self, item: Item) -> bool:
        """True when the policy would hold ``item`` for the user's approval."""
        return self.evaluate(item).action == "require_approval"

    # -- reads -------------------------------------------------------------------------
    def _recall(self, name: str, params: dict[str, Any]) -> Recall:
        with self._transaction() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(query(name), params).fetchall()
            outcome = conn.execute(query("last_recall")).fetchone()
        return Recall.from_rows(rows, _mapping(outcome[0] if outcome else None)).raise_for()

    def search(
        self, text: str | Mapping[str, Any] | None = None, *, query: Mapping[str, Any] | None = None, **filters: Any
    ) -> Recall:
        """The tenant's memories that match ``text`` and the filters, best first, as the policy
        allows (see :meth:`MemoryPolicyEngine.search`): ``search("Atlas", limit=5)``."""
        return self._recall("search", {"query": Jsonb(recall_query(text, query, filters))})

    def get(self, memory_id: UUID | str) -> Recall:
        """One memory, as the policy allows (see :meth:`MemoryPolicyEngine.get`)."""
        return self._recall("get", {"memory_id": _id(memory_id)})

    def remember(self, item: Item, *, raise_on_hold: bool = False) -> Decision:
        """Store ``item`` (without ``org_id``: in the engine's tenant) as the policy decides; raises
        PolicyDeniedError / QuarantinedError, and HeldForApprovalError for a held write when
        ``raise_on_hold``."""
        decision = Decision.from_json(_mapping(self._one("remember", {"item": _item(item, _tenant(self.org_id))})))
        return decision.raise_for(held=raise_on_hold)

    def forget(self, memory_id: UUID | str) -> Decision:
        """Delete a memory as the policy decides; raises PolicyDeniedError when it refuses."""
        return Decision.from_json(_mapping(self._one("forget", {"memory_id": _id(memory_id)}))).raise_for()

    def forget_where(self, where: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Forget every memory ``where`` matches (see :meth:`MemoryPolicyEngine.forget_where`)."""
        params = {"filter": _filter(where, self.org_id), "dry_run": dry_run}
        return dict(_mapping(self._one("forget_where", params)))

    def confirm(self, memory_id: UUID | str) -> FeedbackResult:
        """The user confirms a memory (reviewer role): its confidence rises, a pending one is approved."""
        return FeedbackResult.from_json(_mapping(self._one("confirm", {"memory_id": _id(memory_id)})))

    def reject(self, memory_id: UUID | str) -> FeedbackResult:
        """The user rejects a memory (reviewer role): its confidence falls, or it is deleted."""
        return FeedbackResult.from_json(_mapping(self._one("reject", {"memory_id": _id(memory_id)})))

    def edit(self, memory_id: UUID | str, new_text: str) -> FeedbackResult:
        """The user corrects a memory's text (reviewer role); raises PolicyDeniedError when refused."""
        result = FeedbackResult.from_json(
            _mapping(self._one("edit", {"memory_id": _id(memory_id), "new_text": new_text}))
        )
        if result.decision is not None:
            result.decision.raise_for()
        return result

    def approve(self, request_id: UUID | str, note: str | None = None) -> ReviewResult:
        """Approve a held write (reviewer role); the current policy re-decides it."""
        return ReviewResult.from_json(_mapping(self._one("approve", {"request_id": _id(request_id), "note": note})))

    def deny(self, request_id: UUID | str, note: str | None = None) -> ReviewResult:
        """Deny a held write (reviewer role)."""
        return ReviewResult.from_json(_mapping(self._one("deny", {"request_id": _id(request_id), "note": note})))

    def apply_retention_policy(self, memory_id: UUID | str) -> dict[str, Any]:
        """Apply the retention sweep's rules to one memory now: ``{memory_id, deleted, reason, rule_id}``."""
        return dict(_mapping(self._one("apply_retention", {"memory_id": _id(memory_id)})))

    # -- the review queues (see MemoryPolicyEngine) -----------------------------------------
    def list_approvals(self, status: str | None = "pending", *, limit: int = 50) -> tuple[ApprovalRecord, ...]:
        """The tenant's approval requests in ``status`` (None: every status), oldest first."""
        rows = self._rows("approvals_list", list_params(REQUEST_STATUSES, status, limit, self.org_id, None))
        return tuple(ApprovalRecord.from_row(r) for r in rows)

    def show_approval(self, request_id: UUID | str) -> ApprovalRecord:
        """One approval request of the tenant, its payload whole; NotFoundError (MG404) when there is none."""
        rows = self._rows("approvals_list", list_params(REQUEST_STATUSES, None, 1, self.org_id, request_id))
        if not rows:
            raise not_found("approval request", request_id, self.org_id)
        return ApprovalRecord.from_row(rows[0])

    def list_quarantine(self, status: str | None = "held", *, limit: int = 50) -> tuple[QuarantineRecord, ...]:
        """The tenant's quarantine entries in ``status`` (None: every status), oldest first."""
        rows = self._rows("quarantine_list", list_params(QUARANTINE_STATUSES, status, limit, self.org_id, None))
        return tuple(QuarantineRecord.from_row(r) for r in rows)

    def show_quarantine(self, quarantine_id: UUID | str) -> QuarantineRecord:
        """One quarantine entry of the tenant, its payload whole; NotFoundError (MG404) when there is none."""
        rows = self._rows("quarantine_list", list_params(QUARANTINE_STATUSES, None, 1, self.org_id, quarantine_id))
        if not rows:
            raise not_found("quarantine entry", quarantine_id, self.org_id)
        return QuarantineRecord.from_row(rows[0])

    def release_quarantine(self, quarantine_id: UUID | str) -> QuarantineResult:
        """Apply a quarantined write as it was made (never by the login that made it); raises
        PolicyDeniedError when the active policy now denies it."""
        params = {"quarantine_id": _id(quarantine_id)}
        return QuarantineResult.from_json(_mapping(self._one("release_quarantine", params)))

    def purge_quarantine(self, quarantine_id: UUID | str) -> QuarantineResult:
        """Erase a quarantined write's payload; the entry stays as a record."""
        params = {"quarantine_id": _id(quarantine_id)}
        return QuarantineResult.from_json(_mapping(self._one("purge_quarantine", params)))


__all__ = [
    "ApprovalRecord",
    "Decision",
    "FeedbackResult",
    "HeldForApprovalError",
    "Item",
    "MemoryPolicyEngine",
    "PolicyDeniedError",
    "QuarantineRecord",
    "QuarantineResult",
    "QuarantinedError",
    "Recall",
    "RecallHeldError",
    "RecallQuarantinedError",
    "ReviewResult",
    "SyncMemoryPolicyEngine",
    "TenantRequiredError",
]
