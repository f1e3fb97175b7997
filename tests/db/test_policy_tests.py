"""`memgov test` (docs/policy-tests.md): a policy's unit tests, decided by the policy
compiled inside PostgreSQL in a transaction that is rolled back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import psycopg
import pytest
from jsonschema import Draft202012Validator
from psycopg import conninfo

from memgov_pg.deploy import deploy
from memgov_pg.resources import shipped_policy_files
from tests import yaml_text
from tests.cli_helpers import assert_one_line_error, run_memgov

ROOT = Path(__file__).resolve().parents[2]
POLICIES = shipped_policy_files()
SCHEMA = json.loads((ROOT / "policies" / "schema" / "memgov-policy-test.schema.json").read_text())

FAILING = """
cases:
  - name: a secret is stored (wrong on purpose)
    item: {org_id: acme, category: user_fact, fact_text: "password: hunter2hunter2", source: agent_extracted,
           confidence: 0.9}
    expect: {action: allow, rule_ids: [store-confident-agent-facts]}
  - name: a confident agent fact is stored
    item: {org_id: acme, category: user_fact, fact_text: "Works in Kyiv", source: agent_extracted, confidence: 0.9}
    expect: {action: allow}
  - name: an item with a column the table does not have
    item: {org_id: acme, colour: blue}
    expect: {action: deny}
"""


def catalog(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    """What a deploy would change: the deployed versions and the compiled functions."""
    versions = conn.execute("SELECT org_id, version, active FROM memgov.policy_versions ORDER BY 1, 2").fetchall()
    functions = conn.execute(
        "SELECT count(*) FROM pg_proc WHERE pronamespace = 'memgov'::regnamespace AND proname LIKE 'policy\\_%'"
    ).fetchone()
    return tuple(versions), functions


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_policy_passes_its_tests(memgov_dsn, policy):
    tests = policy.with_name(f"{policy.stem}.test.yaml")
    assert tests.is_file(), f"{policy.relative_to(ROOT)} ships without {tests.name}"
    assert not list(Draft202012Validator(SCHEMA).iter_errors(yaml_text.safe_load(tests.read_text())))
    result = run_memgov("test", str(policy), "--dsn", memgov_dsn)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failed" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["default", "examples/memproof", "examples/memproof.yaml"])
def test_a_shipped_policy_is_tested_by_name_as_deploy_takes_it(memgov_dsn, tmp_path, name):
    # from a directory holding no policy: the name resolves to the shipped file and its tests
    stem = name.removesuffix(".yaml")
    cases = yaml_text.safe_load((ROOT / "policies" / f"{stem}.test.yaml").read_text())["cases"]
    result = run_memgov("test", name, "--json", "--dsn", memgov_dsn, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert (report["passed"], report["failed"]) == (len(cases), 0)
    assert {case["file"] for case in report["cases"]} == {str(ROOT / "policies" / f"{stem}.test.yaml")}


@pytest.mark.slow
def test_a_file_of_that_name_wins_over_the_shipped_policy(memgov_dsn, tmp_path):
    (tmp_path / "default").write_text((ROOT / "policies" / "default.yaml").read_text())
    assert_one_line_error(run_memgov("test", "default", "--dsn", memgov_dsn, cwd=tmp_path),
                          "default.test.yaml does not exist")  # fmt: skip


@pytest.mark.slow
def test_an_unknown_name_lists_the_shipped_policies(memgov_dsn, tmp_path):
    assert_one_line_error(run_memgov("test", "nosuch", "--dsn", memgov_dsn, cwd=tmp_path),
                          "no such file, nor a shipped policy (default, examples/memproof")  # fmt: skip


@pytest.mark.slow
def test_a_failing_case_shows_the_difference_and_exits_1(memgov_dsn, db_conn, tmp_path):
    tests = tmp_path / "wrong.test.yaml"
    tests.write_text(FAILING)
    junit = tmp_path / "junit.xml"
    before = catalog(db_conn)
    result = run_memgov("test", str(ROOT / "policies" / "default.yaml"), str(tests), "--junit", str(junit),
                        "--dsn", memgov_dsn)  # fmt: skip
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "a secret is stored (wrong on purpose)" in result.stdout
    assert "action: expected 'allow', got 'deny'" in result.stdout
    assert "rule_ids: expected ['store-confident-agent-facts'], got ['block-secrets']" in result.stdout
    assert "colour" in result.stdout and "1 passed, 2 failed" in result.stdout
    report = ElementTree.parse(junit).getroot()
    assert (report.get("tests"), report.get("failures")) == ("3", "2")
    assert [c.get("name") for c in report if c.find("failure") is None] == ["a confident agent fact is stored"]
    assert catalog(db_conn) == before  # nothing deployed, nothing left behind


@pytest.mark.slow
def test_json_report(memgov_dsn, tmp_path):
    tests = tmp_path / "wrong.test.yaml"
    tests.write_text(FAILING)
    result = run_memgov("test", str(ROOT / "policies" / "default.yaml"), str(tests), "--json", "--dsn", memgov_dsn)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert (data["passed"], data["failed"]) == (1, 2)
    first = data["cases"][0]
    assert first["actual"] == {"action": "deny", "rule_ids": ["block-secrets"], "reason_codes": ["SECRET_DETECTED"]}
    assert first["expected"] == {"action": "allow", "rule_ids": ["store-confident-agent-facts"]}
    assert data["cases"][2]["actual"] is None and data["cases"][2]["differences"][0].startswith("error: ")


@pytest.mark.slow
def test_a_candidate_with_the_version_of_a_deployed_policy_is_tested_not_refused(memgov_dsn, db_conn, tmp_path):
    deploy(memgov_dsn, ROOT / "policies" / "default.yaml")
    before = catalog(db_conn)
    edited = tmp_path / "default.yaml"  # same version 1.0.0, other content: a deploy would say MG409
    edited.write_text((ROOT / "policies" / "default.yaml").read_text().replace("{gt: 0.7}", "{gt: 0.95}"))
    (tmp_path / "default.test.yaml").write_text(
        "cases:\n  - name: 0.9 is no longer enough\n"
        "    item: {org_id: acme, category: user_fact, fact_text: x, source: agent_extracted, confidence: 0.9}\n"
        "    expect: {action: require_approval, rule_ids: [confirm-uncertain-agent-facts]}\n"
    )
    result = run_memgov("test", str(edited), "--dsn", memgov_dsn)
    assert result.returncode == 1  # the edited policy decides: 0.9 <= 0.95 misses both agent rules
    assert "rule_ids: expected ['confirm-uncertain-agent-facts'], got []" in result.stdout
    assert catalog(db_conn) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cases: nope", "a test file is a mapping with one key, cases"),
        ("cases:\n  - {name: x, item: {}, expect: {action: maybe}}", "expect.action must be one of"),
        ("cases:\n  - {name: x, item: {}, expect: {action: deny}, operation: read}", "operation must be one of"),
        ("cases:\n  - {name: x, item: {}, expect: {action: deny, rules: [a]}}", "unknown key 'rules' in expect"),
        ("cases:\n  - {name: x, expect: {action: deny}}", "x: item is required"),
        ("cases: [", "invalid YAML"),
    ],
)
def test_a_malformed_test_file_is_one_line(memgov_dsn, tmp_path, text, fragment):
    tests = tmp_path / "bad.test.yaml"
    tests.write_text(text)
    assert_one_line_error(run_memgov("test", str(ROOT / "policies" / "default.yaml"), str(tests),
                                     "--dsn", memgov_dsn), fragment)  # fmt: skip


@pytest.mark.slow
def test_a_policy_without_its_test_file_is_one_line(memgov_dsn, tmp_path):
    policy = tmp_path / "lonely.yaml"
    policy.write_text((ROOT / "policies" / "default.yaml").read_text())
    assert_one_line_error(run_memgov("test", str(policy), "--dsn", memgov_dsn), "lonely.test.yaml does not exist")


@pytest.mark.slow
def test_an_admin_login_is_told_to_connect_as_a_superuser(memgov_dsn, db_conn):
    db_conn.execute("DROP ROLE IF EXISTS memgov_test_policy_admin")
    db_conn.execute("CREATE ROLE memgov_test_policy_admin LOGIN IN ROLE memgov_admin")
    dsn = conninfo.make_conninfo(memgov_dsn, user="memgov_test_policy_admin")
    before = catalog(db_conn)
    try:
        result = run_memgov("test", str(ROOT / "policies" / "default.yaml"), "--dsn", dsn)
    finally:
        db_conn.execute("DROP ROLE memgov_test_policy_admin")
    assert_one_line_error(result, "connect as a superuser")
    assert catalog(db_conn) == before


@pytest.mark.slow
def test_a_real_tenant_named_like_the_scratch_tenant_is_no_obstacle(memgov_dsn, db_conn, tmp_path):
    from memgov_pg.policy_tests import SCRATCH_TENANT

    clash = tmp_path / "clash.yaml"  # the version of memproof.yaml, other content
    clash.write_text((ROOT / "policies" / "default.yaml").read_text().replace('version: "1.0.0"', 'version: "2.3.1"'))
    deploy(memgov_dsn, clash, tenant=SCRATCH_TENANT)
    result = run_memgov("test", str(ROOT / "policies" / "examples" / "memproof.yaml"), "--dsn", memgov_dsn)
    assert result.returncode == 0, result.stdout + result.stderr
