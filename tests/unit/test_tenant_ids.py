"""Tenant ids: one rule (memgov_pg.tenants), checked by the CLI, the compiler, deploy and rollback.

No database: the CLI runs are usage errors that stop before any connection.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import compile_file, deploy, rollback, scope_of
from memgov_pg.errors import MemgovError
from memgov_pg.policy import load_policy
from memgov_pg.tenants import GLOBAL, TENANT_ID_PATTERN, InvalidTenantId, check_tenant_id, is_tenant_id, scope_text
from tests.cli_helpers import run_memgov

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = ROOT / "policies" / "default.yaml"
NO_SERVER = "postgresql://nobody@127.0.0.1:1/never"

VALID = ["a", "Z", "7", "acme", "ACME", "acme-eu", "acme.eu-1:prod_2", "a--b", "x" * 63, "0.0.0.0:5432"]
HOSTILE = [
    pytest.param("evil\rCREATE TABLE x;\r--", id="cr-ends-a-comment"),
    pytest.param("evil\nCREATE TABLE x;\n--", id="newline"),
    pytest.param("acme\n", id="trailing-newline"),
    pytest.param("\nacme", id="leading-newline"),
    pytest.param("a\\&b", id="backslash-ampersand"),
    pytest.param("a\\1", id="backreference"),
    pytest.param("a\\", id="trailing-backslash"),
    pytest.param("it's", id="single-quote"),
    pytest.param('a"b', id="double-quote"),
    pytest.param("$$", id="dollar-quote"),
    pytest.param("a$body$b", id="tagged-dollar-quote"),
    pytest.param(";", id="semicolon"),
    pytest.param("acme;DROP SCHEMA memgov", id="statement"),
    pytest.param("--", id="comment-marker"),
    pytest.param("-acme", id="leading-dash"),
    pytest.param(".acme", id="leading-dot"),
    pytest.param("a/*b*/", id="block-comment"),
    pytest.param("a b", id="space"),
    pytest.param(" acme", id="leading-space"),
    pytest.param("acme\t", id="tab"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a%b", id="percent"),
    pytest.param("café", id="unicode-letter"),
    pytest.param("ａcme", id="fullwidth"),
    pytest.param("acme\u2028x", id="unicode-line-separator"),
    pytest.param("acme\u200b", id="zero-width-space"),
    pytest.param("x" * 64, id="64-chars"),
    pytest.param("", id="empty"),
    pytest.param("*", id="global-scope"),
]


@pytest.mark.parametrize("value", VALID)
def test_valid_tenant_ids(value):
    assert is_tenant_id(value)
    assert check_tenant_id(value) == value


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_are_refused_in_one_line(value):
    assert not is_tenant_id(value)
    with pytest.raises(InvalidTenantId) as info:
        check_tenant_id(value)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and message.isprintable(), message
    assert "\r" not in message and "\n" not in message
    if value != "*":
        assert "1 to 63 characters" in message  # the message says the rule


@pytest.mark.parametrize("value", [*VALID, *(p.values[0] for p in HOSTILE), "a" * 63, "a" * 64, "-" + "a" * 62])
def test_the_pattern_is_the_sql_functions_rule(value):
    # memgov.is_tenant_id writes the rule as an unbounded pattern and a length (tests/db/
    # test_attacks_tenants.py holds the SQL function to is_tenant_id); the two agree here
    sql_form = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]*", value) is not None and len(value) <= 63
    assert (re.fullmatch(TENANT_ID_PATTERN.strip("^$"), value) is not None) == sql_form == is_tenant_id(value)


def test_invalid_tenant_id_is_a_usage_error():
    assert issubclass(InvalidTenantId, MemgovError)
    assert InvalidTenantId.exit_code == 2


@pytest.mark.parametrize("value", [None, 42, b"acme", ["acme"]])
def test_only_strings_are_tenant_ids(value):
    with pytest.raises(InvalidTenantId, match="must be a string"):
        check_tenant_id(value)


def test_global_scope_only_where_meant():
    assert check_tenant_id(GLOBAL, allow_global=True) == GLOBAL
    with pytest.raises(InvalidTenantId, match="global scope"):
        check_tenant_id(GLOBAL)
    assert scope_text(GLOBAL) == "the global policy"
    assert scope_text("acme") == "tenant acme"


def test_a_long_value_is_shown_cut():
    with pytest.raises(InvalidTenantId) as info:
        check_tenant_id("x" * 5000 + "\r")
    assert len(str(info.value)) < 300


# -- the compiler -------------------------------------------------------------------


@pytest.fixture(scope="module")
def policy():
    return load_policy(DEFAULT_POLICY.read_bytes(), filename=str(DEFAULT_POLICY))


@pytest.mark.parametrize("value", [p for p in HOSTILE if p.values != ("*",)])  # '*' is the global policy
def test_compile_policy_refuses_hostile_tenants(policy, value):
    with pytest.raises(InvalidTenantId):
        compile_policy(policy, value)


def test_compile_policy_global_and_tenant(policy):
    assert compile_policy(policy).org_id == GLOBAL
    compiled = compile_policy(policy, "acme.eu-1:prod_2")
    script = compiled.script()
    assert "-- memgov policy 1" in script.splitlines()[0]
    assert "for tenant acme.eu-1:prod_2" in script.splitlines()[0]
    assert "\r" not in script


def test_a_compiled_policy_with_a_forged_tenant_writes_no_comment(policy):
    """A future path that builds a CompiledPolicy by hand cannot skip the check."""
    forged = dataclasses.replace(compile_policy(policy, "acme"), org_id="evil\rCREATE TABLE x;\r--")
    with pytest.raises(InvalidTenantId):
        forged.script()


# -- deploy, rollback, compile_file: refused before any connection ---------------------


@pytest.mark.parametrize("value", ["evil\rCREATE TABLE x;\r--", "a\\&b", "", "*"])
def test_deploy_paths_refuse_before_connecting(value):
    with pytest.raises(InvalidTenantId):
        scope_of(value)
    with pytest.raises(InvalidTenantId):
        deploy(NO_SERVER, DEFAULT_POLICY, tenant=value)
    with pytest.raises(InvalidTenantId):
        rollback(NO_SERVER, tenant=value)
    with pytest.raises(InvalidTenantId):
        compile_file(DEFAULT_POLICY, value)


def test_no_tenant_is_the_global_scope():
    assert scope_of(None) == GLOBAL
    assert scope_of("acme") == "acme"


# -- the command line ---------------------------------------------------------------


EVIL = "evil\rCREATE TABLE memgov.pwned AS SELECT 1;\r--"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("compile", str(DEFAULT_POLICY), "--tenant", EVIL),
        ("deploy", str(DEFAULT_POLICY), "--tenant", EVIL, "--dsn", NO_SERVER),
        ("rollback", "--tenant", EVIL, "--dsn", NO_SERVER),
        ("compile", str(DEFAULT_POLICY), "--tenant", "a\\&b"),
        ("compile", str(DEFAULT_POLICY), "--tenant", ""),
        ("compile", str(DEFAULT_POLICY), "--tenant", "*"),
        ("tenant", "grant", "agent", EVIL, "--dsn", NO_SERVER),
        ("tenant", "revoke", "agent", "a\n", "--dsn", NO_SERVER),
    ],
    ids=["compile", "deploy", "rollback", "backslash", "empty", "global", "grant", "revoke"],
)
def test_cli_refuses_a_bad_tenant_with_one_line_and_exit_2(args, tmp_path):
    result = run_memgov(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memgov: error: "), lines[0]
    assert "tenant" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # nothing for psql to run


# -- the Python engine ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["evil\rCREATE TABLE x;\r--", "a\\&b", "*", ""])
def test_the_engine_refuses_a_bad_tenant_before_connecting(value):
    import asyncio

    from memgov_pg.engine import MemoryPolicyEngine, SyncMemoryPolicyEngine

    with pytest.raises(InvalidTenantId):
        SyncMemoryPolicyEngine.connect(NO_SERVER, org_id=value)
    with pytest.raises(InvalidTenantId):
        asyncio.run(MemoryPolicyEngine.connect(NO_SERVER, org_id=value))
