"""memgov's signals in SQLAlchemy: notices, the tenant, and the SQL functions as statements.

    engine = create_engine("postgresql+psycopg://agent@db/app")
    memgov_pg.sqlalchemy.install(engine, org_id="acme")        # or set_tenant(session, "acme")

    with Session(engine) as session:
        decision = session.scalar(memgov_remember(MemoryItem(org_id="acme", ...)))
        if decision.action == "require_approval":
            ...                                                  # decision.request_id
        session.commit()
        memgov_pg.sqlalchemy.decisions(session)                  # the MG201 / MG202 notices seen

* :func:`install` adds event hooks to an engine: each new connection gets a psycopg
  notice handler that turns the engine's MG201 (held) and MG202 (quarantined)
  notices into :class:`Decision` objects, appended to :func:`decisions` of the
  session (and of the connection) that received them and logged on the logger
  ``"memgov_pg"``; with ``org_id`` every connection acts in that tenant.
* :func:`set_tenant` sets the tenant of one session: ``set_config('memgov.org_id',
  …, true)`` in its current transaction and again at the start of each later one.
* ``memgov_remember(item)``, ``memgov_forget(memory_id)``, … (one per client function of
  :mod:`memgov_pg.api`) are ``SELECT memgov.x(…)``
  statements whose one column is typed: ``session.scalar(stmt)`` returns a
  :class:`Decision`, :class:`ReviewResult`, :class:`FeedbackResult` or
  :class:`QuarantineResult`. A held or quarantined write through them is a
  result, never a ``FlushError``. Errors (MG403 from ``forget`` or ``edit``,
  MG404, MG409, 42501) surface as SQLAlchemy's ``DBAPIError``:
  :func:`memgov_pg.errors.from_dbapi_error` turns them into memgov's exceptions,
  and :func:`execute` does both in one call.

The ORM guidance (what to write through the ORM, what through these wrappers) is in
docs/models.md.
"""

from __future__ import annotations

import json
import logging
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, Text, Uuid, bindparam, event, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.types import TypeDecorator

from .decisions import (
    Decision,
    FeedbackResult,
    QuarantineResult,
    Recall,
    RecalledMemory,
    ReviewResult,
)
from .engine import recall_query
from .errors import (
    EngineError,
    from_dbapi_error,
)
from .models import MemoryItem
from .resources import query
from .tenants import check_tenant_id

LOGGER = logging.getLogger("memgov_pg")

#: where the decisions of notices are kept, in ``Session.info`` and ``Connection.info``
DECISIONS_KEY = "memgov_decisions"
_SINK_KEY = "memgov_session_decisions"
_TENANT_KEY = "memgov_org_id"
_NOTICES = {"MG201": "require_approval", "MG202": "quarantine"}

_installed: weakref.WeakSet[Engine] = weakref.WeakSet()


T = TypeVar("T")


class JsonResult(TypeDecorator[T], Generic[T]):
    """``jsonb`` read as a typed result (``parse`` is one of the ``from_json`` constructors)."""

    impl = JSONB
    cache_ok = True

    def __init__(self, parse: Any) -> None:
        super().__init__()
        self.parse = parse

    def process_result_value(self, value: Any, dialect: Any) -> T | None:
        """The typed result of the database's JSON (``parse(value)``), None for NULL."""
        return None if value is None else self.parse(value)


# -- the SQL functions as statements ----------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


def item_json(item: MemoryItem | Mapping[str, Any]) -> dict[str, Any]:
    """A memory as the JSON item ``memgov.remember`` takes: the writer's columns that are set."""
    values = item.writer_values() if isinstance(item, MemoryItem) else dict(item)
    return {k: _json_value(v) for k, v in values.items()}


def _json_item(item: MemoryItem | Mapping[str, Any]) -> Any:
    return bindparam(None, item_json(item), type_=JSONB)


def _id(value: uuid.UUID | str) -> Any:
    return bindparam(None, uuid.UUID(str(value)), type_=Uuid)


def _call(name: str, parse: Any, *args: Any) -> Select[Any]:
    return select(getattr(func.memgov, name)(*args, type_=JsonResult(parse)).label(name))


def memgov_remember(item: MemoryItem | Mapping[str, Any]) -> Select[Decision]:
    """``SELECT memgov.remember(item)``: a governed INSERT that returns the :class:`Decision`
    (a denial is logged and returned, not raised). ``item``: a transient MemoryItem (it is
    not added to the session) or a mapping of the writer's columns."""
    return _call("remember", Decision.from_json, _json_item(item))


def memgov_evaluate(item: MemoryItem | Mapping[str, Any], operation: str = "remember") -> Select[Decision]:
    """``SELECT memgov.evaluate(item, operation)``: the :class:`Decision` the active policy takes
    on ``item`` (a dry run: nothing written, nothing logged)."""
    return _call("evaluate", Decision.from_json, _json_item(item), bindparam(None, operation, type_=Text))


def memgov_explain(item: MemoryItem | Mapping[str, Any], operation: str = "remember") -> Select[dict[str, Any]]:
    """``SELECT memgov.explain(item, operation)``: the dry run's decision as JSON, with ``rules``:
    for every enabled write rule whether it matched and the first condition that failed."""
    return _call("explain", dict, _json_item(item), bindparam(None, operation, type_=Text))


def memgov_forget(memory_id: uuid.UUID | str) -> Select[Decision]:
    """``SELECT memgov.forget(memory_id)``: a governed delete (MG403 when denied)."""
    return _call("forget", Decision.from_json, _id(memory_id))


def memgov_forget_where(where: Mapping[str, Any], *, dry_run: bool = False) -> Select[dict[str, Any]]:
    """``SELECT memgov.forget_where(filter, dry_run)``: forgets every memory the filter matches
    (``org_id`` the tenant, a scope: ``project_id``, ``agent_id``, ``subject_id`` or
    ``session_id``; ``categories``, ``created_before``, ``created_after``), each decided as a
    forget; returns the counts ``{forgotten, held, denied, pending, dry_run}``."""
    return _call("forget_where", dict, bindparam(None, _json_value(where), type_=JSONB), bindparam(None, dry_run))


def memgov_apply_retention(memory_id: uuid.UUID | str) -> Select[dict[str, Any]]:
    """``SELECT memgov.apply_retention(memory_id)``: the sweep's rules applied to one memory now;
    returns ``{memory_id, deleted, reason, rule_id}``."""
    return _call("apply_retention", dict, _id(memory_id))


def memgov_confirm(memory_id: uuid.UUID | str) -> Select[FeedbackResult]:
    """``SELECT memgov.confirm(memory_id)``: the user confirms a memory (reviewer role)."""
    return _call("confirm", FeedbackResult.from_json, _id(memory_id))


def memgov_reject(memory_id: uuid.UUID | str) -> Select[FeedbackResult]:
    """``SELECT memgov.reject(memory_id)``: the user rejects a memory (reviewer role)."""
    return _call("reject", FeedbackResult.from_json, _id(memory_id))


def memgov_edit(memory_id: uuid.UUID | str, new_text: str) -> Select[FeedbackResult]:
    """``SELECT memgov.edit(memory_id, new_text)``: decided as an ``update`` (MG403 when denied)."""
    return _call("edit", FeedbackResult.from_json, _id(memory_id), bindparam(None, new_text, type_=Text))


def memgov_approve(request_id: uuid.UUID | str, note: str | None = None) -> Select[ReviewResult]:
    """``SELECT memgov.approve(request_id, note)``: approve a held write; the current policy re-decides it."""
    return _call("approve", ReviewResult.from_json, _id(request_id), bindparam(None, note, type_=Text))


def memgov_deny(request_id: uuid.UUID | str, note: str | None = None) -> Select[ReviewResult]:
    """``SELECT memgov.deny(request_id, note)``: deny a held write (reviewer role)."""
    return _call("deny", ReviewResult.from_json, _id(request_id), bindparam(None, note, type_=Text))


def memgov_release_quarantine(quarantine_id: uuid.UUID | str) -> Select[QuarantineResult]:
    """``SELECT memgov.release_quarantine(quarantine_id)``: store a quarantined write (MG403 if now denied)."""
    return _call("release_quarantine", QuarantineResult.from_json, _id(quarantine_id))


def memgov_purge_quarantine(quarantine_id: uuid.UUID | str) -> Select[QuarantineResult]:
    """``SELECT memgov.purge_quarantine(quarantine_id)``: erase a quarantined write's payload (the entry stays)."""
    return _call("purge_quarantine", QuarantineResult.from_json, _id(quarantine_id))


#: The columns of ``memgov.recalled``: what ``memgov.search`` and ``memgov.get`` return.
RECALLED_COLUMNS = tuple(f.name for f in fields(RecalledMemory))


def memgov_search(
    text: str | Mapping[str, Any] | None = None, *, query: Mapping[str, Any] | None = None, **filters: Any
) -> Select[Any]:
    """``SELECT * FROM memgov.search(query)``: the rows of a governed search (the columns of
    :class:`RecalledMemory`), best first; arguments as ``MemoryPolicyEngine.search``.
    :func:`search` runs it and reads what the search decided."""
    asked = recall_query(text, query, filters)
    return select(func.memgov.search(bindparam(None, asked, type_=JSONB)).table_valued(*RECALLED_COLUMNS))


def memgov_get(memory_id: uuid.UUID | str) -> Select[Any]:
    """``SELECT * FROM memgov.get(memory_id)``: the row of a governed get (none: no such active
    memory in the tenant); :func:`get` runs it and reads what the get decided."""
    return select(func.memgov.get(_id(memory_id)).table_valued(*RECALLED_COLUMNS))


def recall(session: Session | Connection, statement: Select[Any]) -> Recall:
    """Run :func:`memgov_search` / :func:`memgov_get` and read ``memgov.last_recall`` in the same
    transaction: a :class:`Recall`. A denied read raises PolicyDeniedError (the transaction is then
    failed); a held or quarantined one is a Recall whose ``raise_for()`` raises (commit first:
    the read's filing is in the transaction)."""
    try:
        rows = [dict(r) for r in session.execute(statement).mappings()]
        connection = session.connection() if isinstance(session, Session) else session
        outcome = connection.exec_driver_sql(query("last_recall")).scalar_one()
    except DBAPIError as exc:
        translated: EngineError | None = from_dbapi_error(exc)
        if translated is None:
            raise
        raise translated from exc
    return Recall.from_rows(rows, outcome if isinstance(outcome, Mapping) else {})


def search(
    session: Session | Connection,
    text: str | Mapping[str, Any] | None = None,
    *,
    query: Mapping[str, Any] | None = None,
    **filters: Any,
) -> Recall:
    """A governed search in the session's tenant: ``search(session, "Atlas", project_id="p1")``
    (see :func:`recall`)."""
    return recall(session, memgov_search(text, query=query, **filters))


def get(session: Session | Connection, memory_id: uuid.UUID | str) -> Recall:
    """A governed get in the session's tenant: ``get(session, memory_id).memory`` (see :func:`recall`)."""
    return recall(session, memgov_get(memory_id))


def execute(session: Session | Connection, statement: Select[Any]) -> Any:
    """``session.scalar(statement)``, with MG403 / MG404 / MG409 / 42501 raised as memgov's
    exceptions (:func:`memgov_pg.errors.from_dbapi_error`). The transaction is then failed:
    roll it back as after any database error."""
    try:
        result = session.execute(statement).scalar_one()
    except DBAPIError as exc:
        translated: EngineError | None = from_dbapi_error(exc)
        if translated is None:
            raise
        raise translated from exc
    return result


# -- notices and the tenant ----------------------------------------------------------------------


def decisions(owner: Session | Connection) -> list[Decision]:
    """The decisions of the MG201 / MG202 notices a session (or a connection, since its checkout)
    received, oldest first; the list is the session's own: clear it when you have read it."""
    if isinstance(owner, Session):
        found: list[Decision] = owner.info.setdefault(DECISIONS_KEY, [])
        return found
    return owner.info.setdefault(DECISIONS_KEY, [])  # type: ignore[no-any-return]


def _notice_handler(info: dict[Any, Any]) -> Any:
    def handle(diag: Any) -> None:
        sqlstate = diag.sqlstate
        if not sqlstate or not sqlstate.startswith("MG"):
            return
        message = diag.message_primary
        if sqlstate not in _NOTICES:
            LOGGER.info("%s [%s]", message, sqlstate)
            return
        try:
            data = json.loads(diag.message_detail or "")
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        data.setdefault("action", _NOTICES[sqlstate])
        decision = Decision.from_json(data, sqlstate=sqlstate)
        info.setdefault(DECISIONS_KEY, []).append(decision)
        sink = info.get(_SINK_KEY)
        if sink is not None:
            sink.append(decision)
        LOGGER.info("%s [%s]", message, sqlstate, extra={"memgov_decision": decision})

    return handle


def install(engine: Any, org_id: str | None = None) -> Engine:
    """Add memgov's event hooks to ``engine`` (call it before the engine's first connection).

    * ``connect``: a notice handler on the psycopg connection (MG201 / MG202 notices become
      :class:`Decision` objects in :func:`decisions` of the session and the connection, and
      an INFO record on the logger ``"memgov_pg"`` with the decision as ``memgov_decision``);
      with ``org_id``, ``set_config('memgov.org_id', org_id, false)`` for the connection's life.
    * ``checkout`` / ``checkin``: a fresh list of decisions per checkout, unbound at checkin.

    Returns the (sync) engine. Needs the psycopg driver (``postgresql+psycopg://``).
    """
    if org_id is not None:
        org_id = check_tenant_id(org_id)
    # an AsyncEngine: its sync_engine carries the pool events
    sync_engine: Engine = getattr(engine, "sync_engine", engine)
    if sync_engine in _installed:
        raise ValueError("memgov_pg.sqlalchemy.install: this engine has memgov's hooks already")
    if sync_engine.dialect.driver not in ("psycopg", "psycopg_async"):
        raise ValueError(f"memgov_pg.sqlalchemy.install needs the psycopg driver, not {sync_engine.dialect.driver}")

    def on_connect(dbapi_connection: Any, record: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", dbapi_connection)
        driver.add_notice_handler(_notice_handler(record.info))
        if org_id is not None:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(query("set_tenant_session"), {"org_id": org_id})
            finally:
                cursor.close()
            dbapi_connection.commit()

    def on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        record.info[DECISIONS_KEY] = []
        record.info.pop(_SINK_KEY, None)

    def on_checkin(dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info.pop(_SINK_KEY, None)

    event.listen(sync_engine, "connect", on_connect)
    event.listen(sync_engine, "checkout", on_checkout)
    event.listen(sync_engine, "checkin", on_checkin)
    _installed.add(sync_engine)
    return sync_engine


def set_tenant(session: Session, org_id: str) -> None:
    """Make ``session`` act in tenant ``org_id``: ``set_config('memgov.org_id', org_id, true)``
    now (when the session has a transaction) and at the start of each later transaction of the
    session. It overrides :func:`install`'s ``org_id`` for this session only."""
    session.info[_TENANT_KEY] = check_tenant_id(org_id)
    if session.in_transaction():
        session.connection().exec_driver_sql(query("set_tenant"), {"org_id": session.info[_TENANT_KEY]})


@event.listens_for(Session, "after_begin")
def _after_begin(session: Session, transaction: SessionTransaction, connection: Connection) -> None:
    if DECISIONS_KEY in connection.info:  # an installed engine's connection
        connection.info[_SINK_KEY] = decisions(session)
    org_id = session.info.get(_TENANT_KEY)
    if org_id is not None:
        connection.exec_driver_sql(query("set_tenant"), {"org_id": org_id})


__all__ = [
    "DECISIONS_KEY",
    "LOGGER",
    "RECALLED_COLUMNS",
    "Decision",
    "FeedbackResult",
    "JsonResult",
    "QuarantineResult",
    "Recall",
    "RecalledMemory",
    "ReviewResult",
    "decisions",
    "execute",
    "get",
    "install",
    "item_json",
    "memgov_apply_retention",
    "memgov_approve",
    "memgov_confirm",
    "memgov_deny",
    "memgov_edit",
    "memgov_evaluate",
    "memgov_explain",
    "memgov_forget",
    "memgov_forget_where",
    "memgov_get",
    "memgov_purge_quarantine",
    "memgov_reject",
    "memgov_release_quarantine",
    "memgov_remember",
    "memgov_search",
    "recall",
    "search",
    "set_tenant",
]
