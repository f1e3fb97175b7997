"""Tenant ids at the command line against real PostgreSQL (nothing reaches SQL), and
`memgov tenant grant | revoke | list` (memgov.grant_tenant / revoke_tenant)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from tests.cli_helpers import assert_one_line_error, run_memgov

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "default.yaml"
EVIL = "evil\rCREATE TABLE memgov.pwned AS SELECT current_user::text;\r--"

AGENT = "tenants_agent"  # a writer's login
APP = "tenants_app"  # a reviewer's login
ADMIN = "tenants_admin"  # an administrator's login
GROUP = "tenants_acme_agents"  # a NOLOGIN group the agent is in
ROLES = (AGENT, APP, ADMIN, GROUP)


def as_user(dsn: str, user: str) -> str:
    return conninfo.make_conninfo(**(conninfo.conninfo_to_dict(dsn) | {"user": user}))  # type: ignore[arg-type]


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What a refused command must leave as it was."""
    return {
        "pwned": conn.execute("SELECT to_regclass('memgov.pwned')").fetchone(),
        "tables": conn.execute(
            "SELECT count(*) FROM pg_class WHERE relnamespace = 'memgov'::regnamespace AND relkind = 'r'"
        ).fetchone(),
        "functions": conn.execute(
            "SELECT array_agg(proname ORDER BY proname) FROM pg_proc WHERE pronamespace = 'memgov'::regnamespace"
        ).fetchone(),
        "policies": conn.execute(
            "SELECT array_agg((org_id, version, active) ORDER BY org_id, version) FROM memgov.policy_versions"
        ).fetchone(),
        "grants": conn.execute(
            "SELECT array_agg((role_name, org_id) ORDER BY role_name, org_id) FROM memgov.tenant_grants"
        ).fetchone(),
    }


@pytest.fixture(scope="module")
def roles(memgov_dsn: str) -> Iterator[None]:
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        for role in ROLES:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(GROUP)))
        for role, group in ((AGENT, "memgov_writer"), (APP, "memgov_reviewer"), (ADMIN, "memgov_admin")):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(role), sql.Identifier(group)))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(GROUP), sql.Identifier(AGENT)))
    try:
        yield
    finally:
        with psycopg.connect(memgov_dsn, autocommit=True) as conn:
            for role in ROLES:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture
def su(memgov_dsn: str, roles: None) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM memgov.tenant_grants WHERE role_name LIKE 'tenants\\_%'")
        yield conn


# -- injection through the tenant name (issue 9, item 3) --------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("tenant", [EVIL, "a\\&b", "acme\n", "it's", "$$", ";", "--", "café", "x" * 64, ""])
def test_deploy_with_a_hostile_tenant_runs_nothing(memgov_dsn, su, tenant):
    before = snapshot(su)
    result = run_memgov("deploy", str(POLICY), "--tenant", tenant, "--dsn", memgov_dsn)
    assert result.returncode == 2
    assert_one_line_error(result, "tenant id")
    assert result.stdout == ""
    assert snapshot(su) == before
    assert before["pwned"] == (None,)


@pytest.mark.slow
def test_compile_with_a_hostile_tenant_prints_nothing_to_pipe(memgov_dsn, su):
    before = snapshot(su)
    result = run_memgov("compile", str(POLICY), "--tenant", EVIL, "--dsn", memgov_dsn)
    assert_one_line_error(result, "invalid tenant id", "1 to 63 characters")
    assert result.returncode == 2
    assert result.stdout == ""  # `| psql` gets nothing
    assert snapshot(su) == before


@pytest.mark.slow
def test_rollback_with_a_hostile_tenant_is_refused(memgov_dsn, su):
    before = snapshot(su)
    result = run_memgov("rollback", "--tenant", EVIL, "--dsn", memgov_dsn)
    assert_one_line_error(result, "invalid tenant id")
    assert snapshot(su) == before


@pytest.mark.slow
def test_a_tenant_id_with_every_allowed_character_deploys_and_rolls_back(memgov_dsn, su, tmp_path):
    tenant = "Acme.eu-1:prod_2"
    for version in ("1.0.0", "1.0.1"):
        path = tmp_path / f"{version}.yaml"
        path.write_text(POLICY.read_text().replace('version: "1.0.0"', f'version: "{version}"', 1))
        result = run_memgov("deploy", str(path), "--tenant", tenant, "--dsn", memgov_dsn, "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["tenant"] == tenant
    rolled = run_memgov("rollback", "--tenant", tenant, "--dsn", memgov_dsn, "--json")
    assert rolled.returncode == 0, rolled.stderr
    assert json.loads(rolled.stdout)["tenant"] == tenant


# -- memgov tenant grant / revoke / list -------------------------------------------------


def grants(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT role_name, org_id FROM memgov.tenant_grants WHERE role_name LIKE 'tenants\\_%' ORDER BY 1, 2"
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


@pytest.mark.slow
def test_grant_list_revoke(memgov_dsn, su):
    result = run_memgov("tenant", "grant", AGENT, "acme", "--dsn", memgov_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"bound {AGENT} to tenant acme"
    again = run_memgov("tenant", "grant", AGENT, "acme", "--dsn", memgov_dsn)
    assert again.returncode == 0 and again.stdout.strip() == f"{AGENT} is already bound to tenant acme"
    assert run_memgov("tenant", "grant", GROUP, "globex", "--dsn", memgov_dsn).returncode == 0
    assert grants(su) == [(GROUP, "globex"), (AGENT, "acme")]

    listed = run_memgov("tenant", "list", "--dsn", memgov_dsn, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {(r["role"], r["org_id"]): r for r in json.loads(listed.stdout)}
    assert rows[(AGENT, "acme")]["logins"] == [AGENT]
    assert rows[(GROUP, "globex")]["logins"] == [AGENT]  # the agent is in the group
    assert rows[(AGENT, "acme")]["granted_by"] and rows[(AGENT, "acme")]["role_exists"] is True

    one = run_memgov("tenant", "list", "--role", GROUP, "--dsn", memgov_dsn, "--json")
    assert [(r["role"], r["org_id"]) for r in json.loads(one.stdout)] == [(GROUP, "globex")]
    table = run_memgov("tenant", "list", "--dsn", memgov_dsn)
    assert table.returncode == 0 and AGENT in table.stdout and "globex" in table.stdout

    revoked = run_memgov("tenant", "revoke", AGENT, "acme", "--dsn", memgov_dsn, "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["revoked"] is True
    nothing = run_memgov("tenant", "revoke", AGENT, "acme", "--dsn", memgov_dsn)
    assert nothing.returncode == 0 and nothing.stdout.strip() == f"{AGENT} was not bound to tenant acme"
    assert grants(su) == [(GROUP, "globex")]
    empty = run_memgov("tenant", "list", "--role", AGENT, "--dsn", memgov_dsn)
    assert empty.stdout.strip() == f"no tenant grants for {AGENT}"


@pytest.mark.slow
def test_a_bound_login_acts_only_in_its_tenant(memgov_dsn, su):
    assert run_memgov("tenant", "grant", AGENT, "acme", "--dsn", memgov_dsn).returncode == 0
    with psycopg.connect(as_user(memgov_dsn, AGENT), autocommit=True) as agent:
        for org_id, expected in (("acme", "acme"), ("globex", None)):
            agent.execute("SELECT set_config('memgov.org_id', %s, false)", (org_id,))
            assert agent.execute("SELECT memgov.session_tenant()").fetchone() == (expected,)
    assert run_memgov("tenant", "revoke", AGENT, "acme", "--dsn", memgov_dsn).returncode == 0
    with psycopg.connect(as_user(memgov_dsn, AGENT), autocommit=True) as agent:
        agent.execute("SELECT set_config('memgov.org_id', 'globex', false)")
        assert agent.execute("SELECT memgov.session_tenant()").fetchone() == ("globex",)  # unbound again


@pytest.mark.slow
def test_an_admin_login_may_bind(memgov_dsn, su):
    result = run_memgov("tenant", "grant", APP, "acme", "--dsn", as_user(memgov_dsn, ADMIN))
    assert result.returncode == 0, result.stderr
    assert grants(su) == [(APP, "acme")]
    row = su.execute("SELECT granted_by FROM memgov.tenant_grants WHERE role_name = %s", (APP,)).fetchone()
    assert row == (ADMIN,)


@pytest.mark.slow
@pytest.mark.parametrize("login", [AGENT, APP], ids=["writer", "reviewer"])
@pytest.mark.parametrize("command", ["grant", "revoke"])
def test_a_client_may_not_bind(memgov_dsn, su, login, command):
    su.execute(
        "INSERT INTO memgov.tenant_grants (role_name, org_id) VALUES (%s, 'acme') ON CONFLICT DO NOTHING", (APP,)
    )
    before = snapshot(su)
    result = run_memgov("tenant", command, login, "globex" if command == "grant" else "acme",
                        "--dsn", as_user(memgov_dsn, login))  # fmt: skip
    assert_one_line_error(result, "permission denied", "memgov_admin")
    assert snapshot(su) == before


@pytest.mark.slow
def test_unknown_role_is_one_line(memgov_dsn, su):
    before = snapshot(su)
    result = run_memgov("tenant", "grant", "no_such_role_anywhere", "acme", "--dsn", memgov_dsn)
    assert_one_line_error(result, "no_such_role_anywhere", "does not exist")
    assert snapshot(su) == before


@pytest.mark.slow
@pytest.mark.parametrize("tenant", [EVIL, "a\\&b", "*", "", "x" * 64])
def test_bad_tenant_id_is_a_usage_error(memgov_dsn, su, tenant):
    before = snapshot(su)
    result = run_memgov("tenant", "grant", AGENT, tenant, "--dsn", memgov_dsn)
    assert result.returncode == 2
    assert_one_line_error(result, "tenant id")
    assert snapshot(su) == before


@pytest.mark.slow
def test_a_database_without_memgov_is_one_line(empty_dsn):
    assert_one_line_error(run_memgov("tenant", "list", "--dsn", empty_dsn), "memgov migrate")
