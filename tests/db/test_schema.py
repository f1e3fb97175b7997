"""The memgov schema: its tables, their constraints, roles and tenancy."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy

DOCUMENTED_COLUMNS = {
    "long_term_memory_items": {
        "memory_id", "org_id", "project_id", "agent_id", "subject_id", "session_id", "category",
        "fact_text", "source", "confidence", "is_sensitive", "retention_policy", "context_source",
        "metadata", "status", "created_at", "updated_at", "last_confirmed_at", "expires_at",
        "low_confidence_since", "policy_version", "decision_id",
    },
    "memory_policy_rules": {
        "rule_id", "rule_key", "org_id", "category", "condition", "action", "priority",
        "reason_codes", "policy_version",
    },
    "policy_versions": {
        "version", "org_id", "sha256", "source_yaml", "compiled_sql", "deployed_at", "deployed_by",
        "active",
    },
    "decision_log": {
        "decision_id", "decided_at", "operation", "memory_id", "org_id", "action", "reason_codes",
        "matched_rule_ids", "policy_version", "mode", "enforced", "actor", "risk_score", "risk_level",
    },
    "approval_requests": {
        "request_id", "memory_id", "org_id", "operation", "payload", "status", "requested_at",
        "requested_by", "decided_at", "decided_by", "note",
    },
    "quarantine": {"quarantine_id", "org_id", "payload", "decision", "quarantined_at", "status"},
    "feedback_events": {
        "event_id", "memory_id", "kind", "confidence_before", "confidence_after", "actor", "at",
    },
}  # fmt: skip

ITEM = {
    "org_id": "acme",
    "category": "preference",
    "fact_text": "prefers dark mode",
    "source": "user_confirmed",
    "confidence": 0.9,
}


def insert_item(conn: psycopg.Connection, **overrides: object) -> None:
    """Insert as memgov_owner: the engine's own path, where only the table's constraints judge."""
    row = ITEM | overrides
    cols = ", ".join(row)
    params = ", ".join(f"%({k})s" for k in row)
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute(f"INSERT INTO memgov.long_term_memory_items ({cols}) VALUES ({params})", row)


@pytest.fixture(scope="module", autouse=True)
def allow_everything(memgov_dsn):
    """A policy that stores every write, so these tests see the schema and not the rules."""
    with psycopg.connect(memgov_dsn) as conn:
        policy = load_policy(
            'version: "0.0.1"\ndefaults: {on_policy_miss: allow}\n'
            'sources: {user_confirmed: ["*"], system_rule: ["*"]}\n'
        )
        conn.execute(compile_policy(policy).install_sql())


@pytest.mark.parametrize("table", sorted(DOCUMENTED_COLUMNS))
def test_spec_tables_have_their_public_columns(db_conn, table):
    rows = db_conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'memgov' AND table_name = %s",
        (table,),
    ).fetchall()
    missing = DOCUMENTED_COLUMNS[table] - {r[0] for r in rows}
    assert not missing, f"memgov.{table} lacks {sorted(missing)}"


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"confidence": 1.5}, errors.CheckViolation),
        ({"confidence": -0.001}, errors.CheckViolation),
        ({"confidence": None}, errors.NotNullViolation),
        ({"org_id": None}, errors.NotNullViolation),
        ({"org_id": ""}, errors.CheckViolation),
        ({"source": "rumour"}, errors.CheckViolation),
        ({"retention_policy": "forever"}, errors.CheckViolation),
        ({"status": "archived"}, errors.CheckViolation),
        ({"metadata": psycopg.types.json.Jsonb([1, 2])}, errors.CheckViolation),
        ({"fact_text": None}, errors.NotNullViolation),
    ],
    ids=lambda v: str(v) if not isinstance(v, dict) else ",".join(f"{k}={v[k]!r}" for k in v),
)
def test_item_constraints_reject_bad_rows(db_conn, overrides, error):
    with pytest.raises(error):
        insert_item(db_conn, **overrides)


def test_confidence_is_exact_numeric_with_three_decimals(db_conn):
    insert_item(db_conn, org_id="numeric-test", confidence="0.6")
    insert_item(db_conn, org_id="numeric-test", confidence="0.12345")
    values = db_conn.execute(
        "SELECT confidence::text FROM memgov.long_term_memory_items WHERE org_id = 'numeric-test' ORDER BY confidence"
    ).fetchall()
    assert [v[0] for v in values] == ["0.123", "0.600"]
    total = db_conn.execute(
        "SELECT (confidence + 0.1)::text FROM memgov.long_term_memory_items"
        " WHERE org_id = 'numeric-test' AND confidence = 0.6"
    ).fetchone()
    assert total == ("0.700",)


def test_every_unique_key_contains_org_id(db_conn):
    rows = db_conn.execute(
        """
        SELECT i.indexrelid::regclass::text,
               bool_or(a.attname = 'org_id') AS has_org
          FROM pg_index i
          JOIN pg_class c ON c.oid = i.indrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
         WHERE n.nspname = 'memgov' AND (i.indisunique OR i.indisprimary)
         GROUP BY 1
        """
    ).fetchall()
    assert rows, "no unique keys found"
    # the engine's own settings and locks belong to no tenant, nor do the nonces of standby reads
    engine = {"memgov.settings_pkey", "memgov.engine_locks_pkey", "memgov.settings_changes_pkey",
              "memgov.standby_reads_pkey"}  # fmt: skip
    assert [name for name, has_org in rows if not has_org and name not in engine] == []


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("long_term_memory_items", "expires_at"),
        ("long_term_memory_items", "low_confidence_since"),
        ("approval_requests", "requested_at"),
    ],
)
def test_retention_and_approval_columns_have_partial_indexes(db_conn, table, column):
    found = db_conn.execute(
        """
        SELECT count(*)
          FROM pg_index i
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
         WHERE i.indrelid = ('memgov.' || %s)::regclass
           AND a.attname = %s
           AND i.indpred IS NOT NULL
        """,
        (table, column),
    ).fetchone()
    assert found and found[0] >= 1


def test_roles_are_nologin_and_no_application_role_owns_anything(db_conn):
    roles = dict(
        db_conn.execute(
            "SELECT rolname, rolcanlogin FROM pg_roles"
            " WHERE rolname IN ('memgov_owner', 'memgov_writer', 'memgov_reviewer', 'memgov_admin')"
        ).fetchall()
    )
    assert roles == {
        "memgov_owner": False,
        "memgov_writer": False,
        "memgov_reviewer": False,
        "memgov_admin": False,
    }
    owners = db_conn.execute(
        """
        SELECT DISTINCT pg_get_userbyid(c.relowner)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'memgov'
        UNION
        SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'memgov'
        """
    ).fetchall()
    assert {o[0] for o in owners} == {"memgov_owner"}


def _drop_tenants(db_conn) -> None:
    with db_conn.transaction():  # memgov's own path: a client's DELETE is refused
        db_conn.execute("SET LOCAL ROLE memgov_owner")
        db_conn.execute("DELETE FROM memgov.long_term_memory_items WHERE org_id IN ('t-a', 't-b')")


@pytest.fixture
def tenants(db_conn):
    _drop_tenants(db_conn)
    insert_item(db_conn, org_id="t-a", fact_text="a's fact")
    insert_item(db_conn, org_id="t-b", fact_text="b's fact")
    yield
    _drop_tenants(db_conn)


def visible_tenants(conn: psycopg.Connection, role: str, org: str | None) -> list[str]:
    with conn.transaction(force_rollback=True):
        conn.execute(f"SET LOCAL ROLE {role}")
        if org is not None:
            conn.execute("SELECT set_config('memgov.org_id', %s, true)", (org,))
        rows = conn.execute(
            "SELECT DISTINCT org_id FROM memgov.long_term_memory_items WHERE org_id IN ('t-a', 't-b') ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize("role", ["memgov_writer", "memgov_reviewer"])
def test_tenant_roles_see_only_their_tenant(db_conn, tenants, role):
    assert visible_tenants(db_conn, role, None) == []
    assert visible_tenants(db_conn, role, "t-a") == ["t-a"]
    assert visible_tenants(db_conn, role, "t-b") == ["t-b"]


def test_admin_sees_every_tenant(db_conn, tenants):
    assert visible_tenants(db_conn, "memgov_admin", None) == ["t-a", "t-b"]


def writer_insert(conn: psycopg.Connection, **overrides: object) -> None:
    row = ITEM | overrides
    cols = ", ".join(row)
    params = ", ".join(f"%({k})s" for k in row)
    conn.execute(f"INSERT INTO memgov.long_term_memory_items ({cols}) VALUES ({params})", row)


def test_writer_cannot_write_into_another_tenant(db_conn):
    with db_conn.transaction(force_rollback=True):
        db_conn.execute("SET LOCAL ROLE memgov_writer")
        db_conn.execute("SELECT set_config('memgov.org_id', 't-a', true)")
        writer_insert(db_conn, org_id="t-a")
        with pytest.raises(errors.InsufficientPrivilege):
            with db_conn.transaction():
                writer_insert(db_conn, org_id="t-b")


@pytest.mark.parametrize(
    "column",
    [
        "status",
        "policy_version",
        "decision_id",
        "created_at",
        "expires_at",
        "low_confidence_since",
        "last_confirmed_at",
        "updated_at",
    ],
)
def test_writer_cannot_set_engine_columns(db_conn, column):
    value = {"status": "active", "policy_version": "9.9.9", "decision_id": 1}.get(column, "2020-01-01T00:00:00Z")
    with db_conn.transaction(force_rollback=True):
        db_conn.execute("SET LOCAL ROLE memgov_writer")
        db_conn.execute("SELECT set_config('memgov.org_id', 'acme', true)")
        with pytest.raises(errors.InsufficientPrivilege):
            with db_conn.transaction():
                writer_insert(db_conn, **{column: value})
        writer_insert(db_conn, fact_text="engine-columns probe")
        with pytest.raises(errors.InsufficientPrivilege):
            db_conn.execute(
                f"UPDATE memgov.long_term_memory_items SET {column} = %s WHERE fact_text = 'engine-columns probe'",
                (value,),
            )


def test_writer_cannot_touch_the_decision_log(db_conn):
    with db_conn.transaction(force_rollback=True):
        db_conn.execute("SET LOCAL ROLE memgov_writer")
        with pytest.raises(errors.InsufficientPrivilege):
            db_conn.execute(
                "INSERT INTO memgov.decision_log (operation, org_id, action, enforced)"
                " VALUES ('remember', 't-a', 'allow', true)"
            )
