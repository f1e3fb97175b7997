"""Attacks that would stop the engine: denial of service (locks, regexes, huge values) and
locking memgov's tables.

Every test is one attack, named for it, run by login roles of the test cluster
(``user=<login>``), never by a superuser that merely ``SET ROLE``s. Each asserts that the
attack fails *and* that every table, log and queue of schema memgov is exactly as it was
(tests/attack_helpers.py). The fixtures are tests/db/conftest.py's.

Tests named ``test_NN_...`` reproduce the numbered findings of the first attack
review; ``test_x_...`` are variants found while writing these.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import PolicyValidationError, load_policy
from tests.attack_helpers import (
    DAYS_AGO_10,
    as_json,
    assert_same,
    insert,
    item,
    login_dsn,
    memgov_tables,
    memory,
    policy_text,
    refused,
    seed,
    snapshot,
    unchanged,
)
from tests.cli_helpers import assert_one_line_failure, run_memgov

# == 9. denial of service =====================================================================

LOCK_KEYS = ["memgov.run_maintenance", "memgov.deploy", "memgov.maintenance", "memgov.sweep", "memgov.lease"]


def test_09_client_advisory_locks_block_neither_the_sweep_nor_a_deploy(su, login, logins, admin):
    due = seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10)
    holder = login(logins.writer)
    for key in LOCK_KEYS:
        holder.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        holder.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
    xact_holder = login(logins.nobody, None)
    xact_holder.execute("BEGIN")
    for key in LOCK_KEYS:
        xact_holder.execute("SELECT pg_advisory_xact_lock(hashtext(%s), 0)", (key,))
    admin.execute("SET statement_timeout = '120s'")  # a hang fails the test instead of the suite
    admin.execute("CALL memgov.run_maintenance()")
    assert memory(su, due) is None, "the sweep did nothing while a client held the old lock keys"
    assert su.execute("SELECT status FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone() == (
        "finished",
    )
    with admin.transaction():
        admin.execute(compile_policy(load_policy(policy_text("9.0.0"))).install_sql())
    assert su.execute("SELECT version FROM memgov.policy_versions WHERE org_id = '*' AND active").fetchone() == (
        "9.0.0",)  # fmt: skip
    xact_holder.execute("ROLLBACK")


def _regex_policy(pattern: str) -> str:
    return policy_text("4.0.0") + (
        "  - id: slow-regex\n    priority: 40\n"
        f"    when: [{{field: fact_text, operator: regex, value: {json.dumps(pattern)}}}]\n    action: deny\n"
    )


@pytest.mark.parametrize("pattern", [r"(.+)\1\1x", r"(a)\1", r"(?:(x)y)\1"], ids=["issue", "simple", "nested"])
def test_09_a_backreference_regex_is_refused_by_the_validator(pattern):
    with pytest.raises(PolicyValidationError) as info:
        load_policy(_regex_policy(pattern))
    assert "slow-regex" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [r"(.+)\1\1x", "a" * 20000], ids=["backreference", "20000_chars"])
def test_09_a_catastrophic_regex_is_refused_at_deploy(su, logins, memgov_dsn, tmp_path, pattern):
    path = tmp_path / "slow.yaml"
    path.write_text(_regex_policy(pattern), encoding="utf-8")
    before = snapshot(su)
    result = run_memgov("deploy", str(path), "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert_one_line_failure(result)
    assert_same(before, snapshot(su), "deploying a catastrophic regex")


BIG = "x" * 100_000


@pytest.mark.parametrize("path", ["insert", "remember", "insert_held", "insert_quarantined", "update", "edit", "admin"])
def test_09_a_100kb_fact_text_is_refused_before_any_decision(su, writer, reviewer, admin, path):
    target = seed(su, "allowed")
    with refused(su, "54000"):
        if path == "insert":
            insert(writer, item("allowed", fact_text=BIG))
        elif path == "remember":
            writer.execute("SELECT memgov.remember(%s)", (as_json(item("allowed", fact_text=BIG)),))
        elif path == "insert_held":
            insert(writer, item("held", fact_text="likes tea " + BIG))
        elif path == "insert_quarantined":
            insert(writer, item("quarantined", fact_text="olena@example.com " + BIG))
        elif path == "update":
            writer.execute(
                "UPDATE memgov.long_term_memory_items SET fact_text = %s WHERE memory_id = %s", (BIG, target)
            )
        elif path == "edit":
            reviewer.execute("SELECT memgov.edit(%s, %s)", (target, BIG))
        else:
            insert(admin, item("allowed", fact_text=BIG))


@pytest.mark.parametrize("column", ["metadata", "category", "project_id", "subject_id", "context_source"])
def test_x_a_huge_value_in_another_column_is_refused_too(su, writer, column):
    """The fact_text cap is moot if the same megabyte rides in metadata or a scope column
    (and is copied into the approval payload)."""
    huge = "y" * 1_000_000
    value: Any = Jsonb({"blob": huge}) if column == "metadata" else huge
    row = item("held") | {column: value}
    with refused(su, "54000"):
        insert(writer, row)


# == 14. a writer can stop every tenant ======================================================

LOCK_MODES = ["ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE",
              "ACCESS EXCLUSIVE"]  # fmt: skip


@pytest.mark.parametrize("mode", LOCK_MODES)
@pytest.mark.parametrize("role", ["writer", "reviewer", "nobody"])
def test_14_clients_cannot_lock_the_memory_table(su, login, logins, role, mode):
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        with conn.transaction():
            conn.execute(f"LOCK TABLE memgov.long_term_memory_items IN {mode} MODE")


@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_14_clients_cannot_lock_any_memgov_table_exclusively(su, login, logins, role):
    conn = login(getattr(logins, role))
    for table in memgov_tables(su):
        with refused(su, "42501"):
            with conn.transaction():
                conn.execute(sql.SQL("LOCK TABLE memgov.{} IN EXCLUSIVE MODE").format(sql.Identifier(table)))


@pytest.mark.parametrize("strength", ["UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"])
@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_14_clients_cannot_row_lock_logs_queues_or_engine_tables(su, login, logins, role, strength):
    conn = login(getattr(logins, role))
    for table in memgov_tables(su):
        if table == "long_term_memory_items":
            continue  # writers' own rows, in their own tenant: the sweep skips locked rows
        with refused(su, "42501"):
            with conn.transaction():
                conn.execute(sql.SQL("SELECT 1 FROM memgov.{} FOR " + strength).format(sql.Identifier(table)))


@pytest.mark.parametrize(
    "statement",
    ["CREATE TRIGGER t BEFORE INSERT ON memgov.long_term_memory_items FOR EACH ROW"
     " EXECUTE FUNCTION memgov.engine_columns()",
     "CREATE RULE r AS ON INSERT TO memgov.long_term_memory_items DO INSTEAD NOTHING",
     "ALTER TABLE memgov.long_term_memory_items DISABLE TRIGGER enforce_write",
     "CREATE INDEX ON memgov.long_term_memory_items (fact_text)",
     "COMMENT ON TABLE memgov.long_term_memory_items IS 'x'",
     "CREATE TABLE memgov.mine (x int)",
     "CREATE FUNCTION memgov.mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
     "DELETE FROM memgov.long_term_memory_items",
     "TRUNCATE memgov.long_term_memory_items",
     "VACUUM FULL memgov.long_term_memory_items",
     "UPDATE memgov.settings SET value = 1073741823",
     "SELECT setval('memgov.decision_log_decision_id_seq', 9223372036854775807)",
     # the review queues' value lists are domains: nobody but their owner may loosen them
     "ALTER DOMAIN memgov.request_status DROP CONSTRAINT request_status_check",
     "ALTER DOMAIN memgov.operation_type ADD CONSTRAINT open CHECK (true) NOT VALID",
     "DROP DOMAIN memgov.quarantine_status CASCADE"],
    ids=["trigger", "rule", "disable_trigger", "index", "comment", "create_table", "create_function",
         "delete", "truncate", "vacuum_full", "settings", "setval",
         "domain_drop_check", "domain_add_check", "domain_drop"],
)  # fmt: skip
def test_14_a_writer_cannot_alter_lock_or_bypass_the_table(su, writer, statement):
    seed(su, "allowed")
    if statement.startswith("VACUUM"):
        # a non-owner's VACUUM is skipped with a warning: it must take no lock and change nothing
        with unchanged(su):
            writer.execute(statement)
        return
    with refused(su, "42501", "MG403"):
        writer.execute(statement)


def test_14_a_writer_cannot_reference_the_memory_table_from_its_own_table(su, login, logins):
    """A foreign key to memgov's table would take SHARE ROW EXCLUSIVE locks on it and block deletes."""
    su.execute(sql.SQL("CREATE SCHEMA atk AUTHORIZATION {}").format(sql.Identifier(logins.creator)))
    try:
        creator = login(logins.creator)
        with refused(su, "42501"):
            creator.execute(
                "CREATE TABLE atk.fk (m uuid, o text, FOREIGN KEY (m, o) REFERENCES memgov.long_term_memory_items)"
            )
    finally:
        su.execute("DROP SCHEMA atk CASCADE")
