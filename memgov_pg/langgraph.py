"""LangGraph's ``BaseStore`` on memgov: an agent's long-term memory, every put, delete and
read decided by its tenant's policy (docs/langgraph.md).

``MemgovStore`` (sync) and ``AsyncMemgovStore`` are built like LangGraph's ``PostgresStore``::

    with MemgovStore.from_conn_string(dsn, org_id="acme") as store:
        store.setup()
        store.put(("users", "alice"), "prefs", {"food": "pizza"})

Each item is one memory of the store's tenant, addressed by ``namespace`` (the labels joined
with ".") and ``item_key``; its value is its ``fact_text`` (the JSON text of what was put,
read back exactly). A put is ``memgov.remember`` (an update when the key exists), a delete is
``memgov.forget``, a get is ``memgov.get``; searches and namespace listings read under row
level security, which applies the tenant's get rules. A denied put or delete raises
:class:`~memgov_pg.errors.PolicyDeniedError` (its log row stays), a quarantined put
:class:`~memgov_pg.errors.QuarantinedError`; a held put returns and stays invisible until a
reviewer approves it. A put's ``ttl`` (and ``ttl=``'s ``default_ttl``) becomes the memory's
``ttl_minutes``, from which the engine sets its expiry (:mod:`memgov_pg.langgraph_ttl`, with the
sweeper). With ``index=`` a query ranks by vector distance computed in SQL
(:mod:`memgov_pg.langgraph_index`). Needs the extra ``memgov-pg[langgraph]``.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .decisions import Decision
from .engine import _translate
from .errors import ConflictError, MemgovError, NotFoundError
from .langgraph_batch import BatchedStore
from .langgraph_index import (
    Vectors,
    aembed_put,
    aembed_queries,
    embed_put,
    embed_queries,
    ensure_index,
    vector_search_params,
    vectors_params,
)
from .langgraph_ttl import AsyncTTL, SyncTTL, check_ttl_config, ttl_minutes
from .resources import query
from .tenants import check_tenant_id

__all__ = ["DEFAULT_DESCRIPTION", "DESCRIBED_FIELDS", "AsyncMemgovStore", "Describe", "MemgovStore"]

#: What a put is, for the policy, when ``describe`` does not say.
DEFAULT_DESCRIPTION: Mapping[str, Any] = {"category": "user_fact", "source": "agent_extracted", "confidence": 0.9}
#: The memgov fields ``describe`` may set.
DESCRIBED_FIELDS = frozenset(
    {"category", "source", "confidence", "is_sensitive", "subject_id", "project_id", "agent_id"}
)

Describe = Callable[[tuple[str, ...], str, Mapping[str, Any]], Mapping[str, Any]]


def _describe(
    describe: Describe | None, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]
) -> dict[str, Any]:
    fields = dict(DEFAULT_DESCRIPTION)
    if describe is not None:
        described = dict(describe(namespace, key, value))
        unknown = sorted(set(described) - DESCRIBED_FIELDS)
        if unknown:
            raise ValueError(f"describe() returned {unknown}: it describes only {sorted(DESCRIBED_FIELDS)}")
        fields.update(described)
    return {
        "category": fields["category"],
        "source": fields["source"],
        "confidence": str(fields["confidence"]),
        "is_sensitive": bool(fields.get("is_sensitive", False)),
        "subject_id": fields.get("subject_id"),
        "project_id": fields.get("project_id"),
        "agent_id": fields.get("agent_id"),
    }


def _namespace_text(namespace: Sequence[str]) -> str:
    return ".".join(namespace)


def _pattern(path: Sequence[str], match_type: str) -> str:
    """A POSIX regex matching whole labels of the dot-joined namespace ("*": one label)."""
    body = r"\.".join("[^.]+" if part == "*" else re.escape(part) for part in path)
    return rf"(^|\.){body}$" if match_type == "suffix" else rf"^{body}(\.|$)"


def _group(ops: Iterable[Op]) -> tuple[list[tuple[int, Op]], int]:
    """The ops with their positions, validated, in PostgresStore's order of execution:
    gets, searches, listings, then puts (the last put of a key wins)."""
    rank = {GetOp: 0, SearchOp: 1, ListNamespacesOp: 2, PutOp: 3}
    indexed = []
    for idx, op in enumerate(ops):
        validate_op_namespace(op)
        if type(op) not in rank:
            raise ValueError(f"unknown operation type: {type(op).__name__}")
        indexed.append((idx, op))
    puts: dict[tuple[tuple[str, ...], str], tuple[int, Op]] = {}
    others = []
    for idx, op in indexed:
        if isinstance(op, PutOp):
            puts.pop((op.namespace, op.key), None)
            puts[(op.namespace, op.key)] = (idx, op)
        else:
            others.append((idx, op))
    others.sort(key=lambda pair: rank[type(pair[1])])
    return [*others, *puts.values()], len(indexed)


def _search_params(org_id: str, op: SearchOp) -> dict[str, Any]:
    filters = []
    for path, condition in (op.filter or {}).items():
        if isinstance(condition, Mapping):
            for name, value in condition.items():
                if name not in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte"):
                    raise ValueError(f"Unsupported operator: {name}")
                filters.append({"path": path, "op": name, "val": value})
        else:
            filters.append({"path": path, "op": "$eq", "val": condition})
    return {
        "org_id": org_id,
        "prefix": _namespace_text(op.namespace_prefix),
        "query": op.query or None,
        "filters": Jsonb(filters),
        "limit": op.limit,
        "offset": op.offset,
    }


def _list_params(org_id: str, op: ListNamespacesOp) -> dict[str, Any]:
    patterns = [
        _pattern(c.path, c.match_type)
        for c in op.match_conditions or ()
        if c.path and c.match_type in ("prefix", "suffix")
    ]
    return {"org_id": org_id, "max_depth": op.max_depth, "patterns": patterns, "limit": op.limit, "offset": op.offset}


def _to_refresh(refresh: list[Any], op: GetOp | SearchOp, rows: Iterable[Mapping[str, Any]]) -> None:
    """Adds the memories a read returned that have a TTL, when the read refreshes it."""
    if op.refresh_ttl:
        refresh.extend(r["memory_id"] for r in rows if r["ttl_minutes"] is not None)


def _item(namespace: tuple[str, ...], row: Mapping[str, Any]) -> Item:
    return Item(
        namespace=namespace,
        key=row["key"],
        value=json.loads(row["value"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _search_item(row: Mapping[str, Any]) -> SearchItem:
    return SearchItem(
        namespace=tuple(row["namespace"].split(".")),
        key=row["key"],
        value=json.loads(row["value"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        score=row["score"],
    )


def _value_text(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _remember_item(org_id: str, op: PutOp, described: Mapping[str, Any]) -> Jsonb:
    return Jsonb(
        {
            "org_id": org_id,
            "namespace": _namespace_text(op.namespace),
            "item_key": op.key,
            "fact_text": _value_text(op.value or {}),
            "ttl_minutes": ttl_minutes(op.ttl),
            **described,
        }
    )


def _pending(op: PutOp) -> MemgovError:
    return ConflictError(
        f"item {op.key!r} of namespace {op.namespace!r} is pending approval, or expired and held, and cannot change",
        hint="a reviewer approves or denies it first (memgov approvals); a held expired item waits for its hold",
    )


def _first(row: Mapping[str, Any] | None) -> Decision | None:
    """The decision in a row's one column (memgov.remember, memgov.forget)."""
    value = next(iter(row.values())) if row else None
    return Decision.from_json(value) if isinstance(value, Mapping) else None


def _check_ready(row: Mapping[str, Any] | None) -> None:
    if row is None or not row["has_columns"]:
        raise MemgovError("the memgov schema has no store columns: run `memgov migrate` (revision 0002 or later)")
    if not row["may_write"]:
        raise MemgovError("this login may not write memories: grant it memgov_writer")


def _stored(decision: Decision | None) -> bool:
    """Whether a put's row is in the table: allowed (or an update without a report) or held."""
    return decision is None or decision.applied in ("allow", "require_approval")


def _search(org_id: str, op: SearchOp, vector: list[float] | None, config: Any) -> tuple[str, dict[str, Any]]:
    """A search's named query and parameters: by vector with an index and a query, else full text."""
    params = _search_params(org_id, op)
    if vector is None:
        return query("store_search"), params
    return query("store_vector_search"), vector_search_params(params, vector, config)


class _Common:
    org_id: str
    describe: Describe | None
    embeddings: Any
    index_config: Any

    def _init(self, org_id: str, index: Any, ttl: Any, describe: Describe | None) -> None:
        self.org_id = check_tenant_id(org_id)
        self.embeddings, self.index_config = ensure_index(index)
        self.ttl_config = check_ttl_config(ttl)
        self.describe = describe


class MemgovStore(_Common, SyncTTL, BaseStore):
    """LangGraph's ``BaseStore`` on memgov, over a psycopg connection or pool (see the module)."""

    supports_ttl = True

    def __init__(
        self,
        conn: psycopg.Connection[Any] | ConnectionPool[Any],
        *,
        org_id: str,
        index: Any = None,
        ttl: Any = None,
        describe: Describe | None = None,
    ) -> None:
        """A store in tenant ``org_id`` over ``conn`` (a connection or a pool)."""
        super().__init__()
        self._init(org_id, index, ttl, describe)
        self.conn = conn
        self.lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        org_id: str,
        index: Any = None,
        ttl: Any = None,
        pipeline: bool = False,
        pool_config: Mapping[str, Any] | None = None,
        describe: Describe | None = None,
    ) -> Iterator[MemgovStore]:
        """A store on a new connection (a pool with ``pool_config``), closed at the block's end.
        ``pipeline`` is accepted for PostgresStore's signature: every batch is a transaction."""
        check_tenant_id(org_id)
        if pool_config is not None:
            pc = dict(pool_config)
            with ConnectionPool(
                conn_string,
                min_size=pc.pop("min_size", 1),
                max_size=pc.pop("max_size", None),
                kwargs={"autocommit": True, **(pc.pop("kwargs", None) or {})},
                **pc,
            ) as pool:
                yield cls(pool, org_id=org_id, index=index, ttl=ttl, describe=describe)
        else:
            with psycopg.Connection.connect(conn_string, autocommit=True) as conn:
                yield cls(conn, org_id=org_id, index=index, ttl=ttl, describe=describe)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        try:
            if isinstance(self.conn, ConnectionPool):
                with self.conn.connection() as conn, conn.transaction():
                    cur = conn.cursor(row_factory=dict_row)
                    cur.execute(query("set_tenant"), {"org_id": self.org_id})
                    yield cur
            else:
                with self.lock, self.conn.transaction():
                    cur = self.conn.cursor(row_factory=dict_row)
                    cur.execute(query("set_tenant"), {"org_id": self.org_id})
                    yield cur
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    def setup(self) -> None:
        """Check that the schema has the store's columns and the login may write: creates
        nothing (``memgov migrate`` owns the schema), so it needs no superuser; idempotent."""
        with self._transaction() as cur:
            _check_ready(cur.execute(query("store_ready")).fetchone())

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (reads in one transaction, each put in its own); results in order."""
        ordered, count = _group(ops)
        results: list[Result] = [None] * count
        reads = [(i, op) for i, op in ordered if not isinstance(op, PutOp)]
        if reads:
            vectors = embed_queries(self.embeddings, self.index_config, reads)
            with self._transaction() as cur:
                refresh: list[Any] = []
                for idx, op in reads:
                    results[idx] = self._read(cur, op, refresh, vectors.get(idx))
                if refresh:  # the TTLs of what the reads returned start again, in their transaction
                    cur.execute(query("store_refresh_ttl"), {"memory_ids": refresh})
        for _, put in ordered:
            if isinstance(put, PutOp):
                self._put(put)
        return results

    def _read(self, cur: psycopg.Cursor[Any], op: Op, refresh: list[Any], vector: list[float] | None = None) -> Result:
        if isinstance(op, GetOp):
            params = {"org_id": self.org_id, "namespace": _namespace_text(op.namespace), "keys": [op.key]}
            rows = cur.execute(query("store_get"), params).fetchall()
            _to_refresh(refresh, op, rows)
            return _item(op.namespace, rows[0]) if rows else None
        if isinstance(op, SearchOp):
            rows = cur.execute(*_search(self.org_id, op, vector, self.index_config)).fetchall()
            _to_refresh(refresh, op, rows)
            return [_search_item(r) for r in rows]
        assert isinstance(op, ListNamespacesOp)
        rows = cur.execute(query("store_list_namespaces"), _list_params(self.org_id, op)).fetchall()
        return [tuple(r["namespace"].split(".")) for r in rows]

    def _put_once(self, op: PutOp, vectors: Vectors) -> Decision | None:
        ns = _namespace_text(op.namespace)
        decision: Decision | None = None
        memory_id = None
        with self._transaction() as cur:
            found = cur.execute(query("store_find"), {"org_id": self.org_id, "namespace": ns, "key": op.key})
            row = found.fetchone()
            if op.value is None:
                if row is not None:
                    got = cur.execute(query("forget"), {"memory_id": row["memory_id"]}).fetchone()
                    decision = _first(got)
            elif row is None:
                described = _describe(self.describe, op.namespace, op.key, op.value)
                got = cur.execute(query("remember"), {"item": _remember_item(self.org_id, op, described)}).fetchone()
                decision = _first(got)
                memory_id = decision.memory_id if decision else None
            else:
                described = _describe(self.describe, op.namespace, op.key, op.value)
                cur.execute(query("store_capture"))
                params = {
                    "org_id": self.org_id,
                    "memory_id": row["memory_id"],
                    "fact_text": _value_text(op.value),
                    "ttl_minutes": ttl_minutes(op.ttl),
                    **described,
                }
                cur.execute(query("store_update"), params)
                got = cur.execute(query("store_last_outcome")).fetchone()
                if got and got["decision"] is not None:
                    decision = Decision.from_json(got["decision"])
                memory_id = row["memory_id"]
            if vectors and memory_id is not None and _stored(decision):
                cur.execute(query("store_vectors"), vectors_params(memory_id, _value_text(op.value or {}), vectors))
        return decision

    def _put(self, op: PutOp) -> None:
        vectors = embed_put(self.embeddings, self.index_config, op)
        for attempt in (1, 2, 3):
            try:
                decision = self._put_once(op, vectors)
                break
            except MemgovError as exc:
                if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                    if attempt == 1:
                        continue  # another put of the key committed first: now an update
                    if attempt == 2 and self.sweep_ttl():
                        continue  # an expired item, unswept, held the key
                    raise _pending(op) from exc.__cause__
                if isinstance(exc, NotFoundError) and op.value is None:
                    return  # another delete forgot it first
                raise
        if decision is not None:  # after the commit: a denial's log row stays
            decision.raise_for()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))


class AsyncMemgovStore(_Common, AsyncTTL, BatchedStore):
    """:class:`MemgovStore` for asyncio, over an async connection or pool. Concurrent calls
    (``aget``, ``aput`` ...) are run in batches, each put apart (:mod:`memgov_pg.langgraph_batch`)."""

    supports_ttl = True

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        org_id: str,
        index: Any = None,
        ttl: Any = None,
        describe: Describe | None = None,
    ) -> None:
        """A store in tenant ``org_id`` over ``conn`` (an async connection or pool)."""
        super().__init__()
        self._init(org_id, index, ttl, describe)
        self.conn = conn
        self.lock = asyncio.Lock()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        org_id: str,
        index: Any = None,
        ttl: Any = None,
        pipeline: bool = False,
        pool_config: Mapping[str, Any] | None = None,
        describe: Describe | None = None,
    ) -> AsyncIterator[AsyncMemgovStore]:
        """Like :meth:`MemgovStore.from_conn_string`, for asyncio."""
        check_tenant_id(org_id)
        if pool_config is not None:
            pc = dict(pool_config)
            async with AsyncConnectionPool(
                conn_string,
                min_size=pc.pop("min_size", 1),
                max_size=pc.pop("max_size", None),
                kwargs={"autocommit": True, **(pc.pop("kwargs", None) or {})},
                open=False,
                **pc,
            ) as pool:
                yield cls(pool, org_id=org_id, index=index, ttl=ttl, describe=describe)
        else:
            async with await psycopg.AsyncConnection.connect(conn_string, autocommit=True) as conn:
                yield cls(conn, org_id=org_id, index=index, ttl=ttl, describe=describe)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[psycopg.AsyncCursor[Any]]:
        try:
            if isinstance(self.conn, AsyncConnectionPool):
                async with self.conn.connection() as conn, conn.transaction():
                    cur = conn.cursor(row_factory=dict_row)
                    await cur.execute(query("set_tenant"), {"org_id": self.org_id})
                    yield cur
            else:
                async with self.lock, self.conn.transaction():
                    cur = self.conn.cursor(row_factory=dict_row)
                    await cur.execute(query("set_tenant"), {"org_id": self.org_id})
                    yield cur
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def setup(self) -> None:
        """Like :meth:`MemgovStore.setup`."""
        async with self._transaction() as cur:
            await cur.execute(query("store_ready"))
            _check_ready(await cur.fetchone())

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Like :meth:`MemgovStore.batch`."""
        ordered, count = _group(ops)
        results: list[Result] = [None] * count
        reads = [(i, op) for i, op in ordered if not isinstance(op, PutOp)]
        if reads:
            for (idx, _), result in zip(reads, await self._read_batch([op for _, op in reads]), strict=True):
                results[idx] = result
        for _, put in ordered:
            if isinstance(put, PutOp):
                await self._put(put)
        return results

    async def _read_batch(self, ops: Sequence[Op]) -> list[Result]:
        """Reads ``ops`` in one transaction, and starts again the TTLs of what they returned."""
        reads = list(enumerate(ops))
        vectors = await aembed_queries(self.embeddings, self.index_config, reads)
        async with self._transaction() as cur:
            refresh: list[Any] = []
            results = [await self._read(cur, op, refresh, vectors.get(idx)) for idx, op in reads]
            if refresh:  # the TTLs of what the reads returned start again, in their transaction
                await cur.execute(query("store_refresh_ttl"), {"memory_ids": refresh})
        return results

    def _put_workers(self) -> int:
        return self.conn.max_size if isinstance(self.conn, AsyncConnectionPool) else 1

    async def _read(
        self, cur: psycopg.AsyncCursor[Any], op: Op, refresh: list[Any], vector: list[float] | None = None
    ) -> Result:
        if isinstance(op, GetOp):
            params = {"org_id": self.org_id, "namespace": _namespace_text(op.namespace), "keys": [op.key]}
            await cur.execute(query("store_get"), params)
            rows = await cur.fetchall()
            _to_refresh(refresh, op, rows)
            return _item(op.namespace, rows[0]) if rows else None
        if isinstance(op, SearchOp):
            await cur.execute(*_search(self.org_id, op, vector, self.index_config))
            rows = await cur.fetchall()
            _to_refresh(refresh, op, rows)
            return [_search_item(r) for r in rows]
        assert isinstance(op, ListNamespacesOp)
        await cur.execute(query("store_list_namespaces"), _list_params(self.org_id, op))
        return [tuple(r["namespace"].split(".")) for r in await cur.fetchall()]

    async def _put_once(self, op: PutOp, vectors: Vectors) -> Decision | None:
        ns = _namespace_text(op.namespace)
        decision: Decision | None = None
        memory_id = None
        async with self._transaction() as cur:
            await cur.execute(query("store_find"), {"org_id": self.org_id, "namespace": ns, "key": op.key})
            row = await cur.fetchone()
            if op.value is None:
                if row is not None:
                    await cur.execute(query("forget"), {"memory_id": row["memory_id"]})
                    got = await cur.fetchone()
                    decision = _first(got)
            elif row is None:
                described = _describe(self.describe, op.namespace, op.key, op.value)
                await cur.execute(query("remember"), {"item": _remember_item(self.org_id, op, described)})
                got = await cur.fetchone()
                decision = _first(got)
                memory_id = decision.memory_id if decision else None
            else:
                described = _describe(self.describe, op.namespace, op.key, op.value)
                await cur.execute(query("store_capture"))
                params = {
                    "org_id": self.org_id,
                    "memory_id": row["memory_id"],
                    "fact_text": _value_text(op.value),
                    "ttl_minutes": ttl_minutes(op.ttl),
                    **described,
                }
                await cur.execute(query("store_update"), params)
                await cur.execute(query("store_last_outcome"))
                got = await cur.fetchone()
                if got and got["decision"] is not None:
                    decision = Decision.from_json(got["decision"])
                memory_id = row["memory_id"]
            if vectors and memory_id is not None and _stored(decision):
                params = vectors_params(memory_id, _value_text(op.value or {}), vectors)
                await cur.execute(query("store_vectors"), params)
        return decision

    async def _put(self, op: PutOp) -> None:
        vectors = await aembed_put(self.embeddings, self.index_config, op)
        for attempt in (1, 2, 3):
            try:
                decision = await self._put_once(op, vectors)
                break
            except MemgovError as exc:
                if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                    if attempt == 1:
                        continue  # another put of the key committed first: now an update
                    if attempt == 2 and await self.sweep_ttl():
                        continue  # an expired item, unswept, held the key
                    raise _pending(op) from exc.__cause__
                if isinstance(exc, NotFoundError) and op.value is None:
                    return  # another delete forgot it first
                raise
        if decision is not None:  # after the commit: a denial's log row stays
            decision.raise_for()
