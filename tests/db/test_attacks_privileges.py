"""Attacks through privileges: what each role may execute, read and own, and what the README promises.

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

from pathlib import Path

import psycopg
import pytest

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.attack_helpers import (
    held,
    insert,
    install_call,
    item,
    memgov_tables,
    policy_text,
    quarantined,
    refused,
    seed,
)

ROOT = Path(__file__).resolve().parents[2]


# == 11. admin is the owner ===================================================================

_EVIL_STATEMENTS = [
    "CREATE TABLE memgov.pwned AS SELECT current_user::text AS who",
    "DELETE FROM memgov.decision_log",
    "UPDATE memgov.approval_requests SET status = 'approved'",
    "SELECT count(*) FROM memgov.long_term_memory_items",
    "SELECT count(*) FROM memgov.channel_secret",
    "INSERT INTO memgov.tenant_grants (role_name, org_id) VALUES ('x', 'acme')",
    "ALTER FUNCTION memgov.decide(memgov.long_term_memory_items, text, text) SECURITY INVOKER",
    "ALTER FUNCTION memgov.{fn}(memgov.long_term_memory_items, text, text) SECURITY INVOKER",
    "ALTER FUNCTION memgov.{fn}(memgov.long_term_memory_items, text, text) SET search_path = public",
    "SET ROLE memgov_owner",
    "SELECT set_config('role', 'memgov_owner', true)",
    "ALTER TABLE memgov.long_term_memory_items DISABLE TRIGGER enforce_write",
    "GRANT memgov_owner TO {admin}",
    "SELECT memgov.grant_tenant('memgov_writer', 'acme')",
    "SELECT memgov.rebuild_dispatch()",
    "SELECT memgov.sweep_batch(1, 'ttl', 10)",
    "SELECT memgov.policy_settings('globex')",
]


def _evil_body(function_name: str, admin_login: str) -> str:
    stmts = ", ".join(
        "'" + s.format(fn=function_name, admin=admin_login).replace("'", "''") + "'" for s in _EVIL_STATEMENTS
    )
    return f"""
DECLARE
    v_stmt text;
BEGIN
    FOREACH v_stmt IN ARRAY ARRAY[{stmts}] LOOP
        BEGIN
            EXECUTE v_stmt;
            RAISE NOTICE 'EVIL DONE as %: %', current_user, v_stmt;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'evil refused (%): %', SQLSTATE, v_stmt;
        END;
    END LOOP;
    RETURN ROW('allow', ARRAY['EVIL']::text[], ARRAY[]::text[], '6.6.6', 'enforce', true,
               NULL::numeric, NULL::text)::memgov.decision;
END
"""


def test_11_install_policy_never_runs_an_admins_code_with_privileges(su, admin, writer, logins):
    """The admin's own decide body, run twice by writes (the second run after it tried to
    ALTER itself into SECURITY INVOKER, i.e. into running as the trigger's memgov_owner)."""
    compiled = compile_policy(load_policy(policy_text("6.6.6")))
    evil = (_evil_body(compiled.function_name, logins.admin), *compiled.bodies[1:])
    logged_before = su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0]
    try:
        with admin.transaction():
            admin.execute(install_call(compiled, bodies=evil))
    except psycopg.Error:
        return  # refused at install: nothing to run
    notices: list[str] = []
    writer.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    for _ in range(2):
        try:
            insert(writer, item("allowed"))
        except psycopg.Error as exc:
            notices.append(f"write failed: {exc.sqlstate}")
    assert any(n.startswith("evil refused") for n in notices), f"the installed body never ran: {notices}"
    done = [n for n in notices if n.startswith("EVIL DONE")]
    assert done == [], done
    assert su.execute("SELECT to_regclass('memgov.pwned')").fetchone() == (None,)
    assert su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0] >= logged_before
    assert not su.execute("SELECT pg_has_role(%s, 'memgov_owner', 'MEMBER')", (logins.admin,)).fetchone()[0]


@pytest.mark.parametrize("delimiter", ["$body$", "$f$", "$$", "$decide$", "$rebuild$", "$compiled$"])
def test_11_a_body_cannot_break_out_of_its_quoting(su, admin, delimiter):
    compiled = compile_policy(load_policy(policy_text("6.6.7")))
    body = compiled.bodies[0] + f"\n{delimiter}; CREATE TABLE memgov.pwned AS SELECT 1; SELECT {delimiter}x"
    with refused(su, "MG500", "42601", "22023"):
        with admin.transaction():
            admin.execute(install_call(compiled, bodies=(body, *compiled.bodies[1:])))


LOG_AND_QUEUE_WRITES = {
    "delete_decision_log": "DELETE FROM memgov.decision_log",
    "update_decision_log": "UPDATE memgov.decision_log SET action = 'allow'",
    "truncate_decision_log": "TRUNCATE memgov.decision_log",
    "insert_decision_log": "INSERT INTO memgov.decision_log (operation, org_id, action, enforced)"
    " VALUES ('remember', 'acme', 'allow', true)",
    "update_approvals": "UPDATE memgov.approval_requests SET status = 'approved', decided_at = now()",
    "delete_quarantine": "DELETE FROM memgov.quarantine",
    "delete_feedback": "DELETE FROM memgov.feedback_events",
    "delete_deletion_log": "DELETE FROM memgov.deletion_log",
    "delete_maintenance_runs": "DELETE FROM memgov.maintenance_runs",
    "update_policy_versions": "UPDATE memgov.policy_versions SET source_yaml = 'forged'",
    "delete_policy_rules": "DELETE FROM memgov.memory_policy_rules",
    "insert_tenant_grants": "INSERT INTO memgov.tenant_grants (role_name, org_id) VALUES ('x', 'acme')",
    "update_engine_locks": "UPDATE memgov.engine_locks SET holder_pid = 1",
    "truncate_memories": "TRUNCATE memgov.long_term_memory_items",
    "disable_trigger": "ALTER TABLE memgov.long_term_memory_items DISABLE TRIGGER enforce_write",
    "drop_policy": "DROP POLICY tenant_isolation ON memgov.long_term_memory_items",
    "replace_decide": "CREATE OR REPLACE FUNCTION memgov.decide(p_item memgov.long_term_memory_items,"
    " p_operation text, p_actor text) RETURNS memgov.decision LANGUAGE sql AS 'SELECT NULL::memgov.decision'",
}


@pytest.mark.parametrize("write", sorted(LOG_AND_QUEUE_WRITES))
def test_11_admin_cannot_write_logs_queues_or_engine_objects_directly(su, writer, reviewer, admin, write):
    held(writer, su)
    quarantined(writer, su)
    reviewer.execute("SELECT memgov.confirm(%s)", (seed(su, "allowed"),))
    su.execute("CALL memgov.run_maintenance()")
    with refused(su, "42501"):
        admin.execute(LOG_AND_QUEUE_WRITES[write])


def test_11_admin_has_no_direct_write_privilege_on_any_table_but_the_memories(su, logins):
    found = []
    for table in memgov_tables(su):
        for privilege in ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"):
            if table == "long_term_memory_items" and privilege in ("INSERT", "UPDATE"):
                continue
            if table == "settings" and privilege == "UPDATE":
                continue  # the contract: memgov_admin changes the engine's settings with UPDATE
            if su.execute(
                "SELECT has_table_privilege(%s, 'memgov.' || %s, %s)", (logins.admin, table, privilege)
            ).fetchone()[0]:
                found.append(f"{privilege} on {table}")
    assert found == []


def test_x_admin_cannot_rewrite_a_finished_maintenance_run(su, admin):
    su.execute("CALL memgov.run_maintenance()")
    (run_id,) = su.execute("SELECT max(run_id) FROM memgov.maintenance_runs").fetchone()
    with refused(su, "55P03"):  # only the backend holding the sweep's lease finishes a run
        admin.execute('SELECT memgov.finish_maintenance(%s, \'{"deleted": {"ttl": 0}, "forged": true}\')', (run_id,))


def test_x_admin_cannot_mark_a_run_interrupted_behind_the_sweeps_back(su, admin):
    with refused(su, "55P03"):
        admin.execute("SELECT memgov.start_maintenance(false)")


def test_x_compiled_policy_functions_run_as_a_role_without_privileges(su):
    owners = su.execute(
        "SELECT DISTINCT pg_get_userbyid(p.proowner) FROM pg_proc p JOIN memgov.policy_versions v"
        " ON p.proname IN (v.function_name, v.function_name || '_explain', v.function_name || '_retention')"
        " WHERE p.pronamespace = 'memgov'::regnamespace"
    ).fetchall()
    assert owners == [("memgov_policy",)]
    privileges = [
        f"{priv} on {t}"
        for t in memgov_tables(su)
        for priv in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")
        if su.execute("SELECT has_table_privilege('memgov_policy', 'memgov.' || %s, %s)", (t, priv)).fetchone()[0]
    ]
    assert privileges == []


def test_x_memgov_policy_cannot_create_objects_in_schema_memgov(su):
    """Compiled bodies run as memgov_policy; only their read-only (STABLE) context keeps a
    CREATE privilege on the schema from being used."""
    assert not su.execute("SELECT has_schema_privilege('memgov_policy', 'memgov', 'CREATE')").fetchone()[0]


# == 12. what the README claims ===============================================================


def test_12_readme_claims_match_the_behaviour(su, writer):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if "invisible to readers" in readme:
        held(writer, su)
        assert writer.execute(
            "SELECT count(*) FROM memgov.long_term_memory_items WHERE status = 'pending_approval'"
        ).fetchone() == (0,), "README says pending rows are invisible to readers; the writer sees them"
    assert "could attach its own trigger" not in readme, "README still states the TEMP-table bypass as a limit"
    assert "(docs/security.md)" in readme, "README does not link the security model"
    security = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    for section in ("## Threat model", "## Tenant binding", "## memgov doctor", "## The decision log"):
        assert section in security, f"docs/security.md has no section {section!r}"


# == new variants ============================================================================

# session_tenant() is inlined into its callers' queries: what it calls runs as them, and
# tells a login no more than session_tenant() itself (whether it may act in a tenant)
SESSION_TENANT = {"memgov.session_tenant()", "memgov.binding_on()", "memgov.login_bound_to(text)"}
# row level security's read test is inlined too: what it calls runs as the client, and
# tells it no more than a SELECT does (whether it may read a row of its own tenant)
READABLE = {"memgov.readable(text,text,memgov.long_term_memory_items)", "memgov.reads_governed(text)",
            "memgov.get_allowed(memgov.long_term_memory_items)",
            "memgov.written_here(memgov.long_term_memory_items)",
            "memgov.read_allowed(text,text,bigint,memgov.long_term_memory_items,text,bigint[],bigint[])",
            "memgov.read_classes(boolean)"}  # fmt: skip
RECALL = {"memgov.search(jsonb)", "memgov.get(uuid)"}
# the LangGraph store's semantic search runs as its caller, under row level security
VECTOR_SEARCH = {"memgov.store_vector_search(text,double precision[],text,jsonb,integer,integer)"}
# the end of a bulk statement lists its shared decisions' memories as the statement's role:
# what it is handed it checks against the log and the rows (tests/db/test_bulk_decisions.py)
STATEMENT_END = {"memgov.list_shared(memgov.shared_decision[])"}
WRITER_API = {"memgov.remember(jsonb)", "memgov.forget(uuid)", "memgov.forget_where(jsonb,boolean)",
              "memgov.evaluate(jsonb,text)",
              "memgov.explain(jsonb,text)", "memgov.apply_retention(uuid)", "memgov.item_from_json(jsonb)",
              "memgov.refresh_ttl(uuid[])", "memgov.sweep_expired(integer)",
              "memgov.store_vectors(uuid,text,text[],real[])",
              *SESSION_TENANT, *READABLE, *RECALL, *STATEMENT_END, *VECTOR_SEARCH}  # fmt: skip
REVIEWER_API = {"memgov.approve(uuid,text)", "memgov.deny(uuid,text)", "memgov.release_quarantine(uuid)",
                "memgov.purge_quarantine(uuid)", "memgov.confirm(uuid)", "memgov.reject(uuid)",
                "memgov.edit(uuid,text)", "memgov.forget(uuid)", "memgov.forget_where(jsonb,boolean)",
                "memgov.apply_retention(uuid)",
                "memgov.evaluate(jsonb,text)", "memgov.explain(jsonb,text)", "memgov.approval_channel()",
                *SESSION_TENANT, *READABLE, *RECALL, *VECTOR_SEARCH}  # fmt: skip
# pure functions of their arguments (detectors, constructors, validators): harmless to anyone
PURE = {"pii_candidate_pattern", "pii_pattern", "card_pattern", "secret_token_candidate_pattern",
        "secret_token_pattern", "secret_assignment_candidate_pattern", "secret_assignment_pattern",
        "luhn_valid", "contains_card", "contains_pii", "contains_secret", "detect_content", "risk_level",
        "ip_address_pattern", "contains_ip_address", "iban_pattern", "iban_valid", "contains_iban",
        "risk_assessment", "is_tenant_id", "decision_json", "check_operation", "no_policy_decision",
        "expiry_of", "content_of", "shortens_life", "stricter", "invoker_role", "raise_denied"}  # fmt: skip


@pytest.mark.parametrize(("role", "api"), [("writer", WRITER_API), ("reviewer", REVIEWER_API), ("nobody", set())])
def test_x_clients_execute_only_the_public_api(su, logins, role, api):
    name = getattr(logins, role)
    rows = su.execute(
        "SELECT p.oid::regprocedure::text, p.proname::text, p.prorettype = 'trigger'::regtype"
        "  FROM pg_proc p WHERE p.pronamespace = 'memgov'::regnamespace"
        "   AND has_function_privilege(%s, p.oid, 'EXECUTE') ORDER BY 1",
        (name,),
    ).fetchall()
    extra = [sig for sig, proname, is_trigger in rows if sig not in api and proname not in PURE and not is_trigger]
    assert extra == [], f"{role} may execute engine-internal functions: {extra}"


@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_x_clients_have_no_write_privilege_on_logs_queues_or_sequences(su, logins, role):
    name = getattr(logins, role)
    found = []
    for table in memgov_tables(su):
        for privilege in ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"):
            if su.execute("SELECT has_table_privilege(%s, 'memgov.' || %s, %s)", (name, table, privilege)).fetchone()[
                0
            ]:
                found.append(f"{privilege} on {table}")
            if (
                table != "long_term_memory_items"
                and su.execute(
                    "SELECT has_any_column_privilege(%s, 'memgov.' || %s, %s)", (name, table, privilege)
                ).fetchone()[0]
                if privilege in ("INSERT", "UPDATE", "REFERENCES")
                else False
            ):
                found.append(f"column {privilege} on {table}")
    for (seq,) in su.execute("SELECT c.oid::regclass::text FROM pg_class c WHERE c.relkind = 'S'"
                             " AND c.relnamespace = 'memgov'::regnamespace").fetchall():  # fmt: skip
        for privilege in ("USAGE", "UPDATE"):
            if su.execute("SELECT has_sequence_privilege(%s, %s, %s)", (name, seq, privilege)).fetchone()[0]:
                found.append(f"{privilege} on {seq}")
    if su.execute("SELECT has_schema_privilege(%s, 'memgov', 'CREATE')", (name,)).fetchone()[0]:
        found.append("CREATE on schema memgov")
    assert found == []


def test_x_writer_column_privileges_leave_the_engine_columns_out(su, logins):
    engine = ["status", "policy_version", "decision_id", "created_at", "updated_at", "last_confirmed_at",
              "expires_at", "low_confidence_since"]  # fmt: skip
    may = [f"{priv} {col}" for col in [*engine, "org_id", "memory_id"] for priv in ("INSERT", "UPDATE")
           if su.execute("SELECT has_column_privilege(%s, 'memgov.long_term_memory_items', %s, %s)",
                         (logins.writer, col, priv)).fetchone()[0]]  # fmt: skip
    assert sorted(may) == ["INSERT memory_id", "INSERT org_id"]


@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_x_every_table_a_client_can_read_has_row_level_security(su, logins, role):
    name = getattr(logins, role)
    open_tables = [
        t for t in memgov_tables(su)
        if su.execute("SELECT has_table_privilege(%s, 'memgov.' || %s, 'SELECT')", (name, t)).fetchone()[0]
        and not su.execute("SELECT relrowsecurity FROM pg_class WHERE oid = ('memgov.' || %s)::regclass",
                           (t,)).fetchone()[0]
    ]  # fmt: skip
    assert open_tables == []


def test_x_every_security_definer_function_pins_its_search_path(su):
    # the decision functions memgov_policy owns pin nothing: only memgov_owner may call them,
    # from functions that pin search_path (checked here), so they run under that path
    loose = [
        sig for (sig,) in su.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'memgov'::regnamespace"
            " AND p.prosecdef AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\\_path=%%')"
            " AND p.proowner <> 'memgov_policy'::regrole ORDER BY 1").fetchall()
    ]  # fmt: skip
    assert loose == [], f"SECURITY DEFINER without a pinned search_path: {loose}"
    callable_by = su.execute(
        "SELECT p.oid::regprocedure::text, r.rolname FROM pg_proc p CROSS JOIN pg_roles r"
        " WHERE p.proowner = 'memgov_policy'::regrole AND r.rolname NOT IN ('memgov_owner', 'memgov_policy')"
        " AND NOT r.rolsuper AND has_function_privilege(r.oid, p.oid, 'EXECUTE')"
    ).fetchall()
    assert callable_by == []


def test_x_a_login_without_memgov_roles_reaches_nothing(su, login, logins):
    seed(su, "allowed")
    conn = login(logins.nobody)
    for statement in ("SELECT * FROM memgov.long_term_memory_items", "SELECT memgov.remember('{}')",
                      "SELECT memgov.session_tenant()", "SELECT memgov.contains_secret('x')"):  # fmt: skip
        with refused(su, "42501"):
            conn.execute(statement)


def test_x_no_memgov_object_is_owned_by_a_login_role(su):
    owned = su.execute(
        "SELECT c.oid::regclass::text, r.rolname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner"
        " WHERE c.relnamespace = 'memgov'::regnamespace AND r.rolcanlogin"
        " UNION ALL SELECT p.oid::regprocedure::text, r.rolname FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner"
        " WHERE p.pronamespace = 'memgov'::regnamespace AND r.rolcanlogin"
    ).fetchall()
    assert owned == []


# == rebuild_dispatch's generators and steps are the engine's ===================================

#: Each rewrites a dispatcher, or the stored rows that follow one (search config, replay
#: samples, read classes): a client that could call one would reroute or rewrite its tenant.
REBUILD_PARTS = """dispatch_decide dispatch_explain_decision dispatch_retention_rule dispatch_policy_settings
dispatch_retention_held dispatch_reads_governed dispatch_search_config reindex_search_config dispatch_sample_rate
drop_unsampled_replays dispatch_read_class dispatch_read_epoch dispatch_read_classes recompute_read_classes""".split()


@pytest.mark.parametrize(
    "call", [*(f"SELECT memgov.{name}()" for name in REBUILD_PARTS), "SELECT memgov.read_class_source('acme')"]
)
@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_x_rebuild_dispatch_generators_and_steps_refuse_clients(su, login, logins, role, call):
    seed(su, "allowed")
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute(call)
