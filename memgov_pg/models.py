"""SQLAlchemy 2 models of schema ``memgov`` (docs/models.md).

Typed declarative models of the tables a client reads, with their own
:data:`metadata` (never the host's: memgov's tables are created by memgov's
migration, not by ``metadata.create_all``), the Core :class:`~sqlalchemy.Table`
objects and the enums of the values the CHECK constraints allow.

The enums take their values from :mod:`memgov_pg.policy`'s vocabulary where it
has them (sources, statuses, retention kinds, actions, modes, operations, risk
levels); the review and feedback lists, which no policy reads, are stated
here and checked against the database's CHECK constraints by the tests.

Only :class:`MemoryItem` is written through the ORM (by a ``memgov_writer``
login): its engine-owned columns (:data:`ENGINE_COLUMNS`) are marked as
server-generated, never sent in an INSERT or UPDATE (setting one raises
``AttributeError``), and fetched back after each flush. Every other table is
written by memgov's functions only: read them, write through
:mod:`memgov_pg.sqlalchemy`'s wrappers.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    FetchedValue,
    Identity,
    Integer,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, DOMAIN, JSONB, REGCONFIG, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, validates
from sqlalchemy.types import TypeDecorator, TypeEngine

from .policy.vocabulary import (
    MODES,
    OPERATION_TYPES,
    RETENTION_ACTIONS,
    RETENTION_POLICIES,
    RISK_LEVELS,
    SOURCES,
    STATUSES,
    WRITE_ACTIONS,
)

SCHEMA = "memgov"


def _str_enum(name: str, values: tuple[str, ...]) -> Any:
    return enum.StrEnum(name, {v.upper(): v for v in values}, module=__name__)


#: ``source``: who vouches for a memory (the policy's ``sources:`` says which role may claim which).
Source = _str_enum("Source", SOURCES)
#: ``long_term_memory_items.status``.
Status = _str_enum("Status", STATUSES)
#: ``retention_policy``.
RetentionPolicy = _str_enum("RetentionPolicy", RETENTION_POLICIES)
#: A decision's action (``allow`` … ``quarantine``); a rule may also say ``auto_delete``.
WriteAction = _str_enum("WriteAction", WRITE_ACTIONS)
Action = _str_enum("Action", WRITE_ACTIONS + RETENTION_ACTIONS)
#: A policy version's mode.
Mode = _str_enum("Mode", MODES)
#: The operation a decision is about (requests and quarantine entries: the first three).
Operation = _str_enum("Operation", OPERATION_TYPES)
RiskLevel = _str_enum("RiskLevel", RISK_LEVELS)
#: Lists no policy reads (checked against the CHECK constraints by tests/db/test_models.py).
ApprovalStatus = _str_enum("ApprovalStatus", ("pending", "approved", "denied", "expired"))
QuarantineStatus = _str_enum("QuarantineStatus", ("held", "released", "purged"))
FeedbackKind = _str_enum("FeedbackKind", ("confirm", "reject", "edit", "forget"))


class EnumText(TypeDecorator[Any]):
    """``text`` (or a text domain) in the database, a ``StrEnum`` member in Python (no PostgreSQL enum type)."""

    impl: TypeEngine[Any] | type[TypeEngine[Any]] = Text
    cache_ok = True
    if hasattr(Text, "operator_classes"):  # SQLAlchemy 2.1: a text column's operators, whatever the impl
        # (a DOMAIN impl declares none, which 2.1 warns about on every comparison)
        operator_classes = Text.operator_classes

    def __init__(self, enum_class: type[enum.StrEnum], domain: str | None = None) -> None:
        """``domain``: the column's text domain in schema memgov (created by the migration, never here)."""
        super().__init__()
        self.enum_class = enum_class
        self.domain = domain
        if domain is not None:
            self.impl = DOMAIN(domain, Text(), schema=SCHEMA, create_type=False)

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        """The member's text for the database (ValueError for a value not in the enum)."""
        return None if value is None else str(self.enum_class(value))

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        """The enum member for the database's text."""
        return None if value is None else self.enum_class(value)


metadata = MetaData(schema=SCHEMA)

_TZ = DateTime(timezone=True)
_CONFIDENCE = Numeric(4, 3)
_TEXTS = ARRAY(Text)


class InDomain(TypeDecorator[Any]):
    """A column typed by a domain of schema memgov (created by the migration, never here): the
    domain in DDL, its base type's binds, results and operators (a JSONB domain takes a dict)."""

    impl: TypeEngine[Any] | type[TypeEngine[Any]] = Text
    cache_ok = True
    if hasattr(Text, "operator_classes"):  # SQLAlchemy 2.1 (see EnumText); replaced per instance below
        operator_classes = Text.operator_classes

    def __init__(self, domain: str, base: TypeEngine[Any]) -> None:
        """``domain``: its name in schema memgov; ``base``: the type it is a domain of."""
        super().__init__()
        self.base = base
        self.impl = DOMAIN(domain, base, schema=SCHEMA, create_type=False)
        self.comparator_factory = base.comparator_factory
        if hasattr(base, "operator_classes"):
            self.operator_classes = base.operator_classes  # type: ignore[misc]

    def bind_processor(self, dialect: Any) -> Any:
        """The base type's."""
        return self.base.dialect_impl(dialect).bind_processor(dialect)

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        """The base type's."""
        return self.base.dialect_impl(dialect).result_processor(dialect, coltype)


def _domain(name: str, base: TypeEngine[Any]) -> InDomain:
    return InDomain(name, base)


def _default(sql: str) -> Any:
    """A server default, spelled as PostgreSQL prints it (``pg_get_expr``)."""
    return text(sql)


class Base(DeclarativeBase):
    """memgov's declarative base, with memgov's own :data:`metadata`."""

    metadata = metadata


#: The columns of the memory table that only the engine sets (writers hold no privilege on them).
ENGINE_COLUMNS = (
    "status",
    "created_at",
    "updated_at",
    "last_confirmed_at",
    "expires_at",
    "low_confidence_since",
    "policy_version",
    "decision_id",
    "search_config",
    "search_vector",
    "read_class",
)


def _engine(type_: Any, default: str | None = None, *, nullable: bool = True) -> Any:
    """An engine-owned column: never sent by the ORM, fetched back after INSERT and UPDATE."""
    return mapped_column(
        type_,
        nullable=nullable,
        server_default=FetchedValue() if default is None else _default(default),
        server_onupdate=FetchedValue(),
    )


class MemoryItem(Base):
    """``memgov.long_term_memory_items``: the governed table (one row per memory)."""

    __tablename__ = "long_term_memory_items"
    # fetch the engine's columns with RETURNING in the INSERT or UPDATE itself
    __mapper_args__ = {"eager_defaults": True}  # noqa: RUF012 (SQLAlchemy reads it once)

    memory_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, primary_key=True, default=uuid.uuid4, server_default=_default("gen_random_uuid()")
    )
    org_id: Mapped[str] = mapped_column(_domain("tenant", Text()), primary_key=True)
    project_id: Mapped[str | None] = mapped_column(Text)
    agent_id: Mapped[str | None] = mapped_column(Text)
    subject_id: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    category: Mapped[str] = mapped_column(_domain("category", Text()))
    fact_text: Mapped[str] = mapped_column(Text)
    source: Mapped[Any] = mapped_column(EnumText(Source, "fact_source"))
    confidence: Mapped[Decimal] = mapped_column(_domain("confidence", _CONFIDENCE))
    is_sensitive: Mapped[bool] = mapped_column(Boolean, server_default=_default("false"))
    retention_policy: Mapped[Any] = mapped_column(
        EnumText(RetentionPolicy, "retention_kind"), server_default=_default("'permanent_until_revoked'::text")
    )
    context_source: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", _domain("metadata_object", JSONB()), server_default=_default("'{}'::jsonb")
    )

    status: Mapped[Any] = _engine(EnumText(Status, "memory_status"), "'active'::text", nullable=False)
    created_at: Mapped[datetime] = _engine(_TZ, "now()", nullable=False)
    updated_at: Mapped[datetime] = _engine(_TZ, "now()", nullable=False)
    last_confirmed_at: Mapped[datetime | None] = _engine(_TZ)
    expires_at: Mapped[datetime | None] = _engine(_TZ)
    low_confidence_since: Mapped[datetime | None] = _engine(_TZ)
    policy_version: Mapped[str | None] = _engine(Text)
    decision_id: Mapped[int | None] = _engine(BigInteger)
    search_config: Mapped[str] = _engine(REGCONFIG, "'simple'::regconfig", nullable=False)
    search_vector: Mapped[str | None] = mapped_column(
        TSVECTOR, Computed("to_tsvector(search_config, fact_text)", persisted=True)
    )
    # where a LangGraph store keeps the memory (memgov_pg.langgraph): set on INSERT only
    namespace: Mapped[str | None] = mapped_column(Text)
    item_key: Mapped[str | None] = mapped_column(Text)
    # a time to live in minutes its writer gives it; the engine sets expires_at from it
    ttl_minutes: Mapped[int | None] = mapped_column(_domain("ttl_minutes", Integer()))
    # which readers its tenant's policy lets read it, set by the write trigger (docs/recall.md)
    read_class: Mapped[int | None] = _engine(BigInteger)

    @validates(*ENGINE_COLUMNS)
    def _engine_owned(self, key: str, value: Any) -> Any:
        raise AttributeError(
            f"MemoryItem.{key} is set by the engine; a writer may not write it (it is fetched after each flush)"
        )

    def writer_values(self) -> dict[str, Any]:
        """The writer's columns that are set on this object (what ``memgov.remember`` takes as its item)."""
        values: dict[str, Any] = {}
        for column in MemoryItem.__table__.columns:
            if column.name in ENGINE_COLUMNS:
                continue
            value = self.__dict__.get("metadata_" if column.name == "metadata" else column.name)
            if value is not None:
                values[column.name] = value
        return values

    def __repr__(self) -> str:
        return (
            f"MemoryItem(memory_id={self.memory_id!r}, org_id={self.org_id!r}, status={self.__dict__.get('status')!r})"
        )


class PolicyVersion(Base):
    """``memgov.policy_versions``: a deployed policy version (``org_id '*'``: global)."""

    __tablename__ = "policy_versions"

    org_id: Mapped[str] = mapped_column(Text, primary_key=True, server_default=_default("'*'::text"))
    version: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text)
    mode: Mapped[Any] = mapped_column(EnumText(Mode))
    source_yaml: Mapped[str] = mapped_column(Text)
    compiled_sql: Mapped[str] = mapped_column(Text)
    function_name: Mapped[str] = mapped_column(Text)
    settings: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=_default("'{}'::jsonb"))
    deployed_at: Mapped[datetime] = mapped_column(_TZ, server_default=_default("now()"))
    deployed_by: Mapped[str] = mapped_column(Text, server_default=_default("CURRENT_USER"))
    active: Mapped[bool] = mapped_column(Boolean, server_default=_default("false"))
    # names the read classes this version decided (memgov.long_term_memory_items.read_class)
    read_epoch: Mapped[int] = mapped_column(Integer, Identity(always=True))


class PolicyRule(Base):
    """``memgov.memory_policy_rules``: one rule of a deployed version."""

    __tablename__ = "memory_policy_rules"

    org_id: Mapped[str] = mapped_column(Text, primary_key=True, server_default=_default("'*'::text"))
    policy_version: Mapped[str] = mapped_column(Text, primary_key=True)
    rule_id: Mapped[str] = mapped_column(Text, primary_key=True)
    rule_key: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)
    category: Mapped[list[str] | None] = mapped_column(_TEXTS)
    condition: Mapped[dict[str, Any]] = mapped_column(JSONB)
    action: Mapped[Any] = mapped_column(EnumText(Action))
    priority: Mapped[int] = mapped_column(Integer)
    reason_codes: Mapped[list[str]] = mapped_column(_TEXTS, server_default=_default("'{}'::text[]"))
    description: Mapped[str | None] = mapped_column(Text)


class PolicyActivation(Base):
    """``memgov.policy_activations``: a change of a scope's active version (admins read it;
    ``memgov.activate_policy`` and ``memgov.undeploy_policy`` write it)."""

    __tablename__ = "policy_activations"
    __table_args__ = (PrimaryKeyConstraint("org_id", "activation_id"),)

    activation_id: Mapped[int] = mapped_column(BigInteger, Identity(always=True))
    org_id: Mapped[str] = mapped_column(Text)
    version: Mapped[str | None] = mapped_column(Text)
    previous_version: Mapped[str | None] = mapped_column(Text)
    undoes: Mapped[int | None] = mapped_column(BigInteger)
    activated_at: Mapped[datetime] = mapped_column(_TZ, server_default=_default("now()"))
    activated_by: Mapped[str] = mapped_column(Text, server_default=_default("SESSION_USER"))


class DecisionLogEntry(Base):
    """``memgov.decision_log``: one decision (append-only; written by the engine only)."""

    __tablename__ = "decision_log"
    __table_args__ = (PrimaryKeyConstraint("org_id", "decision_id"),)

    decision_id: Mapped[int] = mapped_column(BigInteger, Identity(always=True))
    decided_at: Mapped[datetime] = mapped_column(_TZ, server_default=_default("statement_timestamp()"))
    operation: Mapped[Any] = mapped_column(EnumText(Operation))
    memory_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    org_id: Mapped[str] = mapped_column(Text)
    action: Mapped[Any] = mapped_column(EnumText(WriteAction))
    reason_codes: Mapped[list[str]] = mapped_column(_TEXTS, server_default=_default("'{}'::text[]"))
    matched_rule_ids: Mapped[list[str]] = mapped_column(_TEXTS, server_default=_default("'{}'::text[]"))
    policy_version: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[Any | None] = mapped_column(EnumText(Mode))
    enforced: Mapped[bool] = mapped_column(Boolean)
    actor: Mapped[str] = mapped_column(Text, server_default=_default("CURRENT_USER"))
    login: Mapped[str] = mapped_column(Text, server_default=_default("SESSION_USER"))
    risk_score: Mapped[Decimal | None] = mapped_column(_CONFIDENCE)
    risk_level: Mapped[Any | None] = mapped_column(EnumText(RiskLevel))
    query_fingerprint: Mapped[str | None] = mapped_column(Text)
    returned: Mapped[int | None] = mapped_column(Integer)
    withheld: Mapped[int | None] = mapped_column(Integer)
    xact_id: Mapped[int] = mapped_column(BigInteger, server_default=_default("((pg_current_xact_id())::text)::bigint"))
    #: a decision one statement took about several memories alike: them all (memory_id is then None)
    memory_ids: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(Uuid))
    memory_count: Mapped[int | None] = mapped_column(Integer)

    @property
    def memories(self) -> list[uuid.UUID]:
        """Every memory this decision was about: ``memory_ids``, else ``[memory_id]`` (none for a search)."""
        if self.memory_ids is not None:
            return list(self.memory_ids)
        return [self.memory_id] if self.memory_id is not None else []


class ApprovalRequest(Base):
    """``memgov.approval_requests``: a write held for a reviewer (``memgov.approve`` / ``deny``)."""

    __tablename__ = "approval_requests"

    request_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, server_default=_default("gen_random_uuid()"))
    memory_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    operation: Mapped[Any] = mapped_column(EnumText(Operation, "operation_type"))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[Any] = mapped_column(
        EnumText(ApprovalStatus, "request_status"), server_default=_default("'pending'::text")
    )
    requested_at: Mapped[datetime] = mapped_column(_TZ, server_default=_default("now()"))
    requested_by: Mapped[str] = mapped_column(Text, server_default=_default("CURRENT_USER"))
    requested_login: Mapped[str] = mapped_column(Text, server_default=_default("SESSION_USER"))
    decided_at: Mapped[datetime | None] = mapped_column(_TZ)
    decided_by: Mapped[str | None] = mapped_column(Text)
    decided_login: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    decision_id: Mapped[int | None] = mapped_column(BigInteger)
    policy_version: Mapped[str | None] = mapped_column(Text)


class QuarantineEntry(Base):
    """``memgov.quarantine``: a write diverted by a quarantine decision (``release_quarantine`` / ``purge``)."""

    __tablename__ = "quarantine"

    quarantine_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, primary_key=True, server_default=_default("gen_random_uuid()")
    )
    org_id: Mapped[str] = mapped_column(Text, primary_key=True)
    operation: Mapped[Any] = mapped_column(EnumText(Operation, "operation_type"))
    memory_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    decision: Mapped[dict[str, Any]] = mapped_column(JSONB)
    decision_id: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[Any] = mapped_column(
        EnumText(QuarantineStatus, "quarantine_status"), server_default=_default("'held'::text")
    )
    quarantined_at: Mapped[datetime] = mapped_column(_TZ, server_default=_default("now()"))
    quarantined_by: Mapped[str] = mapped_column(Text, server_default=_default("CURRENT_USER"))
    quarantined_login: Mapped[str] = mapped_column(Text, server_default=_default("SESSION_USER"))
    resolved_at: Mapped[datetime | None] = mapped_column(_TZ)
    resolved_by: Mapped[str | None] = mapped_column(Text)
    resolved_login: Mapped[str | None] = mapped_column(Text)


class FeedbackEvent(Base):
    """``memgov.feedback_events``: a confirm, reject, edit or forget, confidence before and after."""

    __tablename__ = "feedback_events"
    __table_args__ = (PrimaryKeyConstraint("org_id", "event_id"),)

    event_id: Mapped[int] = mapped_column(BigInteger, Identity(always=True))
    memory_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    org_id: Mapped[str] = mapped_column(Text)
    kind: Mapped[Any] = mapped_column(EnumText(FeedbackKind))
    confidence_before: Mapped[Decimal | None] = mapped_column(_CONFIDENCE)
    confidence_after: Mapped[Decimal | None] = mapped_column(_CONFIDENCE)
    actor: Mapped[str] = mapped_column(Text, server_default=_default("CURRENT_USER"))
    login: Mapped[str] = mapped_column(Text, server_default=_default("SESSION_USER"))
    at: Mapped[datetime] = mapped_column(_TZ, server_default=_default("now()"))


#: The Core tables, for ``select(memory_items)`` and reflection checks.
memory_items: Table = MemoryItem.__table__  # type: ignore[assignment]
policy_versions: Table = PolicyVersion.__table__  # type: ignore[assignment]
memory_policy_rules: Table = PolicyRule.__table__  # type: ignore[assignment]
policy_activations: Table = PolicyActivation.__table__  # type: ignore[assignment]
decision_log: Table = DecisionLogEntry.__table__  # type: ignore[assignment]
approval_requests: Table = ApprovalRequest.__table__  # type: ignore[assignment]
quarantine: Table = QuarantineEntry.__table__  # type: ignore[assignment]
feedback_events: Table = FeedbackEvent.__table__  # type: ignore[assignment]

#: Every mapped model, by table name.
MODELS: dict[str, type[Base]] = {
    m.__tablename__: m
    for m in (
        MemoryItem,
        PolicyVersion,
        PolicyRule,
        PolicyActivation,
        DecisionLogEntry,
        ApprovalRequest,
        QuarantineEntry,
        FeedbackEvent,
    )
}

__all__ = [
    "ENGINE_COLUMNS",
    "MODELS",
    "SCHEMA",
    "Action",
    "ApprovalRequest",
    "ApprovalStatus",
    "Base",
    "DecisionLogEntry",
    "EnumText",
    "FeedbackEvent",
    "FeedbackKind",
    "MemoryItem",
    "Mode",
    "Operation",
    "PolicyActivation",
    "PolicyRule",
    "PolicyVersion",
    "QuarantineEntry",
    "QuarantineStatus",
    "RetentionPolicy",
    "RiskLevel",
    "Source",
    "Status",
    "WriteAction",
    "approval_requests",
    "decision_log",
    "feedback_events",
    "memory_items",
    "memory_policy_rules",
    "metadata",
    "policy_activations",
    "policy_versions",
    "quarantine",
]
