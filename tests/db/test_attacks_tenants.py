"""Attacks across tenants: writing, reading, binding and naming another tenant.

Every test is one attack, named for it, run by login roles of the test cluster
(``user=<login>``; members of memgov_writer / memgov_reviewer / memgov_admin as
deployments grant them), never by a superuser that merely ``SET ROLE``s. Each
asserts that the attack fails (the SQLSTATE the engine promises) *and* that
every table, log and queue of schema memgov is exactly as it was
(tests/attack_helpers.py snapshots them all, tables added later included). The
fixtures (``su``, ``writer``, ``reviewer``, ``admin``, ``login``) are tests/db/conftest.py's.

Tests named ``test_NN_...`` reproduce the numbered findings of the first attack
review; ``test_x_...`` are variants found while writing these.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from memgov_pg.tenants import is_tenant_id
from tests.attack_helpers import (
    DAYS_AGO_10,
    ORG,
    OTHER,
    OTHER_SECRET,
    OTHER_VERSION,
    as_json,
    assert_same,
    bind,
    held,
    insert,
    install_call,
    item,
    login_dsn,
    memgov_tables,
    memory,
    policy_text,
    quarantined,
    refused,
    request_of,
    seed,
    snapshot,
    unchanged,
)
from tests.cli_helpers import assert_one_line_failure, run_memgov

# == 1. foreign tenant through the quarantine / skip path ===============================


@pytest.mark.parametrize("kind", ["quarantined", "held", "denied", "allowed"])
@pytest.mark.parametrize("path", ["insert", "insert_on_deny_skip", "remember"])
def test_01_write_into_another_tenant_is_refused_before_anything_is_logged_or_filed(su, writer, kind, path):
    row = item(kind, org=OTHER)
    with refused(su, "42501"):
        if path == "remember":
            writer.execute("SELECT memgov.remember(%s)", (as_json(row),))
        else:
            with writer.transaction():
                if path == "insert_on_deny_skip":
                    writer.execute("SET LOCAL memgov.on_deny = 'skip'")
                insert(writer, row)


def test_01_foreign_quarantine_entry_never_reaches_the_foreign_reviewer(su, writer, greviewer):
    with refused(su, "42501"):
        writer.execute("SELECT memgov.remember(%s)", (as_json(item("quarantined", org=OTHER)),))
    assert greviewer.execute("SELECT count(*) FROM memgov.quarantine").fetchone() == (0,)


# == 3. SQL injection through the tenant name ============================================

INJECTIONS = {
    "carriage_return": "evil\rCREATE TABLE memgov.pwned AS SELECT current_user::text;\r--",
    "newline": "evil\nCREATE TABLE memgov.pwned AS SELECT current_user::text;\n--",
    "quote": "x'); CREATE TABLE memgov.pwned AS SELECT current_user::text; --",
    "dollar": "x$$; CREATE TABLE memgov.pwned AS SELECT 1; $$",
    "backslash_ampersand": "a\\&b",
    "space": "ac me",
    "empty": "",
    "too_long": "a" * 64,
    "comment": "acme/*x*/",
}


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(policy_text("3.0.0"), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("tenant", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_03_deploy_refuses_a_tenant_name_that_is_not_a_tenant_id(su, logins, memgov_dsn, policy_file, tenant):
    before = snapshot(su)
    result = run_memgov("deploy", str(policy_file), "--tenant", tenant, "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert_one_line_failure(result)
    assert_same(before, snapshot(su), "memgov deploy --tenant <injection>")


@pytest.mark.slow
@pytest.mark.parametrize("tenant", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_03_compile_refuses_a_tenant_name_that_is_not_a_tenant_id(policy_file, tenant):
    result = run_memgov("compile", str(policy_file), "--tenant", tenant)
    assert_one_line_failure(result)
    assert "CREATE TABLE" not in result.stdout


@pytest.mark.slow
def test_03_admin_login_deploys_a_valid_tenant_with_the_cli(su, logins, memgov_dsn, policy_file):
    result = run_memgov("deploy", str(policy_file), "--tenant", "initech", "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert result.returncode == 0, result.stderr
    assert su.execute("SELECT deployed_by, active FROM memgov.policy_versions WHERE org_id = 'initech'").fetchall() == [
        (logins.admin, True)
    ]


@pytest.mark.parametrize("tenant", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_03_install_policy_refuses_a_bad_tenant_id_in_sql(su, admin, tenant):
    compiled = compile_policy(load_policy(policy_text("3.1.0")), "placeholder")
    with refused(su, "22023"):
        admin.execute(install_call(compiled, org=tenant))


@pytest.mark.parametrize("tenant", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_03_admin_cannot_write_a_memory_under_a_bad_tenant_id(su, admin, tenant):
    with refused(su, "22023", "42501", "23514"):
        insert(admin, item("allowed", org=tenant))


def test_03_is_tenant_id_follows_the_contract(writer):
    good = ["acme", "a", "A1", "org.sub_1:x-y", "9" * 63]
    bad = ["", "*", "-acme", ".a", "a b", "a\\&b", "a'b", "a\rb", "é", "a" * 64, "acme\n"]
    got = {t: writer.execute("SELECT memgov.is_tenant_id(%s)", (t,)).fetchone()[0] for t in good + bad}
    assert got == {t: t in good for t in good + bad}
    # the CLI and the compiler check before any database is asked: the same rule
    assert {t: is_tenant_id(t) for t in good + bad} == got


# == 10. cross-tenant reads ==================================================================


@pytest.fixture
def other_tenant_data(su, login, logins):
    """Globex has memories, a held request, a quarantine entry, feedback and a deletion."""
    gwriter = login(logins.gwriter, OTHER)
    greviewer = login(logins.greviewer, OTHER)
    stored = insert(gwriter, item("allowed", org=OTHER)).fetchone()[0]
    held_id = insert(gwriter, item("held", org=OTHER)).fetchone()[0]
    insert(gwriter, item("quarantined", org=OTHER))
    greviewer.execute("SELECT memgov.confirm(%s)", (stored,))
    low = seed(su, "allowed", org=OTHER, confidence=Decimal("0.3"))
    greviewer.execute("SELECT memgov.reject(%s)", (low,))
    return {"memory": stored, "held": held_id, "request": request_of(su, held_id)}


@pytest.mark.parametrize("role", ["writer", "reviewer", "both"])
def test_10_every_table_a_client_reads_shows_only_its_tenant(su, login, logins, other_tenant_data, role):
    conn = login(getattr(logins, role))
    leaks = []
    for table in memgov_tables(su):
        if not conn.execute("SELECT has_table_privilege('memgov.' || %s, 'SELECT')", (table,)).fetchone()[0]:
            continue
        rows = conn.execute(sql.SQL("SELECT to_jsonb(t) FROM memgov.{} t").format(sql.Identifier(table))).fetchall()
        for (row,) in rows:
            if row.get("org_id", ORG) not in (ORG, "*") or OTHER_SECRET in str(row) or OTHER_VERSION in str(row):
                leaks.append(f"{table}: {str(row)[:200]}")
    assert leaks == []


@pytest.mark.parametrize("function", ["evaluate", "explain"])
def test_10_dry_runs_refuse_another_tenant(su, writer, function):
    with refused(su, "42501"):
        writer.execute(f"SELECT memgov.{function}(%s)", (as_json(item("allowed", org=OTHER)),))


_GLOBEX_ROW = 'jsonb_populate_record(NULL::memgov.long_term_memory_items, \'{"org_id": "globex"}\')'
DECISION_CALLS = {
    "policy_settings": "memgov.policy_settings('globex')",
    "decide": "memgov.decide(" + _GLOBEX_ROW + ", 'remember', 'x')",
    "explain_decision": "memgov.explain_decision(" + _GLOBEX_ROW + ", 'remember', 'x')",
    "retention_rule": "memgov.retention_rule(" + _GLOBEX_ROW + ")",
    "feedback_setting": "memgov.feedback_setting('globex', 'confirm_delta')",
    "retention_interval": "memgov.retention_interval('globex', 'approval_ttl')",
    "policy_setting": "memgov.policy_setting('globex', 'retention', 'approval_ttl')",
    "confidence_floor": "memgov.confidence_floor('globex')",
    "approval_channel_of": "memgov.approval_channel('globex')",
}


@pytest.mark.parametrize("call", sorted(DECISION_CALLS))
@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_10_decision_functions_are_not_executable_by_clients(su, login, logins, role, call):
    conn = login(getattr(logins, role))
    with refused(su, "42501", "42883"):
        conn.execute(f"SELECT {DECISION_CALLS[call]}")


@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_10_compiled_policy_functions_of_another_tenant_are_not_executable(su, login, logins, role):
    conn = login(getattr(logins, role))
    (name,) = su.execute("SELECT function_name FROM memgov.policy_versions WHERE org_id = %s", (OTHER,)).fetchone()
    for suffix, args in (("", ", 'remember', 'x'"), ("_explain", ", 'remember', 'x'"), ("_retention", "")):
        with refused(su, "42501"):
            conn.execute(
                sql.SQL("SELECT memgov.{}(NULL::memgov.long_term_memory_items" + args + ")").format(
                    sql.Identifier(name + suffix)
                )
            )


def test_10_approval_notifications_stay_in_their_tenant(su, writer, reviewer, greviewer):
    heard: dict[str, list[str]] = {"acme": [], "globex": []}
    reviewer.add_notify_handler(lambda n: heard["acme"].append(n.payload))
    greviewer.add_notify_handler(lambda n: heard["globex"].append(n.payload))
    (channel,) = reviewer.execute("SELECT memgov.approval_channel()").fetchone()
    (own_channel,) = greviewer.execute("SELECT memgov.approval_channel()").fetchone()
    assert channel != own_channel
    reviewer.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    for ch in ("memgov_approvals", own_channel, "memgov_approvals_acme", "memgov_approvals:acme"):
        greviewer.execute(sql.SQL("LISTEN {}").format(sql.Identifier(ch)))
    _, request_id = held(writer, su)
    for _ in range(3):  # round trips deliver what the server has queued for each session
        reviewer.execute("SELECT 1")
        greviewer.execute("SELECT 1")
    assert heard == {"acme": [str(request_id)], "globex": []}


def test_10_a_bound_reviewer_cannot_get_another_tenants_channel(su, login, logins):
    bind(su, logins.greviewer, OTHER)
    conn = login(logins.greviewer, ORG)
    with refused(su, "42501"):
        conn.execute("SELECT memgov.approval_channel()")


FOREIGN_CALLS = {
    "approve_pending": ("greviewer", "SELECT memgov.approve(%(request)s)"),
    "approve_decided": ("greviewer", "SELECT memgov.approve(%(decided)s)"),
    "deny_pending": ("greviewer", "SELECT memgov.deny(%(request)s)"),
    "release": ("greviewer", "SELECT memgov.release_quarantine(%(quarantine)s)"),
    "purge": ("greviewer", "SELECT memgov.purge_quarantine(%(quarantine)s)"),
    "confirm": ("greviewer", "SELECT memgov.confirm(%(memory)s)"),
    "reject": ("greviewer", "SELECT memgov.reject(%(memory)s)"),
    "edit": ("greviewer", "SELECT memgov.edit(%(memory)s, 'overwritten')"),
    "forget": ("gwriter", "SELECT memgov.forget(%(memory)s)"),
    "apply_retention": ("gwriter", "SELECT memgov.apply_retention(%(due)s)"),
}


@pytest.mark.parametrize("call", sorted(FOREIGN_CALLS))
@pytest.mark.parametrize("ids", ["acme_ids", "random_ids"])
def test_10_another_tenants_ids_answer_mg404_like_missing_ones(su, writer, reviewer, login, logins, call, ids):
    _, request_id = held(writer, su)
    _, decided = held(writer, su)
    reviewer.execute("SELECT memgov.approve(%s)", (decided,))
    _, quarantine_id = quarantined(writer, su)
    targets = {"request": request_id, "decided": decided, "quarantine": quarantine_id,
               "memory": seed(su, "allowed"),
               "due": seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10)}  # fmt: skip
    if ids == "random_ids":
        targets = {k: uuid.uuid4() for k in targets}
    role, stmt = FOREIGN_CALLS[call]
    conn = login(getattr(logins, role), OTHER)
    with refused(su, "MG404"):
        conn.execute(stmt, targets)


# == 13. the tenant and the login ==============================================================


@pytest.mark.parametrize("via", ["login", "set_role_writer", "set_role_chain"])
def test_13_the_log_names_the_login_behind_any_set_role(su, login, logins, via):
    if via == "login":
        conn, who, actor = login(logins.writer), logins.writer, logins.writer
    elif via == "set_role_writer":
        conn, who, actor = login(logins.both), logins.both, "memgov_writer"
        conn.execute("SET ROLE memgov_writer")
    else:
        conn, who, actor = login(logins.chain), logins.chain, "memgov_writer"
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(logins.mid)))
        conn.execute("SET ROLE memgov_writer")
    stored = insert(conn, item("allowed")).fetchone()[0]
    pending = insert(conn, item("held")).fetchone()[0]
    insert(conn, item("quarantined", memory_id=(q := uuid.uuid4())))
    conn.execute("SELECT memgov.forget(%s)", (stored,))
    assert set(su.execute("SELECT actor, login FROM memgov.decision_log").fetchall()) == {(actor, who)}
    assert su.execute("SELECT requested_by, requested_login FROM memgov.approval_requests WHERE memory_id = %s",
                      (pending,)).fetchone() == (actor, who)  # fmt: skip
    assert su.execute("SELECT quarantined_by, quarantined_login FROM memgov.quarantine WHERE memory_id = %s",
                      (q,)).fetchone() == (actor, who)  # fmt: skip
    assert su.execute("SELECT actor, login FROM memgov.feedback_events").fetchall() == [(actor, who)]


@pytest.mark.parametrize("role", ["writer", "reviewer", "admin"])
@pytest.mark.parametrize(
    "statement",
    ["SET SESSION AUTHORIZATION postgres", "SET ROLE memgov_owner", "SET ROLE memgov_policy",
     "SELECT set_config('role', 'memgov_owner', false)", "SET session_replication_role = replica",
     "SELECT set_config('session_replication_role', 'replica', false)"],
)  # fmt: skip
def test_13_clients_cannot_become_the_engine_or_switch_triggers_off(su, login, logins, role, statement):
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute(statement)


def test_13_a_writer_cannot_become_a_reviewer_or_admin(su, writer):
    for target in ("memgov_reviewer", "memgov_admin"):
        with refused(su, "42501"):
            writer.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(target)))


BOUND_ATTACKS: dict[str, Callable[[psycopg.Connection[Any], uuid.UUID], Any]] = {
    "insert_other": lambda c, v: insert(c, item("allowed", org=OTHER)),
    "insert_held_other": lambda c, v: insert(c, item("held", org=OTHER)),
    "insert_quarantined_other": lambda c, v: insert(c, item("quarantined", org=OTHER)),
    "remember_other": lambda c, v: c.execute("SELECT memgov.remember(%s)", (as_json(item("allowed", org=OTHER)),)),
    "remember_denied_other": lambda c, v: c.execute(
        "SELECT memgov.remember(%s)", (as_json(item("denied", org=OTHER)),)
    ),
    "evaluate_other": lambda c, v: c.execute("SELECT memgov.evaluate(%s)", (as_json(item("allowed", org=OTHER)),)),
    "forget_other": lambda c, v: c.execute("SELECT memgov.forget(%s)", (v,)),
    "forget_where_other": lambda c, v: c.execute(
        "SELECT memgov.forget_where(%s)", (Jsonb({"org_id": OTHER, "subject_id": "user-42"}),)
    ),
    "forget_where_session_other": lambda c, v: c.execute(
        "SELECT memgov.forget_where(%s)", (Jsonb({"subject_id": "user-42"}),)
    ),
    "apply_retention_other": lambda c, v: c.execute("SELECT memgov.apply_retention(%s)", (v,)),
}


@pytest.fixture
def globex_memory(su) -> uuid.UUID:
    return seed(su, "allowed", org=OTHER, subject_id="user-42")


@pytest.mark.parametrize("who", ["bound", "member", "bound_set_role"])
@pytest.mark.parametrize("attack", sorted(BOUND_ATTACKS))
def test_13_a_bound_login_cannot_switch_to_another_tenant(su, login, logins, globex_memory, who, attack):
    bind(su, logins.bound, ORG)
    bind(su, logins.team, ORG)
    conn = login(logins.member if who == "member" else logins.bound, OTHER)
    if who == "bound_set_role":
        conn.execute("SET ROLE memgov_writer")
    assert conn.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone() == (0,)
    assert conn.execute("SELECT memgov.session_tenant()").fetchone() == (None,)
    with unchanged(su):
        assert conn.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'x'").rowcount == 0
    # by id, another tenant's memory is as missing as one that never existed (MG404)
    with refused(su, "MG404" if attack in ("forget_other", "apply_retention_other") else "42501"):
        BOUND_ATTACKS[attack](conn, globex_memory)


def test_13_a_bound_login_cannot_switch_tenant_inside_a_statement(su, login, logins, globex_memory):
    bind(su, logins.bound, ORG)
    conn = login(logins.bound, ORG)
    rows = conn.execute(
        "SELECT m.org_id FROM (SELECT set_config('memgov.org_id', 'globex', false)) s, memgov.long_term_memory_items m"
    ).fetchall()
    assert rows == []
    with refused(su, "42501", "MG404"):
        conn.execute(
            "SELECT memgov.forget(%s) FROM (SELECT set_config('memgov.org_id', 'globex', false)) s", (globex_memory,)
        )


def test_13_a_bound_login_works_in_its_own_tenant(su, login, logins):
    bind(su, logins.bound, ORG)
    conn = login(logins.bound, ORG)
    memory_id, status = insert(conn, item("allowed")).fetchone()
    assert status == "active" and memory(su, memory_id) is not None


@pytest.mark.parametrize("variant", ["ACME", "acme ", " acme", "acme\n", "acmé"])
def test_13_a_lookalike_tenant_id_is_another_tenant(su, writer, variant):
    with refused(su, "42501", "22023"):
        insert(writer, item("allowed", org=variant))


@pytest.mark.parametrize("role", ["writer", "reviewer"])
@pytest.mark.parametrize("call", ["grant_tenant", "revoke_tenant"])
def test_13_clients_cannot_bind_or_unbind_tenants(su, login, logins, role, call):
    bind(su, logins.bound, ORG)
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute(f"SELECT memgov.{call}(%s, %s)", (logins.bound, OTHER if call == "grant_tenant" else ORG))


def test_13_a_grant_binds_sessions_that_are_already_open_and_their_prepared_statements(su, login, logins):
    """Binding is a constant that row security folds into plans: a grant made while a login's
    session holds prepared statements must still bind that session at its next execution."""
    conn = login(logins.bound, OTHER)
    select = "SELECT count(*) FROM memgov.long_term_memory_items"
    for _ in range(6):  # past psycopg's prepare threshold and the server's custom-plan tries
        conn.execute(select, prepare=True)
        conn.execute("SELECT memgov.session_tenant()", prepare=True)
    seed(su, "allowed", org=OTHER)
    assert conn.execute(select, prepare=True).fetchone() == (1,)
    bind(su, logins.bound, ORG)  # bound to acme: globex is no longer this login's tenant
    assert conn.execute(select, prepare=True).fetchone() == (0,)
    assert conn.execute("SELECT memgov.session_tenant()", prepare=True).fetchone() == (None,)
    with refused(su, "42501"):
        insert(conn, item("allowed", org=OTHER))
    su.execute("SELECT memgov.revoke_tenant(%s, %s)", (logins.bound, ORG))  # the last grant: binding off
    assert conn.execute(select, prepare=True).fetchone() == (1,)


@pytest.mark.parametrize("role", ["writer", "reviewer"])
@pytest.mark.parametrize(
    "attack",
    ["CREATE OR REPLACE FUNCTION memgov.binding_on() RETURNS boolean LANGUAGE sql RETURN false",
     "DELETE FROM memgov.tenant_grants",
     "INSERT INTO memgov.tenant_grants (role_name, org_id) VALUES (current_user, 'globex')",
     "ALTER TABLE memgov.tenant_grants DISABLE TRIGGER rebuild_binding",
     "SELECT memgov.rebuild_binding()"],
)  # fmt: skip
def test_13_clients_cannot_switch_binding_off(su, login, logins, role, attack):
    bind(su, logins.bound, ORG)
    conn = login(getattr(logins, role))
    with refused(su, "42501", "0A000"):
        conn.execute(attack)
    assert su.execute("SELECT memgov.binding_on()").fetchone() == (True,)


def test_13_grants_change_only_in_read_committed_transactions(su, admin, logins):
    """A snapshot older than a concurrent grant could otherwise turn binding off."""
    with refused(su, "25001"):
        with admin.transaction():
            admin.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            admin.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.bound, ORG))
    assert su.execute("SELECT memgov.binding_on()").fetchone() == (False,)


@pytest.mark.parametrize(("role", "org", "code"), [("no_such_role_xyz", ORG, "42704"), (None, "a b", "22023"),
                                                   (None, "*", "22023"), (None, "", "22023")])  # fmt: skip
def test_13_grant_tenant_refuses_bad_arguments(su, admin, logins, role, org, code):
    with refused(su, code):
        admin.execute("SELECT memgov.grant_tenant(%s, %s)", (role or logins.bound, org))


def test_x_a_multi_row_insert_with_one_foreign_row_stores_and_logs_nothing(su, writer):
    rows = [item("allowed"), item("held"), item("quarantined", org=OTHER)]
    columns = ("org_id", "category", "fact_text", "source", "confidence", "context_source")
    values = ", ".join(["(%s, %s, %s, %s, %s::numeric, %s)"] * len(rows))
    with refused(su, "42501"):
        writer.execute(
            f"INSERT INTO memgov.long_term_memory_items ({', '.join(columns)}) SELECT * FROM (VALUES {values}) v",
            [r.get(c) for r in rows for c in columns],
        )


@pytest.mark.parametrize("kind", ["allowed", "quarantined"])
def test_x_an_upsert_into_another_tenant_is_refused(su, writer, globex_memory, kind):
    row = item(kind, org=OTHER, memory_id=globex_memory)
    with refused(su, "42501"):
        writer.execute(
            "INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence,"
            " context_source) VALUES (%(memory_id)s, %(org_id)s, %(category)s, %(fact_text)s, %(source)s,"
            " %(confidence)s, %(context_source)s)"
            " ON CONFLICT (memory_id, org_id) DO UPDATE SET fact_text = 'overwritten'",
            row | {"context_source": row.get("context_source")},
        )
    assert memory(su, globex_memory, OTHER)["fact_text"] == "likes green tea"


def test_x_copy_into_another_tenant_is_refused(su, writer):
    # 0A000: COPY FROM is refused outright on a table with row level security
    with refused(su, "42501", "0A000"):
        with writer.cursor().copy(
            "COPY memgov.long_term_memory_items (org_id, category, fact_text, source, confidence, context_source)"
            " FROM STDIN"
        ) as copy:
            copy.write_row(("acme", "user_fact", "fine", "agent_extracted", "0.9", None))
            copy.write_row((OTHER, "user_fact", "olena@example.com", "agent_extracted", "0.9", "custom"))


@pytest.mark.parametrize("who", ["writer", "admin"])
def test_x_an_update_cannot_move_a_memory_to_another_tenant(su, writer, admin, who):
    memory_id = seed(su, "allowed")
    conn = writer if who == "writer" else admin
    with refused(su, "42501"):
        conn.execute("UPDATE memgov.long_term_memory_items SET org_id = %s WHERE memory_id = %s", (OTHER, memory_id))


@pytest.mark.parametrize("org", [None, "", "*"], ids=["null", "empty", "global_scope"])
@pytest.mark.parametrize("session_org", [ORG, None, "*"], ids=["session_acme", "session_unset", "session_global"])
def test_x_null_empty_or_global_org_id_is_refused(su, login, logins, org, session_org):
    conn = login(logins.writer, session_org)
    with refused(su, "42501", "22023", "23502", "23514"):
        insert(conn, item("allowed") | {"org_id": org})


@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_x_row_security_off_is_an_error_not_a_bypass(su, login, logins, globex_memory, role):
    conn = login(getattr(logins, role))
    conn.execute("SET row_security = off")
    with refused(su, "42501"):
        conn.execute("SELECT * FROM memgov.long_term_memory_items").fetchall()


def test_x_a_memory_id_reused_by_another_tenant_does_not_hijack_feedback(su, login, logins):
    """Feedback functions find a memory by id: a tenant that reuses another tenant's id must not
    make the owner's confirm/forget hit (or miss) the wrong row."""
    victim = seed(su, "allowed", org=OTHER)
    attacker = login(logins.writer, ORG)
    insert(attacker, item("allowed", memory_id=victim))
    greviewer = login(logins.greviewer, OTHER)
    result = greviewer.execute("SELECT memgov.confirm(%s)", (victim,)).fetchone()[0]
    assert result["outcome"] == "confirmed"
    assert memory(su, victim, OTHER)["last_confirmed_at"] is not None
    assert memory(su, victim, ORG)["last_confirmed_at"] is None


def test_x_admin_feedback_on_an_id_two_tenants_share_is_not_silently_arbitrary(su, admin, login, logins):
    """memgov_admin sees every tenant: an id present in two tenants must not pick one at random.
    With no tenant named it is refused (MG409); with one named, that tenant's memory is meant."""
    shared = seed(su, "allowed", org=OTHER)
    insert(login(logins.writer), item("allowed", memory_id=shared))
    anywhere = login(logins.admin, None)
    with refused(su, "MG409"):
        anywhere.execute("SELECT memgov.confirm(%s)", (shared,))
    admin.execute("SELECT memgov.confirm(%s)", (shared,))
    confirmed = su.execute(
        "SELECT org_id FROM memgov.long_term_memory_items WHERE memory_id = %s AND last_confirmed_at IS NOT NULL",
        (shared,),
    ).fetchall()
    assert confirmed == [(ORG,)]


@pytest.mark.parametrize(
    ("role", "table", "column"),
    [("writer", "long_term_memory_items", "fact_text"), ("reviewer", "long_term_memory_items", "fact_text"),
     ("reviewer", "approval_requests", "payload"), ("reviewer", "quarantine", "payload"),
     ("reviewer", "decision_log", "org_id"), ("writer", "policy_versions", "source_yaml")],
)  # fmt: skip
def test_x_a_leaky_function_in_a_where_clause_sees_only_the_tenants_rows(
    su, login, logins, other_tenant_data, role, table, column
):
    """The classic row-security leak: a function of the client's own, in a WHERE clause,
    that reports every value it is shown. Row security must filter before it runs."""
    writer = login(logins.writer)
    insert(writer, item("allowed"))
    held(writer, su)
    quarantined(writer, su)
    conn = login(getattr(logins, role))
    conn.execute(
        "CREATE FUNCTION pg_temp.leak(v anyelement) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS"
        " $$ BEGIN RAISE NOTICE 'leak: %', v; RETURN true; END $$"
    )
    seen: list[str] = []
    conn.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
    conn.execute(
        sql.SQL("SELECT count(*) FROM memgov.{} t WHERE pg_temp.leak(t.{}::text)").format(
            sql.Identifier(table), sql.Identifier(column)
        )
    )
    assert seen, "the function never ran"
    leaked = [s for s in seen if OTHER in s or OTHER_SECRET in s or OTHER_VERSION in s]
    assert leaked == []


def test_x_a_login_whose_name_needs_quoting_can_be_bound_and_stays_bound(su, login, logins):
    """grant_tenant takes a role *name* (memgov tenant grant ROLE ORG): a mixed-case login must
    be found, bound, and then held to its tenant like any other."""
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (logins.mixed, ORG))
    conn = login(logins.mixed, OTHER)
    assert conn.execute("SELECT memgov.session_tenant()").fetchone() == (None,)
    with refused(su, "42501"):
        insert(conn, item("allowed", org=OTHER))


def test_x_releasing_an_id_another_tenant_uses_reveals_nothing(su, login, logins):
    """A quarantined write reusing another tenant's memory_id is released like any other:
    MG409 there would tell globex that acme has that id."""
    acme_id = seed(su, "allowed")
    gwriter = login(logins.gwriter, OTHER)
    _, quarantine_id = quarantined(gwriter, su, memory_id=acme_id, org_id=OTHER)
    greviewer = login(logins.greviewer, OTHER)
    assert greviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,)).fetchone()[0]["status"] == (
        "released"
    )
    assert memory(su, acme_id, OTHER) is not None and memory(su, acme_id, ORG)["fact_text"] == "likes green tea"
