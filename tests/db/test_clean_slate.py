"""tests/clean_slate.py: the slate a test starts from is the one the full wipe and deploy build,
whether the deploy was skipped (the previous test only added rows) or redone (it changed what the
deploy sets)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.attack_helpers import (
    GLOBAL_VERSION,
    ORG,
    OTHER_VERSION,
    Logins,
    deploy_policy,
    seed,
    snapshot,
    snapshot_diff,
)
from tests.clean_slate import fresh
from tests.db.conftest import attack_slate
from tests.decision_cases import MEMGOV_TABLES, wipe

#: what differs between two full builds of the same slate: the deploys' and changes' ids and times
VOLATILE = {
    "deployed_at",
    "read_epoch",
    "activation_id",
    "activated_at",
    "change_id",
    "changed_at",
    "prev_hash",
    "change_hash",
}


def built(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """The snapshot of the database, the volatile columns left out."""
    out = {}
    for name, rows in snapshot(conn).items():
        if name.startswith("memgov."):
            rows = sorted(json.dumps({k: v for k, v in json.loads(r).items() if k not in VOLATILE}) for r in rows)
        out[name] = rows
    return out


def versions(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT org_id, version, active FROM memgov.policy_versions ORDER BY 1, 2").fetchall()


@pytest.fixture
def full(db_conn: psycopg.Connection[Any], logins: Logins) -> dict[str, list[str]]:
    """The slate built the long way (wipe, then the setup), and its snapshot."""
    wipe(db_conn)
    attack_slate(db_conn)
    return built(db_conn)


def test_after_rows_only_the_slate_is_the_full_builds_to_the_byte(db_conn, full, logins):
    fresh(db_conn, attack_slate, key="byte")  # the first time: the full path
    first, raw = built(db_conn), snapshot(db_conn)
    assert not snapshot_diff(full, first)
    assert versions(db_conn) == [("*", GLOBAL_VERSION, True), ("globex", OTHER_VERSION, True)]
    seed(db_conn, "allowed")
    seed(db_conn, "held")
    with psycopg.connect(db_conn.info.dsn, user=logins.writer, autocommit=True) as writer:
        writer.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
        writer.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
            " VALUES ('acme', 'user_fact', 'a decided write', 'agent_extracted', 0.9)"
        )
    assert db_conn.execute("SELECT count(*) FROM memgov.decision_log").fetchone() == (1,)
    fresh(db_conn, attack_slate, key="byte")  # the deploy skipped: the rows deleted, nothing else
    after = snapshot(db_conn)
    assert not snapshot_diff(raw, after), snapshot_diff(raw, after)


@pytest.mark.parametrize(
    "change",
    [
        "deploy 2.0.0",
        "UPDATE memgov.settings SET value = 4096 WHERE name = 'max_fact_text_bytes'",
        "INSERT INTO memgov.tenant_grants (role_name, org_id) VALUES ('{writer}', 'acme')",
        "ALTER TABLE memgov.decision_log DISABLE TRIGGER refuse_change",
        "CREATE OR REPLACE FUNCTION memgov.sample_rate(p_org_id text) RETURNS numeric LANGUAGE sql RETURN 1",
        "COMMENT ON FUNCTION memgov.setting_defaults() IS 'changed'",
        "GRANT CREATE ON SCHEMA memgov TO PUBLIC",
    ],
    ids=["deploy", "setting", "binding", "trigger", "function", "comment", "schema-acl"],
)
def test_a_change_to_what_the_setup_sets_brings_the_full_path_back(db_conn, logins, change):
    def change_it() -> None:
        seed(db_conn, "allowed")
        if change == "deploy 2.0.0":
            deploy_policy(db_conn, "2.0.0")
        else:
            with db_conn.transaction():
                db_conn.execute(change.format(writer=logins.writer))

    fresh(db_conn, attack_slate, key=change)
    change_it()
    fresh(db_conn, attack_slate, key=change)
    checked = built(db_conn)
    assert versions(db_conn) == [("*", GLOBAL_VERSION, True), ("globex", OTHER_VERSION, True)]
    change_it()
    wipe(db_conn)
    attack_slate(db_conn)
    assert not snapshot_diff(built(db_conn), checked), snapshot_diff(built(db_conn), checked)


def test_every_emptied_table_exists(db_conn):
    tables = {
        r[0] for r in db_conn.execute("SELECT relname::text FROM pg_class WHERE relnamespace = 'memgov'::regnamespace")
    }
    assert set(MEMGOV_TABLES) <= tables
