"""Policy code is what was recorded: attacks on the code that decides, as real logins.

* A ``memgov_admin`` login stages a throwaway version for a throwaway tenant under the
  function name of another version (the active one of another tenant, the global one,
  an inactive one, one only recorded, a stray function): refused (MG409) with every table,
  log, queue and function unchanged, and the victim keeps deciding with its recorded code.
* A superuser rewrites a live policy function (what no memgov role can do): ``memgov
  doctor`` reports it (check ``policy-drift``), ``memgov verify-log`` notes it, and the
  next ordinary deploy does not copy it into ``memgov.decide``.
* The time a decision takes: a regex PostgreSQL compiles slowly is refused at deploy, and
  a writer's statement_timeout cuts a decision short with nothing written.
* ``memgov test`` decides under ``search_path = pg_catalog, pg_temp``: a function or operator
  of the caller's search_path never runs in it; what a decision takes (an advisory lock)
  ends with its session. A body an admin deploys openly can take advisory locks in its
  writers' sessions: a documented limit (docs/security.md).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql
from psycopg.types.json import Jsonb

from memgov_pg import policy_tests
from memgov_pg.compiler import TENANT_ROUTING_MARKER, CompiledPolicy, compile_policy
from memgov_pg.policy import load_policy
from tests.attack_helpers import (
    GLOBAL_VERSION,
    ORG,
    OTHER,
    OTHER_VERSION,
    POLICY,
    Login,
    Logins,
    assert_same,
    insert,
    item,
    login_dsn,
    refused,
    snapshot,
    unchanged,
)
from tests.cli_helpers import run_memgov
from tests.waiting import DEADLINE

ROOT = Path(__file__).resolve().parents[2]
LEAK = "memgov_leak"  # the channel a planted body sends denied texts to
CONTROL = "control"  # sent after the writes: what came before it has arrived
THROWAWAY = "throwaway"
ROW = "memgov.long_term_memory_items"
DECIDE_ARGS = f"{ROW}, text, text"
#: PostgreSQL takes seconds to compile it (bounded repetitions of a group that matches
#: the empty string); it never backtracks, so the reader's cost check lets it through
SLOW_REGEX = "([a-m]*[n-z]*){1,255}#"


# -- fixtures and helpers ------------------------------------------------------------


@pytest.fixture
def gwriter(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    """A writer login in globex, which has a policy of its own."""
    return login(logins.gwriter, OTHER)


def compiled(version: str, org: str = "*", text: str = POLICY) -> CompiledPolicy:
    return compile_policy(load_policy(text.format(version=version, description="integrity")), org)


def active_function(su: psycopg.Connection[Any], org: str) -> str:
    row = su.execute("SELECT function_name FROM memgov.policy_versions WHERE org_id = %s AND active", (org,)).fetchone()
    assert row is not None
    return str(row[0])


def live_body(su: psycopg.Connection[Any], function: str, args: str = DECIDE_ARGS) -> str:
    row = su.execute("SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure(%s)", (f"memgov.{function}({args})",))
    found = row.fetchone()
    assert found is not None, function
    return str(found[0])


def evil(body: str) -> str:
    """A decide body as the attack wrote it: it sends every text it decides (denied ones
    too) to the admin, and logs an invented rule id for its denials."""
    marker = TENANT_ROUTING_MARKER + "\n"
    assert body.count(marker) == 1
    planted = body.replace(marker, marker + f"    PERFORM pg_notify('{LEAK}', p_item.fact_text);\n")
    return planted.replace("ARRAY['block-secrets']", "ARRAY['invented-rule']")


def call(function: str, policy: CompiledPolicy, org: str, name: str, bodies: tuple[str, str, str]) -> sql.Composed:
    """memgov.<function>(...) with every argument named: ``name`` and ``bodies`` the admin's."""
    p = policy.policy
    args: dict[str, Any] = {
        "p_org_id": org, "p_version": p.version, "p_sha256": p.sha256, "p_mode": p.mode, "p_function_name": name,
        "p_source_yaml": p.source_text, "p_decide_body": bodies[0], "p_explain_body": bodies[1],
        "p_retention_body": bodies[2], "p_settings": Jsonb(policy.settings()), "p_rules": Jsonb(policy.rule_rows()),
    }  # fmt: skip
    parts = [sql.SQL("{} => {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in args.items()]
    return sql.SQL("SELECT memgov.{}({})").format(sql.Identifier(function), sql.SQL(", ").join(parts))


def plant(su: psycopg.Connection[Any], function: str, body: str) -> None:
    """What only a superuser (or memgov_owner) can do: rewrite a live policy function in place."""
    su.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION memgov.{}(p_item memgov.long_term_memory_items, p_operation text, "
            "p_actor text) RETURNS memgov.decision LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER AS {}"
        ).format(sql.Identifier(function), sql.Literal(body))
    )


def leaked(listener: psycopg.Connection[Any], sender: psycopg.Connection[Any]) -> list[str]:
    """The payloads on LEAK that reached ``listener`` before a control notification sent now
    (notifications arrive in commit order: all that came before it has arrived)."""
    sender.execute("SELECT pg_notify(%s, %s)", (LEAK, CONTROL))
    got = []
    for notify in listener.notifies(timeout=DEADLINE):
        if notify.channel == LEAK and notify.payload == CONTROL:
            return got
        got.append(notify.payload)
    raise AssertionError(f"the control notification did not arrive within {DEADLINE:.0f} s")


def assert_decides_as_recorded(
    su: psycopg.Connection[Any], listener: psycopg.Connection[Any], agent: psycopg.Connection[Any], org: str,
    version: str,
) -> None:  # fmt: skip
    """A secret written in ``org`` is denied by its recorded rule, under its version, and
    reaches no one: no text on LEAK, no invented rule id in the log."""
    listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(LEAK)))
    with pytest.raises(psycopg.Error) as denied:
        insert(agent, item("denied", org=org))
    assert denied.value.sqlstate == "MG403", denied.value
    # the error took its log row with it: denied again, logged and skipped
    agent.execute("SET memgov.on_deny = 'skip'")
    assert insert(agent, item("denied", org=org)).rowcount == 0
    agent.execute("RESET memgov.on_deny")
    logged = su.execute(
        "SELECT matched_rule_ids, policy_version FROM memgov.decision_log WHERE org_id = %s"
        " ORDER BY decision_id DESC LIMIT 1",
        (org,),
    ).fetchone()
    assert logged == (["block-secrets"], version)
    assert leaked(listener, su) == []


def doctor_drift(dsn: str) -> tuple[int, list[dict[str, Any]]]:
    """`memgov doctor --json` (as the superuser of ``dsn``): its exit status and policy-drift findings."""
    result = run_memgov("doctor", "--dsn", dsn, "--json", "--fail-on", "error")
    assert result.stderr == "", result.stderr
    report = json.loads(result.stdout)
    return result.returncode, [f for f in report["findings"] if f["check"] == "policy-drift"]


# == 1. an admin stages code under a name that is taken ===================================


def taken_name(su: psycopg.Connection[Any], target: str) -> str:
    """The function name the attack reuses: another version's, or a stray function's."""
    if target == "tenant":
        return active_function(su, OTHER)
    if target == "global":
        return active_function(su, "*")
    if target in ("staged", "recorded"):  # a version of another tenant, deployed but never activated
        staged = compiled("5.0.0", "initech")
        with su.transaction():
            su.execute(staged.stage_sql())
        if target == "recorded":  # its functions dropped since (a superuser): the name stays recorded
            for suffix, args in (("", DECIDE_ARGS), ("_explain", DECIDE_ARGS), ("_retention", ROW)):
                su.execute(sql.SQL("DROP FUNCTION memgov.{}({})").format(
                    sql.Identifier(staged.function_name + suffix), sql.SQL(args)))  # fmt: skip
        return staged.function_name
    assert target == "stray"  # a function of that name that no version records
    name = f"policy_{secrets.token_hex(8)}"
    stray = sql.SQL("CREATE FUNCTION memgov.{}() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    su.execute(stray.format(sql.Identifier(name)))
    return name


@pytest.mark.parametrize("entry", ["stage_policy", "install_policy"])
@pytest.mark.parametrize("target", ["tenant", "global", "staged", "recorded", "stray"])
def test_admin_cannot_stage_code_under_a_function_name_that_is_taken(su, admin, writer, gwriter, target, entry):
    """The reported attack: a throwaway version for a throwaway tenant, its body leaking
    denied texts over pg_notify and logging invented rule ids, named after the function
    that decides for another tenant."""
    name = taken_name(su, target)
    victim = compiled(OTHER_VERSION, OTHER) if target == "tenant" else compiled(GLOBAL_VERSION)
    throwaway = compiled("0.0.1-throwaway", THROWAWAY)
    bodies = (evil(victim.bodies[0]), *victim.bodies[1:])
    with refused(su, "MG409") as info:
        with admin.transaction():
            admin.execute(call(entry, throwaway, THROWAWAY, name, bodies))
    assert name in str(info.value) and "taken" in str(info.value)
    assert info.value.diag.message_hint and "memgov deploy" in info.value.diag.message_hint
    if target == "tenant":
        assert_decides_as_recorded(su, admin, gwriter, OTHER, OTHER_VERSION)
    else:
        assert_decides_as_recorded(su, admin, writer, ORG, GLOBAL_VERSION)


def test_the_same_version_deployed_again_is_still_no_change(su, admin):
    """What the name check must not refuse: a version deployed before, with the same content."""
    again = compiled(OTHER_VERSION, OTHER)
    # deploy_policies used another description: that is other content (MG409 as before)
    with refused(su, "MG409"):
        with admin.transaction():
            admin.execute(again.install_sql())
    fresh = compiled("8.0.0", OTHER)
    with admin.transaction():
        admin.execute(fresh.install_sql())
    with unchanged(su, "deploying the same version again"):
        with admin.transaction():
            admin.execute(fresh.stage_sql())


# == 2. code rewritten in place: reported, and never spread ================================


@pytest.mark.slow
def test_a_rewritten_global_body_is_reported(memgov_dsn, su, logins):
    name = active_function(su, "*")
    plant(su, name, evil(live_body(su, name)))

    code, drift = doctor_drift(memgov_dsn)
    assert code == 1
    assert [(f["severity"], f["subject"]) for f in drift] == [("error", f"memgov.{name}")]
    assert "not the code its deploy recorded" in drift[0]["message"]

    result = run_memgov("verify-log", "--dsn", login_dsn(memgov_dsn, logins.admin), "--json")
    assert result.returncode == 0, result.stderr  # the chain is intact: drift is noted beside it
    noted = json.loads(result.stdout)["policy_drift"]
    assert [(d["org_id"], d["version"], d["function_name"]) for d in noted] == [("*", GLOBAL_VERSION, f"memgov.{name}")]
    result = run_memgov("verify-log", "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert f"policy code CHANGED since its deploy: memgov.{name} (global, version {GLOBAL_VERSION})" in result.stdout


def test_a_rewritten_global_body_is_never_copied_into_decide(su, admin, writer):
    name = active_function(su, "*")
    plant(su, name, evil(live_body(su, name)))
    # the next ordinary deploy, of another tenant, rebuilds memgov.decide from the record
    with admin.transaction():
        admin.execute(compiled("3.0.0", "initech").install_sql())
    decide = live_body(su, "decide")
    assert LEAK not in decide and "invented-rule" not in decide
    assert_decides_as_recorded(su, admin, writer, ORG, GLOBAL_VERSION)


@pytest.mark.slow
def test_a_rewritten_tenant_body_is_reported_until_the_record_is_restored(memgov_dsn, su, admin, gwriter, logins):
    name = active_function(su, OTHER)
    plant(su, name, evil(live_body(su, name)))
    code, drift = doctor_drift(memgov_dsn)
    assert code == 1 and [f["subject"] for f in drift] == [f"memgov.{name}"]
    assert f"policy version {OTHER_VERSION} of tenant {OTHER}" in drift[0]["message"]

    # the fix doctor names: the recorded definition, run by a superuser
    fix = drift[0]["fix"]
    query = fix[fix.index("SELECT (memgov.recorded_function") :]
    (definition,) = su.execute(query).fetchone()
    su.execute(definition)
    code, drift = doctor_drift(memgov_dsn)
    assert code == 0 and drift == []
    assert_decides_as_recorded(su, admin, gwriter, OTHER, OTHER_VERSION)


@pytest.mark.parametrize("change", ["body", "attribute", "decide", "dropped"])
def test_policy_drift_names_what_changed(su, admin, change):
    """Every kind of change, as policy_drift() reports it to an admin login."""
    name = active_function(su, OTHER)
    if change == "body":
        plant(su, name, live_body(su, name).replace("'block-secrets'", "'block-secretz'"))
    elif change == "attribute":  # same body, another setting: PostgreSQL's definition differs
        su.execute(sql.SQL("ALTER FUNCTION memgov.{}({}) SET work_mem = '64MB'").format(
            sql.Identifier(name + "_explain"), sql.SQL(DECIDE_ARGS)))  # fmt: skip
    elif change == "decide":
        su.execute(sql.SQL("ALTER FUNCTION memgov.decide({}) VOLATILE").format(sql.SQL(DECIDE_ARGS)))
    else:
        su.execute(sql.SQL("DROP FUNCTION memgov.{}({})").format(sql.Identifier(name + "_retention"), sql.SQL(ROW)))
    found = admin.execute("SELECT org_id, version, function_name, problem FROM memgov.policy_drift()").fetchall()
    wanted = {
        "body": (OTHER, OTHER_VERSION, f"memgov.{name}", "its body or attributes differ from its recorded definition"),
        "attribute": (OTHER, OTHER_VERSION, f"memgov.{name}_explain",
                      "its body or attributes differ from its recorded definition"),
        "decide": ("*", GLOBAL_VERSION, "memgov.decide", "its body or attributes differ from its recorded definition"),
        "dropped": (OTHER, OTHER_VERSION, f"memgov.{name}_retention", "the function is missing"),
    }  # fmt: skip
    assert found == [wanted[change]]


def test_policy_drift_in_a_read_only_transaction(su, admin):
    """A standby or a read-only transaction cannot create the recorded definition: equal
    printed texts still pass, a difference is reported as such."""
    admin.execute("BEGIN READ ONLY")
    assert admin.execute("SELECT * FROM memgov.policy_drift()").fetchall() == []
    admin.execute("ROLLBACK")
    name = active_function(su, OTHER)
    plant(su, name, live_body(su, name) + "\n")
    admin.execute("BEGIN READ ONLY")
    (problem,) = admin.execute("SELECT problem FROM memgov.policy_drift()").fetchone()
    admin.execute("ROLLBACK")
    assert "read-only" in problem


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT memgov.decide_definition()",
        "SELECT memgov.recorded_function('x', 'policy_0000000000000000')",
        "SELECT memgov.definition_drift(NULL, 'decide', 'CREATE OR REPLACE FUNCTION memgov.decide(')",
    ],
)
def test_the_drift_helpers_are_the_engines_own(su, admin, writer, statement):
    for conn in (admin, writer):
        with refused(su, "42501"):
            conn.execute(statement)


# == 3. the time a decision takes ============================================================


def slow_regex_policy(version: str) -> str:
    return POLICY.format(version=version, description="slow regex") + (
        "  - id: slow-regex\n    priority: 40\n"
        f"    when: [{{field: fact_text, operator: regex, value: {json.dumps(SLOW_REGEX)}}}]\n    action: deny\n"
    )


@pytest.mark.slow
def test_a_regex_postgres_compiles_slowly_is_refused_at_deploy(su, logins, memgov_dsn, tmp_path):
    path = tmp_path / "slow.yaml"
    path.write_text(slow_regex_policy("4.0.0"), encoding="utf-8")
    before = snapshot(su)
    result = run_memgov("deploy", str(path), "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "slow-regex" in result.stderr and "to compile it" in result.stderr
    assert_same(before, snapshot(su), "deploying a regex PostgreSQL compiles slowly")


def test_a_writers_statement_timeout_bounds_a_decision(su, login, logins):
    """Installed past the deploy-time check (by the superuser, as any admin could with the
    SQL functions), the slow regex is compiled again by each session on its first decision:
    the writer's statement_timeout cuts that decision short, and nothing is written."""
    policy = load_policy(slow_regex_policy("4.0.1"))  # offline: only structural checks
    with su.transaction():
        su.execute(compile_policy(policy, ORG).install_sql())
    writer = login(logins.writer)  # a session of its own: the pattern is not compiled in it yet
    writer.execute("SET statement_timeout = '500ms'")
    with refused(su, "57014"):
        insert(writer, item("allowed"))


# == 4. memgov test: the search_path, and advisory locks ======================================

SHADOW_LOCK = 727271


@pytest.fixture
def shadowing(su: psycopg.Connection[Any]) -> Any:
    """A schema whose `=` on text takes a session-level advisory lock and answers false: what
    a caller's search_path could put in front of pg_catalog."""
    su.execute("DROP SCHEMA IF EXISTS shadowing CASCADE")
    su.execute("CREATE SCHEMA shadowing")
    su.execute(
        "CREATE FUNCTION shadowing.text_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS"
        f" $$BEGIN PERFORM pg_catalog.pg_advisory_lock({SHADOW_LOCK}); RETURN false; END$$"
    )
    su.execute("CREATE OPERATOR shadowing.= (LEFTARG = text, RIGHTARG = text, FUNCTION = shadowing.text_eq)")
    su.execute("GRANT USAGE ON SCHEMA shadowing TO PUBLIC")
    yield
    su.execute("DROP SCHEMA shadowing CASCADE")


def held_locks(su: psycopg.Connection[Any], key: int) -> list[int]:
    rows = su.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND database ="
        " (SELECT oid FROM pg_database WHERE datname = current_database())",
        (key,),
    ).fetchall()
    return [r[0] for r in rows]


def test_memgov_test_decides_under_pg_catalog_whatever_the_callers_search_path(su, memgov_dsn, shadowing):
    dsn = conninfo.make_conninfo(memgov_dsn, options="-c search_path=shadowing,pg_catalog,public")
    with psycopg.connect(dsn, autocommit=True) as caller:  # the shadow is there for the caller
        assert caller.execute("SELECT 'a'::text = 'a'::text").fetchone() == (False,)
        caller.execute("SELECT pg_advisory_unlock_all()")

    policy = ROOT / "policies" / "default.yaml"
    outcomes = policy_tests.run(dsn, policy, [policy_tests.tests_beside(policy)])
    assert outcomes and [o.case.name for o in outcomes if not o.passed] == []
    assert held_locks(su, SHADOW_LOCK) == []


def test_limit_an_openly_deployed_body_takes_advisory_locks_in_its_writers_sessions(su, admin, login, logins):
    """What docs/security.md states as a limit: a body an admin deploys runs for its
    tenant's decisions and may call what memgov_policy may, such as pg_advisory_lock (held
    by the writer's session after its write). It shows: the activation names the admin,
    and the recorded code holds the call."""
    key = 727272
    policy = compiled("6.0.0", "initech")
    body = policy.bodies[0].replace(
        TENANT_ROUTING_MARKER + "\n", TENANT_ROUTING_MARKER + f"\n    PERFORM pg_advisory_lock({key});\n", 1
    )
    with admin.transaction():
        admin.execute(call("install_policy", policy, "initech", policy.function_name, (body, *policy.bodies[1:])))
    writer = login(logins.writer, "initech")
    insert(writer, item("allowed", org="initech"))
    (pid,) = writer.execute("SELECT pg_backend_pid()").fetchone()
    assert held_locks(su, key) == [pid]
    activated = su.execute(
        "SELECT a.activated_by, v.deployed_by, strpos(v.compiled_sql, 'pg_advisory_lock') > 0"
        " FROM memgov.policy_activations a JOIN memgov.policy_versions v USING (org_id, version)"
        " WHERE a.org_id = 'initech'"
    ).fetchall()
    assert activated == [(logins.admin, logins.admin, True)]
