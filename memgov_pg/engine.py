"""``MemoryPolicyEngine``: the Python face of the SQL engine.

Every method is one call of a ``memgov.*`` SQL function in its own
transaction, with ``memgov.org_id`` set for that transaction. No rule is
evaluated here: the database decides, this module only carries the answer.

    async with await MemoryPolicyEngine.connect(dsn, org_id="acme") as engine:
        decision = await engine.remember({...})

``SyncMemoryPolicyEngine`` is the same over a synchronous connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Self
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from .errors import PolicyDeniedError, QuarantinedError
from .resources import query
from .tenants import check_tenant_id

Item = Mapping[str, Any]
Decision = dict[str, Any]


def _raise_for(decision: Decision) -> Decision:
    """Turn a refused write into its exception; pass any other decision through."""
    if decision.get("action") == "deny" and decision.get("enforced", True):
        raise PolicyDeniedError(decision)
    if decision.get("action") == "quarantine" and decision.get("enforced", True):
        raise QuarantinedError(decision)
    return decision


def _translate(exc: psycopg.Error) -> Exception:
    """MG403 from the trigger (an UPDATE or DELETE the policy denies) becomes PolicyDeniedError."""
    if exc.sqlstate == "MG403" and exc.diag.message_detail:
        try:
            return PolicyDeniedError(json.loads(exc.diag.message_detail))
        except ValueError:
            pass
    return exc


class _Calls:
    """The statements behind each method: (query name, parameters, result handling)."""

    @staticmethod
    def evaluate(item: Item, operation: str) -> tuple[str, dict[str, Any]]:
        return query("evaluate"), {"item": Jsonb(dict(item)), "operation": operation}

    @staticmethod
    def remember(item: Item) -> tuple[str, dict[str, Any]]:
        return query("remember"), {"item": Jsonb(dict(item))}

    @staticmethod
    def by_id(name: str, key: str, value: UUID | str, **extra: Any) -> tuple[str, dict[str, Any]]:
        return query(name), {key: str(value), **extra}


class MemoryPolicyEngine:
    """Async engine over a psycopg ``AsyncConnection`` (one call at a time)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], *, org_id: str | None = None) -> None:
        self.conn = conn
        self.org_id = None if org_id is None else check_tenant_id(org_id)

    @classmethod
    async def connect(cls, conninfo: str, *, org_id: str | None = None, **kwargs: Any) -> Self:
        from .db import describe, first_line
        from .errors import ConnectionFailed

        if org_id is not None:
            check_tenant_id(org_id)  # before a connection is opened
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            raise ConnectionFailed(f"cannot connect to {describe(conninfo)}: {first_line(exc)}") from None
        return cls(conn, org_id=org_id)

    async def close(self) -> None:
        await self.conn.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _one(self, statement: str, params: dict[str, Any]) -> Any:
        try:
            async with self.conn.transaction():
                if self.org_id is not None:
                    await self.conn.execute(query("set_tenant"), {"org_id": self.org_id})
                cur = await self.conn.execute(statement, params)
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise _translate(exc) from None
        return row[0] if row else None

    # -- decisions without writing -----------------------------------------------
    async def evaluate(self, item: Item, operation: str = "remember") -> Decision:
        """The decision the active policy takes on ``item`` (a dry run)."""
        return dict(await self._one(*_Calls.evaluate(item, operation)))

    async def should_store_in_long_term(self, item: Item) -> bool:
        """True when the policy would store ``item`` right away."""
        return (await self.evaluate(item))["action"] == "allow"

    async def requires_user_confirmation(self, item: Item) -> bool:
        """True when the policy would hold ``item`` for the user's approval."""
        return (await self.evaluate(item))["action"] == "require_approval"

    # -- writes --------------------------------------------------------------------
    async def remember(self, item: Item) -> Decision:
        """Store ``item`` as the policy decides; raises PolicyDeniedError / QuarantinedError."""
        return _raise_for(dict(await self._one(*_Calls.remember(item))))

    async def forget(self, memory_id: UUID | str) -> Decision:
        return _raise_for(dict(await self._one(*_Calls.by_id("forget", "memory_id", memory_id))))

    async def confirm(self, memory_id: UUID | str) -> Decision:
        return dict(await self._one(*_Calls.by_id("confirm", "memory_id", memory_id)))

    async def reject(self, memory_id: UUID | str) -> Decision:
        return dict(await self._one(*_Calls.by_id("reject", "memory_id", memory_id)))

    async def edit(self, memory_id: UUID | str, new_text: str) -> Decision:
        return _raise_for(dict(await self._one(*_Calls.by_id("edit", "memory_id", memory_id, new_text=new_text))))

    async def approve(self, request_id: UUID | str, note: str | None = None) -> Decision:
        return dict(await self._one(*_Calls.by_id("approve", "request_id", request_id, note=note)))

    async def deny(self, request_id: UUID | str, note: str | None = None) -> Decision:
        return dict(await self._one(*_Calls.by_id("deny", "request_id", request_id, note=note)))

    async def apply_retention_policy(self, memory_id: UUID | str) -> Decision:
        """Apply the retention sweep's rules to one memory now."""
        return dict(await self._one(*_Calls.by_id("apply_retention", "memory_id", memory_id)))


class SyncMemoryPolicyEngine:
    """The same engine over a synchronous psycopg ``Connection``."""

    def __init__(self, conn: psycopg.Connection[Any], *, org_id: str | None = None) -> None:
        self.conn = conn
        self.org_id = None if org_id is None else check_tenant_id(org_id)

    @classmethod
    def connect(cls, conninfo: str, *, org_id: str | None = None, **kwargs: Any) -> Self:
        from .db import connect

        if org_id is not None:
            check_tenant_id(org_id)  # before a connection is opened
        return cls(connect(conninfo, **kwargs), org_id=org_id)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _one(self, statement: str, params: dict[str, Any]) -> Any:
        try:
            with self.conn.transaction():
                if self.org_id is not None:
                    self.conn.execute(query("set_tenant"), {"org_id": self.org_id})
                row = self.conn.execute(statement, params).fetchone()
        except psycopg.Error as exc:
            raise _translate(exc) from None
        return row[0] if row else None

    def evaluate(self, item: Item, operation: str = "remember") -> Decision:
        return dict(self._one(*_Calls.evaluate(item, operation)))

    def should_store_in_long_term(self, item: Item) -> bool:
        return self.evaluate(item)["action"] == "allow"

    def requires_user_confirmation(self, item: Item) -> bool:
        return self.evaluate(item)["action"] == "require_approval"

    def remember(self, item: Item) -> Decision:
        return _raise_for(dict(self._one(*_Calls.remember(item))))

    def forget(self, memory_id: UUID | str) -> Decision:
        return _raise_for(dict(self._one(*_Calls.by_id("forget", "memory_id", memory_id))))

    def confirm(self, memory_id: UUID | str) -> Decision:
        return dict(self._one(*_Calls.by_id("confirm", "memory_id", memory_id)))

    def reject(self, memory_id: UUID | str) -> Decision:
        return dict(self._one(*_Calls.by_id("reject", "memory_id", memory_id)))

    def edit(self, memory_id: UUID | str, new_text: str) -> Decision:
        return _raise_for(dict(self._one(*_Calls.by_id("edit", "memory_id", memory_id, new_text=new_text))))

    def approve(self, request_id: UUID | str, note: str | None = None) -> Decision:
        return dict(self._one(*_Calls.by_id("approve", "request_id", request_id, note=note)))

    def deny(self, request_id: UUID | str, note: str | None = None) -> Decision:
        return dict(self._one(*_Calls.by_id("deny", "request_id", request_id, note=note)))

    def apply_retention_policy(self, memory_id: UUID | str) -> Decision:
        return dict(self._one(*_Calls.by_id("apply_retention", "memory_id", memory_id)))


__all__ = [
    "MemoryPolicyEngine",
    "PolicyDeniedError",
    "QuarantinedError",
    "SyncMemoryPolicyEngine",
]
