"""Attacks on the engine, as real login roles (issue 9).

Every test is one attack, named for it, run by login roles of the test cluster
(``user=<login>``; members of memgov_writer / memgov_reviewer / memgov_admin as
deployments grant them), never by a superuser that merely ``SET ROLE``s. Each
asserts that the attack fails (the SQLSTATE the engine promises) *and* that
every table, log and queue of schema memgov is exactly as it was
(tests/attack_helpers.py snapshots them all, tables added later included).

Tests named ``test_NN_...`` reproduce the numbered findings of issue 9;
``test_x_...`` are variants found while writing these.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Json, Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import PolicyValidationError, load_policy
from memgov_pg.tenants import is_tenant_id
from tests.attack_helpers import (
    GLOBAL_VERSION,
    ORG,
    OTHER,
    OTHER_SECRET,
    OTHER_VERSION,
    POLICY,
    Login,
    Logins,
    as_json,
    assert_same,
    deploy_policies,
    deploy_policy,
    insert,
    item,
    login_dsn,
    memgov_tables,
    memory,
    quarantine_of,
    refused,
    request_of,
    seed,
    snapshot,
    unchanged,
)
from tests.decision_cases import wipe

ROOT = Path(__file__).resolve().parents[2]
MEMGOV = Path(sys.executable).with_name("memgov")
NOW = dt.datetime.now(dt.UTC)
DAYS_AGO_10 = NOW - dt.timedelta(days=10)


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    """The superuser: empty tables, no tenant bindings, the attack policy (global + globex)."""
    wipe(db_conn)
    tables = memgov_tables(db_conn)
    with db_conn.transaction():
        db_conn.execute("SET LOCAL ROLE memgov_owner")
        if "tenant_grants" in tables:
            db_conn.execute("DELETE FROM memgov.tenant_grants")
        if "settings" in tables:
            db_conn.execute("UPDATE memgov.settings SET value = 65536 WHERE name = 'max_fact_text_bytes'")
    deploy_policies(db_conn)
    return db_conn


@pytest.fixture
def admin(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    return login(logins.admin)


@pytest.fixture
def greviewer(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    return login(logins.greviewer, OTHER)


def held(writer: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any) -> tuple[uuid.UUID, uuid.UUID]:
    """A held INSERT by ``writer``: (memory_id, request_id)."""
    row = insert(writer, item("held", **extra)).fetchone()
    assert row is not None and row[1] == "pending_approval", row
    return row[0], request_of(su, row[0])


def quarantined(
    writer: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any
) -> tuple[uuid.UUID, uuid.UUID]:
    """A quarantined INSERT by ``writer``: (memory_id, quarantine_id)."""
    memory_id = extra.pop("memory_id", None) or uuid.uuid4()
    cur = insert(writer, item("quarantined", memory_id=memory_id, **extra))
    assert cur.rowcount == 0
    return memory_id, quarantine_of(su, memory_id)


def bind(su: psycopg.Connection[Any], role: str, org: str) -> None:
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (role, org))


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The venv's `memgov` command, with no MEMGOV_DSN / MEMGOV_HOME from the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME")}
    return subprocess.run([str(MEMGOV), *args], capture_output=True, text=True, env=env, timeout=timeout)


def assert_one_line_failure(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr


def policy_text(version: str = "2.0.0", description: str = "attack tests") -> str:
    return POLICY.format(version=version, description=description)


def install_call(compiled: Any, org: str = "*", bodies: tuple[str, str, str] | None = None) -> sql.Composed:
    """memgov.install_policy(...) with named arguments; ``bodies`` replace the compiled ones."""
    p = compiled.policy
    decide, explain, retention = bodies or compiled.bodies
    args = {
        "p_org_id": org, "p_version": p.version, "p_sha256": p.sha256, "p_mode": p.mode,
        "p_function_name": compiled.function_name, "p_source_yaml": p.source_text,
        "p_decide_body": decide, "p_explain_body": explain, "p_retention_body": retention,
    }  # fmt: skip
    parts = [sql.SQL("{} => {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in args.items()]
    parts.append(sql.SQL("p_settings => {}").format(sql.Literal(Jsonb(compiled.settings()))))
    parts.append(sql.SQL("p_rules => {}").format(sql.Literal(Jsonb(compiled.rule_rows()))))
    return sql.SQL("SELECT memgov.install_policy({})").format(sql.SQL(", ").join(parts))


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


# == 2. govern_write (and its successors) called from the writer's own trigger ==========

_FORGE = """
CREATE FUNCTION pg_temp.forge() RETURNS trigger LANGUAGE plpgsql AS $forge$
DECLARE
    v_item memgov.long_term_memory_items :=
        jsonb_populate_record(NULL::memgov.long_term_memory_items, {item}::jsonb);
BEGIN
    PERFORM {call};
    RETURN NEW;
END
$forge$
"""
_FORGED_DECISION = (
    "ROW('allow', ARRAY['FORGED']::text[], ARRAY[]::text[], '1.0.0', 'enforce', true, 0, 'low')::memgov.decision"
)
_FORGE_CALLS = {
    "govern_write": "memgov.govern_write({op}, v_item, {actor})",
    "govern": "memgov.govern({op}, v_item, {actor}, " + _FORGED_DECISION + ", NULL)",
    "apply_write": "memgov.apply_write({op}, v_item, '1.0.0', NULL, false)",
}


@pytest.mark.parametrize("function", sorted(_FORGE_CALLS))
@pytest.mark.parametrize("forgery", ["foreign_tenant_as_admin", "forget_as_another_reviewer", "held_as_reviewer"])
def test_02_temp_table_trigger_cannot_reach_the_write_path(su, writer, logins, function, forgery):
    victim = seed(su, "allowed")
    forged: dict[str, Any]
    if forgery == "foreign_tenant_as_admin":
        op, actor = "remember", "memgov_admin"
        forged = as_json(item("allowed", org=OTHER, memory_id=uuid.uuid4(), source="user_confirmed",
                              created_at="2099-01-01T00:00:00Z", status="active")).obj  # fmt: skip
    elif forgery == "forget_as_another_reviewer":
        op, actor = "forget", logins.reviewer2
        forged = {"memory_id": str(victim), "org_id": ORG}
    else:
        op, actor = "remember", logins.reviewer
        forged = as_json(item("held", memory_id=uuid.uuid4())).obj
    call = _FORGE_CALLS[function].format(
        op=sql.Literal(op).as_string(writer), actor=sql.Literal(actor).as_string(writer)
    )
    body = _FORGE.format(item=sql.Literal(Json(forged)).as_string(writer), call=call)
    # an unknown function (42883) fails as surely as a refused one; both leave no trace
    with refused(su, "42501", "42883"):
        with writer.transaction():
            writer.execute("CREATE TEMP TABLE bait (x int)")
            writer.execute(body)
            writer.execute(
                "CREATE TRIGGER forge BEFORE INSERT ON pg_temp.bait FOR EACH ROW EXECUTE FUNCTION pg_temp.forge()"
            )
            writer.execute("INSERT INTO pg_temp.bait VALUES (1)")
    assert memory(su, victim) is not None


def test_02_no_client_role_may_execute_a_write_path_internal(su, logins):
    internals = su.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'memgov'::regnamespace"
        " AND p.proname IN ('govern_write', 'govern', 'apply_write', 'close_request', 'approve_request',"
        " 'deny_request', 'govern_feedback_write', 'record_feedback', 'log_deletion', 'sweep_batch',"
        " 'enforce_write', 'log_decision', 'first_shared', 'share_decision', 'seal_batch', 'session_key',"
        " 'engine_token', 'engine_writes', 'engine_writes_done', 'is_engine_write', 'drop_samples')"
    ).fetchall()
    assert internals, "no write-path internals found"
    for role in ["memgov_writer", "memgov_reviewer", logins.writer, logins.reviewer, logins.both, logins.nobody]:
        may = [f for (f,) in internals
               if su.execute("SELECT has_function_privilege(%s, %s, 'EXECUTE')", (role, f)).fetchone()[0]]  # fmt: skip
        assert may == [], f"{role} may execute {may}"


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


@pytest.mark.parametrize("tenant", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_03_deploy_refuses_a_tenant_name_that_is_not_a_tenant_id(su, logins, memgov_dsn, policy_file, tenant):
    before = snapshot(su)
    result = run_cli("deploy", str(policy_file), "--tenant", tenant, "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert_one_line_failure(result)
    assert_same(before, snapshot(su), "memgov deploy --tenant <injection>")


@pytest.mark.parametrize("tenant", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_03_compile_refuses_a_tenant_name_that_is_not_a_tenant_id(policy_file, tenant):
    result = run_cli("compile", str(policy_file), "--tenant", tenant)
    assert_one_line_failure(result)
    assert "CREATE TABLE" not in result.stdout


def test_03_admin_login_deploys_a_valid_tenant_with_the_cli(su, logins, memgov_dsn, policy_file):
    result = run_cli("deploy", str(policy_file), "--tenant", "initech", "--dsn", login_dsn(memgov_dsn, logins.admin))
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


# == 4. self-approval ======================================================================


def test_04_writer_reviewer_cannot_confirm_its_own_held_memory(su, login, logins):
    both = login(logins.both)
    memory_id, _ = held(both, su)
    with refused(su, "42501"):
        both.execute("SELECT memgov.confirm(%s)", (memory_id,))


def test_04_writer_reviewer_cannot_approve_its_own_request_after_set_role(su, login, logins):
    both = login(logins.both)
    _, request_id = held(both, su)
    both.execute("SET ROLE memgov_reviewer")
    with refused(su, "42501"):
        both.execute("SELECT memgov.approve(%s)", (request_id,))


@pytest.mark.parametrize("call", ["approve", "deny", "reject", "confirm_as_writer_role"])
def test_04_writer_reviewer_cannot_decide_its_own_request(su, login, logins, call):
    both = login(logins.both)
    memory_id, request_id = held(both, su)
    with refused(su, "42501"):
        if call == "approve":
            both.execute("SELECT memgov.approve(%s)", (request_id,))
        elif call == "deny":
            both.execute("SELECT memgov.deny(%s)", (request_id,))
        elif call == "reject":
            both.execute("SELECT memgov.reject(%s)", (memory_id,))
        else:
            both.execute("SET ROLE memgov_reviewer")
            both.execute("SELECT memgov.confirm(%s)", (memory_id,))


def test_04_a_member_of_the_requesting_login_cannot_approve(su, writer, login, logins):
    _, request_id = held(writer, su)
    puppet = login(logins.puppet)
    with refused(su, "42501"):
        puppet.execute("SELECT memgov.approve(%s)", (request_id,))


def test_x_four_eyes_holds_for_a_login_whose_name_needs_quoting(su, login, logins):
    """requested_login "AtkMixed_..." must not lose its members to to_regrole's case folding."""
    mixed = login(logins.mixed)
    _, request_id = held(mixed, su)
    puppet = login(logins.mixed_puppet)
    with refused(su, "42501"):
        puppet.execute("SELECT memgov.approve(%s)", (request_id,))


def test_x_writer_reviewer_cannot_release_its_own_quarantined_write(su, login, logins):
    both = login(logins.both)
    _, quarantine_id = quarantined(both, su)
    with refused(su, "42501"):
        both.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))


def test_04_confirm_of_a_pending_memory_by_another_reviewer_is_redecided_and_logged(su, writer, reviewer, logins):
    memory_id, request_id = held(writer, su)
    before = su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0]
    result = reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,)).fetchone()[0]
    assert result["outcome"] == "approved"
    assert memory(su, memory_id)["status"] == "active"
    assert su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0] == before + 1
    assert su.execute(
        "SELECT login, operation FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1"
    ).fetchone() == (logins.reviewer, "remember")
    assert su.execute(
        "SELECT status, requested_login, decided_login FROM memgov.approval_requests WHERE request_id = %s",
        (request_id,),
    ).fetchone() == ("approved", logins.writer, logins.reviewer)


def test_04_confirm_of_a_pending_memory_the_policy_now_denies_does_not_activate_it(su, writer, reviewer):
    memory_id, _ = held(writer, su)
    stricter = POLICY.replace("action: require_approval", "action: deny")
    deploy_policy(su, "2.0.0", text=stricter)
    reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,))
    row = memory(su, memory_id)
    assert row is None or row["status"] == "pending_approval"
    assert su.execute(
        "SELECT action, policy_version FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1"
    ).fetchone() == ("deny", "2.0.0")


# == 5. bait and switch ====================================================================

SWITCHES = {
    "update_text": "UPDATE memgov.long_term_memory_items SET fact_text = 'likes whisky', confidence = 0.95"
    " WHERE memory_id = %(id)s",
    "update_category": "UPDATE memgov.long_term_memory_items SET category = 'user_fact' WHERE memory_id = %(id)s",
    "upsert": "INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence)"
    " VALUES (%(id)s, 'acme', 'preference', 'likes whisky', 'agent_extracted', 0.95)"
    " ON CONFLICT (memory_id, org_id) DO UPDATE SET fact_text = excluded.fact_text, confidence = excluded.confidence",
}


@pytest.mark.parametrize("switch", sorted(SWITCHES))
@pytest.mark.parametrize("who", ["writer", "admin"])
def test_05_a_pending_memory_is_frozen_for_clients(su, writer, admin, switch, who):
    memory_id, _ = held(writer, su)
    if who == "admin":
        with refused(su, "MG409"):
            admin.execute(SWITCHES[switch], {"id": memory_id})
    elif switch == "upsert":  # row level security refuses the conflicting row it hides
        with refused(su, "42501", "MG409"):
            writer.execute(SWITCHES[switch], {"id": memory_id})
    else:  # a writer does not see pending rows: its UPDATE finds none
        with unchanged(su, "an update of a pending memory"):
            assert writer.execute(SWITCHES[switch], {"id": memory_id}).rowcount == 0


@pytest.mark.parametrize("call", ["forget", "edit"])
def test_05_a_pending_memory_cannot_be_forgotten_or_edited(su, writer, reviewer, call):
    memory_id, _ = held(writer, su)
    with refused(su, "MG409"):
        if call == "forget":
            writer.execute("SELECT memgov.forget(%s)", (memory_id,))
        else:
            reviewer.execute("SELECT memgov.edit(%s, 'likes whisky')", (memory_id,))


def test_05_approval_activates_what_the_reviewer_saw(su, writer, reviewer):
    memory_id, request_id = held(writer, su)
    assert writer.execute(SWITCHES["update_text"], {"id": memory_id}).rowcount == 0  # it cannot see the row
    payload = su.execute(
        "SELECT payload FROM memgov.approval_requests WHERE request_id = %s", (request_id,)
    ).fetchone()[0]
    assert reviewer.execute("SELECT memgov.approve(%s)", (request_id,)).fetchone()[0]["status"] == "approved"
    row = memory(su, memory_id)
    assert (row["status"], row["fact_text"], str(row["confidence"])) == (
        "active", payload["fact_text"], "0.600")  # fmt: skip


# == 6. release activates a different memory ==============================================


def test_06_release_over_a_held_memory_id_is_refused(su, writer, reviewer):
    memory_id, _ = held(writer, su)
    _, quarantine_id = quarantined(writer, su, memory_id=memory_id)
    with refused(su, "MG409"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))
    assert memory(su, memory_id)["status"] == "pending_approval"


def test_06_release_over_an_active_memory_id_is_refused(su, writer, reviewer):
    memory_id = seed(su, "allowed")
    _, quarantine_id = quarantined(writer, su, memory_id=memory_id)
    with refused(su, "MG409"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))


# == 7. forget rules bypassed through retention ============================================


SHORTENINGS = [("permanent_until_revoked", "ttl_7d"), ("permanent_until_revoked", "ttl_30d"),
               ("permanent_until_revoked", "confidence_based"), ("ttl_30d", "ttl_7d")]  # fmt: skip


@pytest.mark.parametrize(("start", "to"), SHORTENINGS)
def test_07_life_shortening_update_of_a_legal_hold_memory_is_denied(su, writer, start, to):
    memory_id = seed(su, "legal", retention_policy=start, created_at=DAYS_AGO_10)
    with refused(su, "MG403"):
        writer.execute(
            "UPDATE memgov.long_term_memory_items SET retention_policy = %s WHERE memory_id = %s", (to, memory_id)
        )


def test_07_apply_retention_keeps_an_expired_legal_hold_memory(su, writer):
    memory_id = seed(su, "legal", retention_policy="ttl_7d", created_at=DAYS_AGO_10)
    with unchanged(su):
        result = writer.execute("SELECT memgov.apply_retention(%s)", (memory_id,)).fetchone()[0]
    assert result["deleted"] is False


def test_07_the_sweep_keeps_legal_hold_memories(su, admin):
    kept = [seed(su, "legal", retention_policy="ttl_7d", created_at=DAYS_AGO_10),
            seed(su, "legal", retention_policy="ttl_30d", metadata=Jsonb({"purge": "yes"}))]  # fmt: skip
    gone = [seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10),
            seed(su, "allowed", retention_policy="ttl_30d", metadata=Jsonb({"purge": "yes"}))]  # fmt: skip
    admin.execute("CALL memgov.run_maintenance()")
    assert [memory(su, m) is not None for m in kept] == [True, True]
    assert [memory(su, m) is None for m in gone] == [True, True], "the sweep did not run"
    logged = su.execute("SELECT count(*) FROM memgov.deletion_log WHERE memory_ids && %s::uuid[]", (kept,))
    assert logged.fetchone() == (0,)


def test_x_releasing_a_quarantined_forget_respects_a_legal_hold_placed_since(su, writer, reviewer):
    """A forget quarantined before the hold, released after it: approve() would re-decide and
    refuse; a release must not delete what the policy now holds."""
    start, end = POLICY.index("  - id: legal-hold-no-forget"), POLICY.index("  - id: block-secrets")
    deploy_policy(su, "1.1.0", text=POLICY[:start] + POLICY[end:])
    memory_id = seed(su, "legal", fact_text="signed by olena@example.com", context_source="custom")
    writer.execute("SELECT memgov.forget(%s)", (memory_id,))
    (quarantine_id,) = su.execute(
        "SELECT quarantine_id FROM memgov.quarantine WHERE memory_id = %s AND operation = 'forget'", (memory_id,)
    ).fetchone()
    deploy_policy(su, "1.2.0")
    with refused(su, "MG403"):
        reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))


def test_x_reject_does_not_delete_a_legal_hold_memory(su, reviewer):
    memory_id = seed(su, "legal", confidence=Decimal("0.3"))
    reviewer.execute("SELECT memgov.reject(%s)", (memory_id,))
    assert memory(su, memory_id) is not None
    assert su.execute("SELECT count(*) FROM memgov.deletion_log").fetchone() == (0,)


def test_x_recategorising_a_legal_hold_memory_does_not_release_it(su, writer):
    """Two allowed steps: UPDATE category out of legal_hold, then forget() it."""
    memory_id = seed(su, "legal")
    before = snapshot(su)
    with pytest.raises(psycopg.Error) as info:
        with writer.transaction():
            writer.execute(
                "UPDATE memgov.long_term_memory_items SET category = 'user_fact' WHERE memory_id = %s", (memory_id,)
            )
            writer.execute("SELECT memgov.forget(%s)", (memory_id,))
    assert info.value.sqlstate == "MG403", info.value
    assert_same(before, snapshot(su))


# == 8. memgov.govern_as leaks in from the caller's session =================================


@pytest.fixture(params=["memgov_admin", "reviewer2"])
def forged_actor(request, logins) -> str:
    return "memgov_admin" if request.param == "memgov_admin" else logins.reviewer2


def test_08_govern_as_does_not_forge_a_writers_logged_actor(su, writer, logins, forged_actor):
    writer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    memory_id = insert(writer, item("allowed")).fetchone()[0]
    assert su.execute("SELECT actor, login FROM memgov.decision_log WHERE memory_id = %s", (memory_id,)).fetchall() == [
        (logins.writer, logins.writer)
    ]


def test_08_govern_as_does_not_forge_the_confirming_reviewer(su, reviewer, logins, forged_actor):
    memory_id = seed(su, "allowed")
    reviewer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,))
    reviewer.execute("SELECT memgov.reject(%s)", (memory_id,))
    assert su.execute("SELECT kind, actor, login FROM memgov.feedback_events ORDER BY event_id").fetchall() == [
        ("confirm", logins.reviewer, logins.reviewer), ("reject", logins.reviewer, logins.reviewer)]  # fmt: skip


def test_08_govern_as_does_not_forge_the_approving_reviewer(su, writer, reviewer, logins, forged_actor):
    _, request_id = held(writer, su)
    reviewer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    reviewer.execute("SELECT memgov.approve(%s)", (request_id,))
    assert su.execute(
        "SELECT decided_by, decided_login FROM memgov.approval_requests WHERE request_id = %s", (request_id,)
    ).fetchone() == (logins.reviewer, logins.reviewer)
    assert su.execute("SELECT actor, login FROM memgov.decision_log ORDER BY decision_id DESC LIMIT 1").fetchone() == (
        logins.reviewer, logins.reviewer)  # fmt: skip


def test_08_govern_as_does_not_make_apply_retention_lie(su, writer, forged_actor):
    keep = seed(su, "allowed")
    due = seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10)
    writer.execute("SELECT set_config('memgov.govern_as', %s, false)", (forged_actor,))
    with unchanged(su):
        assert writer.execute("SELECT memgov.apply_retention(%s)", (keep,)).fetchone()[0]["deleted"] is False
    result = writer.execute("SELECT memgov.apply_retention(%s)", (due,)).fetchone()[0]
    assert result["deleted"] is True and memory(su, due) is None


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


@pytest.mark.parametrize("pattern", [r"(.+)\1\1x", "a" * 20000], ids=["backreference", "20000_chars"])
def test_09_a_catastrophic_regex_is_refused_at_deploy(su, logins, memgov_dsn, tmp_path, pattern):
    path = tmp_path / "slow.yaml"
    path.write_text(_regex_policy(pattern), encoding="utf-8")
    before = snapshot(su)
    result = run_cli("deploy", str(path), "--dsn", login_dsn(memgov_dsn, logins.admin))
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


# == new variants ============================================================================

# session_tenant() is inlined into its callers' queries: what it calls runs as them, and
# tells a login no more than session_tenant() itself (whether it may act in a tenant)
SESSION_TENANT = {"memgov.session_tenant()", "memgov.binding_on()", "memgov.login_bound_to(text)"}
# row level security's read test is inlined too: what it calls runs as the client, and
# tells it no more than a SELECT does (whether it may read a row of its own tenant)
READABLE = {"memgov.readable(text,text,memgov.long_term_memory_items)", "memgov.reads_governed(text)",
            "memgov.get_allowed(memgov.long_term_memory_items)",
            "memgov.written_here(memgov.long_term_memory_items)"}  # fmt: skip
RECALL = {"memgov.search(jsonb)", "memgov.get(uuid)"}
# the end of a bulk statement lists its shared decisions' memories as the statement's role:
# what it is handed it checks against the log and the rows (tests/db/test_bulk_decisions.py)
STATEMENT_END = {"memgov.list_shared(memgov.shared_decision[])"}
WRITER_API = {"memgov.remember(jsonb)", "memgov.forget(uuid)", "memgov.forget_where(jsonb,boolean)",
              "memgov.evaluate(jsonb,text)",
              "memgov.explain(jsonb,text)", "memgov.apply_retention(uuid)", "memgov.item_from_json(jsonb)",
              *SESSION_TENANT, *READABLE, *RECALL, *STATEMENT_END}  # fmt: skip
REVIEWER_API = {"memgov.approve(uuid,text)", "memgov.deny(uuid,text)", "memgov.release_quarantine(uuid)",
                "memgov.purge_quarantine(uuid)", "memgov.confirm(uuid)", "memgov.reject(uuid)",
                "memgov.edit(uuid,text)", "memgov.forget(uuid)", "memgov.forget_where(jsonb,boolean)",
                "memgov.apply_retention(uuid)",
                "memgov.evaluate(jsonb,text)", "memgov.explain(jsonb,text)", "memgov.approval_channel()",
                *SESSION_TENANT, *READABLE, *RECALL}  # fmt: skip
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


INTERNAL_CALLS = {
    "apply_write": "SELECT memgov.apply_write('remember', jsonb_populate_record(NULL::memgov.long_term_memory_items,"
    ' \'{"org_id": "acme", "category": "user_fact", "fact_text": "x", "source": "system_rule",'
    ' "confidence": 1, "memory_id": "00000000-0000-0000-0000-000000000001"}\'), \'1.0.0\', NULL, false)',
    "govern": "SELECT memgov.govern('remember', jsonb_populate_record(NULL::memgov.long_term_memory_items,"
    " '{\"org_id\": \"acme\"}'), 'memgov_admin', " + _FORGED_DECISION + ", NULL)",
    "close_request": "SELECT memgov.close_request(r, 'approved', 'memgov_admin', 'forged')"
    " FROM memgov.approval_requests r",
    "approve_request": "SELECT memgov.approve_request(r, 'forged') FROM memgov.approval_requests r",
    "log_deletion": "SELECT memgov.log_deletion(m, 'ttl', NULL) FROM memgov.long_term_memory_items m",
    "record_feedback": "SELECT memgov.record_feedback(m, 'confirm', 1, 'forged') FROM memgov.long_term_memory_items m",
    "sweep_batch": "SELECT memgov.sweep_batch(1, 'ttl', 10)",
    "start_maintenance": "SELECT memgov.start_maintenance(false)",
    "claim_maintenance": "SELECT memgov.claim_maintenance()",
    "rebuild_dispatch": "SELECT memgov.rebuild_dispatch()",
    "install_policy": "SELECT memgov.install_policy('*', '9.9.9', repeat('0', 64), 'enforce',"
    " 'policy_0000000000000000',"
    " '', '', '', '', '{}', '[]')",
    "activate_policy": "SELECT memgov.activate_policy('*', '1.0.0')",
    "rollback_policy": "SELECT memgov.rollback_policy('*')",
    "undeploy_policy": "SELECT memgov.undeploy_policy('*', '1.0.0')",
    "run_maintenance": "CALL memgov.run_maintenance()",
    "grant_tenant": "SELECT memgov.grant_tenant(current_user, 'globex')",
    "check_tenant": "SELECT memgov.check_tenant('globex')",
    "memory_for_feedback": "SELECT memgov.memory_for_feedback(memory_id) FROM memgov.long_term_memory_items",
    "stage_policy": "SELECT memgov.stage_policy('*', '9.9.9', repeat('0', 64), 'enforce',"
    " 'policy_0000000000000000', '', '', '', '', '{}', '[]')",
    "start_shadow": "SELECT memgov.start_shadow('*', '1.0.0')",
    "open_shadow": "SELECT memgov.open_shadow('*', '1.0.0')",
    "end_shadow": "SELECT memgov.end_shadow('*', 'stopped')",
    "promote_shadow": "SELECT memgov.promote_shadow('*')",
    "stop_shadow": "SELECT memgov.stop_shadow('*')",
    "shadow_report": "SELECT memgov.shadow_report('*')",
    "replay": "SELECT memgov.replay('*', '1.0.0')",
    "rebuild_shadow_dispatch": "SELECT memgov.rebuild_shadow_dispatch()",
    "shadow_decide": "SELECT memgov.shadow_decide(m, 'remember', 'memgov_admin') FROM memgov.long_term_memory_items m",
    "judge_shadow": "SELECT memgov.judge_shadow('remember', m, NULL, 'memgov_admin')"
    " FROM memgov.long_term_memory_items m",
    "record_shadow": "SELECT memgov.record_shadow(ROW(1, "
    + _FORGED_DECISION
    + "), 'remember', m, "
    + _FORGED_DECISION
    + ", 1) FROM memgov.long_term_memory_items m",
    "divergences": "SELECT memgov.divergences(1, 3)",
    "keep_sample": "SELECT memgov.keep_sample('remember', m, 'memgov_admin', 1) FROM memgov.long_term_memory_items m",
    "prune_replay_samples": "SELECT memgov.prune_replay_samples(1)",
    "sample_rate": "SELECT memgov.sample_rate('acme')",
}


@pytest.mark.parametrize("call", sorted(INTERNAL_CALLS))
@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_x_internal_functions_refuse_direct_calls(su, writer, login, logins, role, call):
    held(writer, su)
    seed(su, "allowed")
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute(INTERNAL_CALLS[call])


def test_x_a_login_without_memgov_roles_reaches_nothing(su, login, logins):
    seed(su, "allowed")
    conn = login(logins.nobody)
    for statement in ("SELECT * FROM memgov.long_term_memory_items", "SELECT memgov.remember('{}')",
                      "SELECT memgov.session_tenant()", "SELECT memgov.contains_secret('x')"):  # fmt: skip
        with refused(su, "42501"):
            conn.execute(statement)


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


def test_x_copy_of_a_secret_is_denied(su, writer):
    with refused(su, "MG403", "0A000"):
        with writer.cursor().copy(
            "COPY memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) FROM STDIN"
        ) as copy:
            copy.write_row(("acme", "user_fact", "password: hunter2hunter2", "agent_extracted", "0.9"))


@pytest.mark.parametrize("who", ["writer", "admin"])
def test_x_an_update_cannot_move_a_memory_to_another_tenant(su, writer, admin, who):
    memory_id = seed(su, "allowed")
    conn = writer if who == "writer" else admin
    with refused(su, "42501"):
        conn.execute("UPDATE memgov.long_term_memory_items SET org_id = %s WHERE memory_id = %s", (OTHER, memory_id))


@pytest.mark.parametrize("source", ["user_confirmed", "system_rule"])
@pytest.mark.parametrize("path", ["insert", "update"])
def test_x_a_writer_cannot_claim_a_trusted_source(su, writer, source, path):
    memory_id = seed(su, "allowed")
    with refused(su, "MG403"):
        if path == "insert":
            insert(writer, item("held", source=source))
        else:
            writer.execute(
                "UPDATE memgov.long_term_memory_items SET source = %s WHERE memory_id = %s", (source, memory_id)
            )


@pytest.mark.parametrize(
    "column,value",
    [("status", "active"), ("created_at", "2099-01-01"), ("expires_at", "2099-01-01"), ("decision_id", 1),
     ("policy_version", "forged"), ("last_confirmed_at", "2099-01-01"), ("low_confidence_since", None),
     ("updated_at", "2099-01-01")],
)  # fmt: skip
@pytest.mark.parametrize("path", ["insert", "update"])
def test_x_a_writer_cannot_set_engine_columns(su, writer, column, value, path):
    memory_id = seed(su, "allowed")
    with refused(su, "42501"):
        if path == "insert":
            insert(writer, item("held") | {column: value})
        else:
            writer.execute(
                sql.SQL("UPDATE memgov.long_term_memory_items SET {} = %s WHERE memory_id = %s").format(
                    sql.Identifier(column)
                ),
                (value, memory_id),
            )


def test_x_remember_ignores_engine_columns_in_the_item(su, writer):
    forged = item("held", status="active", created_at="2099-01-01T00:00:00Z", decision_id=1,
                  policy_version="forged", expires_at="2099-01-01T00:00:00Z")  # fmt: skip
    outcome = writer.execute("SELECT memgov.remember(%s)", (as_json(forged),)).fetchone()[0]
    row = memory(su, uuid.UUID(outcome["memory_id"]))
    assert row["status"] == "pending_approval" and row["policy_version"] == GLOBAL_VERSION
    assert row["created_at"].year < 2099 and row["expires_at"] is None


@pytest.mark.parametrize("org", [None, "", "*"], ids=["null", "empty", "global_scope"])
@pytest.mark.parametrize("session_org", [ORG, None, "*"], ids=["session_acme", "session_unset", "session_global"])
def test_x_null_empty_or_global_org_id_is_refused(su, login, logins, org, session_org):
    conn = login(logins.writer, session_org)
    with refused(su, "42501", "22023", "23502", "23514"):
        insert(conn, item("allowed") | {"org_id": org})


@pytest.mark.parametrize("setting", ["memgov.govern_as=memgov_admin", "memgov.on_deny=skip", "memgov.capture=on",
                                     'memgov.last_outcome={"action": "allow"}'])  # fmt: skip
def test_x_engine_settings_from_the_session_let_nothing_through(su, writer, logins, setting):
    name, value = setting.split("=", 1)
    writer.execute("SELECT set_config(%s, %s, false)", (name, value))
    hold = seed(su, "legal")
    items_before = su.execute("SELECT to_jsonb(m)::text FROM memgov.long_term_memory_items m ORDER BY 1").fetchall()
    for attack in (lambda: insert(writer, item("denied")), lambda: writer.execute("SELECT memgov.forget(%s)", (hold,)),
                   lambda: insert(writer, item("denied", org=OTHER))):  # fmt: skip
        try:
            attack()
        except psycopg.Error:
            pass
    assert (
        su.execute("SELECT to_jsonb(m)::text FROM memgov.long_term_memory_items m ORDER BY 1").fetchall()
        == items_before
    )
    assert su.execute("SELECT count(*) FROM memgov.decision_log WHERE action <> 'deny' OR login <> %s",
                      (logins.writer,)).fetchone() == (0,)  # fmt: skip


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


SHADOWS = [
    ("FUNCTION atk.current_setting(text)", "text"),
    ("FUNCTION atk.current_setting(text, boolean)", "text"),
    ("FUNCTION atk.now()", "timestamptz"),
    ("FUNCTION atk.pg_has_role(text, oid, text)", "boolean"),
    ("FUNCTION atk.pg_has_role(name, text, text)", "boolean"),
    ("FUNCTION atk.set_config(text, text, boolean)", "text"),
    ("FUNCTION atk.octet_length(text)", "integer"),
    ("FUNCTION atk.md5(text)", "text"),
    ("FUNCTION atk.gen_random_uuid()", "uuid"),
    ("FUNCTION atk.pg_notify(text, text)", "void"),
    ("FUNCTION atk.lower(text)", "text"),
    ("FUNCTION atk.shadow_eq(text, text)", "boolean"),
]


def test_x_search_path_shadows_are_never_called_by_the_engine(su, login, logins, reviewer, memgov_dsn):
    su.execute(sql.SQL("CREATE SCHEMA atk AUTHORIZATION {}").format(sql.Identifier(logins.creator)))
    try:
        creator = login(logins.creator)
        for signature, returns in SHADOWS:
            creator.execute(
                f"CREATE {signature} RETURNS {returns} LANGUAGE plpgsql AS $$ BEGIN"
                f" RAISE EXCEPTION 'SHADOW {signature.split('.')[1]} called as %', current_user; END $$"
            )
        creator.execute("CREATE OPERATOR atk.= (LEFTARG = text, RIGHTARG = text, FUNCTION = atk.shadow_eq)")
        creator.execute("GRANT USAGE ON SCHEMA atk TO PUBLIC")
        for conn in (creator, reviewer):
            conn.execute("SET search_path = atk, pg_catalog, public")
        stored, status = insert(creator, item("allowed")).fetchone()
        assert status == "active"
        pending, status = insert(creator, item("held")).fetchone()
        assert status == "pending_approval"
        quarantined(creator, su)
        creator.execute("SELECT memgov.remember(%s)", (as_json(item("allowed")),))
        with refused(su, "MG403"):
            insert(creator, item("denied"))
        with refused(su, "42501"):
            insert(creator, item("allowed", org=OTHER))
        creator.execute("SELECT memgov.evaluate(%s)", (as_json(item("held")),))
        creator.execute('SELECT * FROM memgov.search(\'{"text": "tea"}\')')
        creator.execute("SELECT * FROM memgov.get(%s)", (stored,))
        creator.execute("SELECT * FROM memgov.long_term_memory_items")
        reviewer.execute("SELECT * FROM memgov.long_term_memory_items")
        creator.execute("SELECT memgov.forget(%s)", (stored,))
        reviewer.execute("SELECT memgov.approve(%s)", (request_of(su, pending),))
        reviewer.execute("SELECT memgov.confirm(%s)", (pending,))
        reviewer.execute("SELECT memgov.edit(%s, 'likes oolong')", (pending,))
    finally:
        su.execute("DROP SCHEMA atk CASCADE")


def test_x_pg_temp_tables_named_like_memgov_tables_are_never_used(su, writer, reviewer):
    for conn in (writer, reviewer):
        for table in memgov_tables(su):
            conn.execute(sql.SQL("CREATE TEMP TABLE {} (x int)").format(sql.Identifier(table)))
    stored = insert(writer, item("allowed")).fetchone()[0]
    pending = insert(writer, item("held")).fetchone()[0]
    _, quarantine_id = quarantined(writer, su)
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("denied")),))
    writer.execute("SELECT memgov.forget(%s)", (stored,))
    reviewer.execute("SELECT memgov.approve(%s)", (request_of(su, pending),))
    reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine_id,))
    reviewer.execute("SELECT memgov.edit(%s, 'likes oolong')", (pending,))
    for conn in (writer, reviewer):
        for table in memgov_tables(su):
            assert conn.execute(
                sql.SQL("SELECT count(*) FROM pg_temp.{}").format(sql.Identifier(table))
            ).fetchone() == (0,)


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


def test_x_no_memgov_object_is_owned_by_a_login_role(su):
    owned = su.execute(
        "SELECT c.oid::regclass::text, r.rolname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner"
        " WHERE c.relnamespace = 'memgov'::regnamespace AND r.rolcanlogin"
        " UNION ALL SELECT p.oid::regprocedure::text, r.rolname FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner"
        " WHERE p.pronamespace = 'memgov'::regnamespace AND r.rolcanlogin"
    ).fetchall()
    assert owned == []


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
