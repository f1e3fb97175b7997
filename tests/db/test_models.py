"""memgov_pg.models against the migrated database: reflection finds no difference, the enums
are the CHECK lists, and an ORM insert by a real writer login works as is."""

from __future__ import annotations

import uuid
import warnings
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import Column, MetaData, Table, create_engine, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session
from sqlalchemy.schema import DefaultClause

from memgov_pg import models
from memgov_pg.models import (
    ENGINE_COLUMNS,
    MODELS,
    ApprovalStatus,
    FeedbackKind,
    MemoryItem,
    QuarantineStatus,
    RetentionPolicy,
    Source,
    Status,
)
from memgov_pg.sqlalchemy import install, set_tenant
from tests.attack_helpers import ORG, Logins
from tests.db.test_vocabulary import check_list
from tests.sqlalchemy_helpers import login_engine, reset, sa_url

DIALECT = postgresql.psycopg.dialect()  # type: ignore[attr-defined]


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    reset(db_conn)
    return db_conn


# -- reflection ------------------------------------------------------------------------------------


def _type(column: Column[Any]) -> str:
    return column.type.compile(dialect=DIALECT)


def _normalised_defaults(conn: psycopg.Connection[Any], table: Table) -> dict[str, str | None]:
    """The model's server defaults as PostgreSQL prints them: each is given to a column of a
    temporary table of the same type, and read back with pg_get_expr (rolled back)."""
    out: dict[str, str | None] = {}
    with conn.transaction(force_rollback=True):
        for column in table.columns:
            default = column.server_default
            if column.computed is not None:  # a generated column: its expression, as the model writes it
                out[column.name] = str(column.computed.sqltext)
                continue
            if not isinstance(default, DefaultClause):  # None, FetchedValue: no default in the table
                out[column.name] = None
                continue
            conn.execute(
                sql.SQL("CREATE TEMP TABLE memgov_default_probe (c {} DEFAULT {})").format(
                    sql.SQL(_type(column)),
                    sql.SQL(str(default.arg.text)),  # type: ignore[union-attr]
                )
            )
            row = conn.execute(
                "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d"
                " WHERE d.adrelid = 'memgov_default_probe'::regclass"
            ).fetchone()
            assert row is not None
            out[column.name] = row[0]
            conn.execute("DROP TABLE memgov_default_probe")
    return out


def _reflected_defaults(conn: psycopg.Connection[Any], table: str) -> dict[str, str | None]:
    rows = conn.execute(
        "SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a"
        " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " WHERE a.attrelid = ('memgov.' || %s)::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        (table,),
    ).fetchall()
    return dict(rows)


@pytest.mark.parametrize("table_name", sorted(MODELS))
def test_the_model_is_the_migrated_table(memgov_dsn: str, db_conn: psycopg.Connection[Any], table_name: str) -> None:
    model_table: Table = MODELS[table_name].__table__  # type: ignore[assignment]
    engine = create_engine(sa_url(memgov_dsn))
    try:
        reflected = Table(table_name, MetaData(), schema="memgov", autoload_with=engine)
    finally:
        engine.dispose()

    assert [c.name for c in model_table.columns] == [c.name for c in reflected.columns], "columns (in order)"
    differences = []
    for column in model_table.columns:
        other = reflected.columns[column.name]
        if _type(column) != _type(other):
            differences.append(f"{column.name}: type {_type(column)} in the model, {_type(other)} in the database")
        if column.nullable != other.nullable:
            differences.append(
                f"{column.name}: nullable {column.nullable} in the model, {other.nullable} in the database"
            )
        if bool(column.identity) != bool(other.identity) or (
            column.identity is not None and column.identity.always != other.identity.always  # type: ignore[union-attr]
        ):
            differences.append(f"{column.name}: identity differs")
    assert [c.name for c in model_table.primary_key] == [c.name for c in reflected.primary_key], "primary key"

    model_defaults = _normalised_defaults(db_conn, model_table)
    db_defaults = _reflected_defaults(db_conn, table_name)
    for name, default in model_defaults.items():
        if default != db_defaults[name]:
            differences.append(
                f"{name}: server default {default!r} in the model, {db_defaults[name]!r} in the database"
            )
    assert not differences, "\n".join(differences)


def test_every_table_a_client_reads_has_a_model(db_conn: psycopg.Connection[Any]) -> None:
    wanted = {"long_term_memory_items", "policy_versions", "memory_policy_rules", "decision_log",
              "approval_requests", "quarantine", "feedback_events", "policy_activations"}  # fmt: skip
    tables = {r[0] for r in db_conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'memgov'")}
    assert wanted <= tables
    assert set(MODELS) == wanted
    assert models.memory_items is MemoryItem.__table__
    assert models.metadata.schema == "memgov"


@pytest.mark.parametrize(
    ("table", "column", "enum_class"),
    [
        ("long_term_memory_items", "source", Source),
        ("long_term_memory_items", "status", Status),
        ("long_term_memory_items", "retention_policy", RetentionPolicy),
        ("approval_requests", "status", ApprovalStatus),
        ("quarantine", "status", QuarantineStatus),
        ("feedback_events", "kind", FeedbackKind),
        ("policy_versions", "mode", models.Mode),
        ("memory_policy_rules", "action", models.Action),
    ],
)
def test_enums_are_the_check_lists(db_conn: psycopg.Connection[Any], table: str, column: str, enum_class: Any) -> None:
    assert tuple(m.value for m in enum_class) == check_list(db_conn, table, column)


def test_the_operations_of_requests_are_operations(db_conn: psycopg.Connection[Any]) -> None:
    for table in ("approval_requests", "quarantine"):
        assert set(check_list(db_conn, table, "operation")) <= {m.value for m in models.Operation}


# -- the ORM by a real writer login ------------------------------------------------------------------


def _item(**extra: Any) -> MemoryItem:
    values: dict[str, Any] = {"org_id": ORG, "category": "user_fact", "fact_text": "likes green tea",
                              "source": Source.AGENT_EXTRACTED, "confidence": Decimal("0.9")}  # fmt: skip
    return MemoryItem(**(values | extra))


def test_an_orm_insert_by_a_writer_works_and_fetches_the_engine_columns(
    su: psycopg.Connection[Any], memgov_dsn: str, logins: Logins
) -> None:
    engine = install(login_engine(memgov_dsn, logins.writer), org_id=ORG)
    try:
        with Session(engine) as session:
            memory = _item(metadata_={"k": "v"}, retention_policy=RetentionPolicy.TTL_7D)
            session.add(memory)
            session.commit()
            # fetched back (RETURNING), not sent: the writer holds no privilege on them
            assert memory.status is Status.ACTIVE
            assert memory.policy_version == "1.0.0"
            assert memory.decision_id is not None
            assert memory.expires_at is not None and memory.created_at is not None
            assert memory.expires_at - memory.created_at == __import__("datetime").timedelta(days=7)
            assert memory.last_confirmed_at is None

            # an ORM UPDATE sends the writer's columns only and fetches what the engine changed
            before = memory.updated_at
            memory.fact_text = "likes jasmine tea"
            session.commit()
            assert memory.fact_text == "likes jasmine tea"
            assert memory.updated_at >= before

            loaded = session.scalars(select(MemoryItem).where(MemoryItem.memory_id == memory.memory_id)).one()
            assert loaded.metadata_ == {"k": "v"}
            assert loaded.source is Source.AGENT_EXTRACTED
    finally:
        engine.dispose()
    row = su.execute(
        "SELECT fact_text, status, decision_id IS NOT NULL FROM memgov.long_term_memory_items WHERE memory_id = %s",
        (memory.memory_id,),
    ).fetchone()
    assert row == ("likes jasmine tea", "active", True)


def test_an_orm_insert_without_install_needs_only_the_tenant(
    su: psycopg.Connection[Any], memgov_dsn: str, logins: Logins
) -> None:
    engine = login_engine(memgov_dsn, logins.writer)
    try:
        with Session(engine) as session:
            set_tenant(session, ORG)
            session.add(_item())
            session.commit()
            # set_tenant holds for the session's later transactions too
            assert session.scalars(select(MemoryItem.fact_text)).all() == ["likes green tea"]
    finally:
        engine.dispose()


def test_engine_columns_cannot_be_set() -> None:
    for name in ENGINE_COLUMNS:
        with pytest.raises(AttributeError, match="set by the engine"):
            _item(**{name: None})
    memory = _item()
    with pytest.raises(AttributeError, match="set by the engine"):
        memory.status = Status.ACTIVE


def test_writer_values_are_the_writer_columns() -> None:
    memory_id = uuid.uuid4()
    values = _item(memory_id=memory_id, metadata_={"a": 1}).writer_values()
    assert values == {"memory_id": memory_id, "org_id": ORG, "category": "user_fact", "fact_text": "likes green tea",
                      "source": "agent_extracted", "confidence": Decimal("0.9"), "metadata": {"a": 1}}  # fmt: skip


# -- filters on the enum columns ---------------------------------------------------------------------


def _enum_columns() -> list[tuple[str, str]]:
    return [
        (name, column.name)
        for name, model in MODELS.items()
        for column in model.__table__.columns
        if isinstance(column.type, models.EnumText)
    ]


@pytest.mark.parametrize(("table_name", "column_name"), _enum_columns(), ids=lambda v: str(v))
def test_a_filter_on_an_enum_column_raises_no_warning(
    su: psycopg.Connection[Any], memgov_dsn: str, logins: Logins, table_name: str, column_name: str
) -> None:
    """Every comparison a host writes on an enum column (the review queues' statuses are text
    domains) runs without a warning, as a reviewer login reads the queues."""
    model = MODELS[table_name]
    column = model.__table__.columns[column_name]
    enum_class = column.type.enum_class  # type: ignore[attr-defined]
    first, *_ = list(enum_class)
    engine = install(login_engine(memgov_dsn, logins.reviewer), org_id=ORG)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            stmt = select(model).where(
                column == first, column != first.value, column.in_(list(enum_class)), column.is_not(None)
            )
            with Session(engine) as session:
                assert session.scalars(stmt).all() == []  # the row filter and the comparisons contradict
                session.scalars(select(model).where(column == first).order_by(column)).all()
    finally:
        engine.dispose()
