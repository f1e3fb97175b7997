"""Deploy, rollback, tenant overrides and the dry run, against real PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest
from psycopg import errors
from psycopg.types.json import Jsonb

from memgov_pg.cluster import find_bindir
from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import deploy, evaluate, rollback
from memgov_pg.policy import load_policy
from memgov_pg.resources import shipped_policy_files
from tests.cli_helpers import assert_one_line_error, raises_sqlstate, run_memgov
from tests.decision_cases import reset_policies
from tests.waiting import join, wait_for

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "policies" / "default.yaml"
ITEM = {"org_id": "acme", "category": "gossip", "fact_text": "x", "source": "user_confirmed", "confidence": 0.9}


def policy_file(tmp_path: Path, version: str, action: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        f'version: "{version}"\n'
        "defaults: {on_policy_miss: require_approval}\n"
        "rules:\n"
        f"  - {{id: gossip-rule, priority: 1, category: gossip, action: {action}}}\n"
    )
    return path


@pytest.fixture(autouse=True)
def clean(db_conn):
    reset_policies(db_conn)


def test_no_policy_fails_closed(memgov_dsn):
    decision = evaluate(memgov_dsn, ITEM)
    assert decision["action"] == "deny"
    assert decision["reason_codes"] == ["NO_ACTIVE_POLICY"]


def test_deploy_records_version_rules_and_activates(memgov_dsn, db_conn):
    result = deploy(memgov_dsn, DEFAULT)
    assert result.version == "1.0.0"
    row = db_conn.execute(
        "SELECT version, org_id, active, length(source_yaml) > 0, sha256 FROM memgov.policy_versions"
    ).fetchone()
    assert row[:4] == ("1.0.0", "*", True, True)
    assert row[4] == load_policy(DEFAULT.read_bytes()).sha256
    rules = db_conn.execute(
        "SELECT rule_id, action, priority FROM memgov.memory_policy_rules ORDER BY position"
    ).fetchall()
    assert rules[0] == ("block-secrets", "deny", 10)
    assert ("forget-stale-low-confidence", "auto_delete", 100) in rules


def test_redeploying_the_same_version_is_idempotent(memgov_dsn, db_conn):
    deploy(memgov_dsn, DEFAULT)
    deploy(memgov_dsn, DEFAULT)
    assert db_conn.execute("SELECT count(*) FROM memgov.policy_versions").fetchone() == (1,)


def test_same_version_with_other_content_is_refused(memgov_dsn, tmp_path, db_conn):
    deploy(memgov_dsn, policy_file(tmp_path, "2.0.0", "allow"))
    with raises_sqlstate("MG409"):
        deploy(memgov_dsn, policy_file(tmp_path, "2.0.0", "deny"))
    assert evaluate(memgov_dsn, ITEM)["action"] == "allow"


def test_rollback_to_previous_and_named_version(memgov_dsn, tmp_path):
    deploy(memgov_dsn, policy_file(tmp_path, "1.0.0", "allow"))
    deploy(memgov_dsn, policy_file(tmp_path, "1.1.0", "deny"))
    deploy(memgov_dsn, policy_file(tmp_path, "1.2.0", "quarantine"))
    assert evaluate(memgov_dsn, ITEM)["action"] == "quarantine"
    assert rollback(memgov_dsn) == "1.1.0"
    assert evaluate(memgov_dsn, ITEM)["action"] == "deny"
    assert rollback(memgov_dsn, to="1.0.0") == "1.0.0"
    assert evaluate(memgov_dsn, ITEM)["action"] == "allow"
    assert evaluate(memgov_dsn, ITEM)["policy_version"] == "1.0.0"
    with raises_sqlstate("MG404"):
        rollback(memgov_dsn, to="9.9.9")


def test_tenant_override_applies_to_its_tenant_only(memgov_dsn, tmp_path):
    deploy(memgov_dsn, policy_file(tmp_path, "1.0.0", "allow", "global.yaml"))
    deploy(memgov_dsn, policy_file(tmp_path, "1.0.0", "deny", "acme.yaml"), tenant="acme")
    assert evaluate(memgov_dsn, ITEM)["action"] == "deny"
    assert evaluate(memgov_dsn, ITEM | {"org_id": "globex"})["action"] == "allow"
    # a tenant rollback leaves the global policy alone
    deploy(memgov_dsn, policy_file(tmp_path, "1.1.0", "quarantine", "acme2.yaml"), tenant="acme")
    assert rollback(memgov_dsn, tenant="acme") == "1.0.0"
    assert evaluate(memgov_dsn, ITEM)["action"] == "deny"
    assert evaluate(memgov_dsn, ITEM | {"org_id": "globex"})["action"] == "allow"


@pytest.mark.slow
def test_invalid_policy_leaves_the_database_as_it_was(memgov_dsn, tmp_path, db_conn):
    deploy(memgov_dsn, DEFAULT)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        'version: "2.0.0"\nrules:\n'
        '  - {id: r, priority: 1, when: [{field: fact_text, operator: regex, value: "(?<"}], action: deny}\n'
    )
    result = run_memgov("deploy", str(bad), "--dsn", memgov_dsn)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{bad}:3: r: ")
    assert "Traceback" not in result.stderr
    versions = db_conn.execute("SELECT version, active FROM memgov.policy_versions").fetchall()
    assert versions == [("1.0.0", True)]


@pytest.mark.slow
def test_compile_output_run_by_psql_deploys(memgov_dsn, db_conn):
    script = run_memgov("compile", str(DEFAULT), "--dsn", memgov_dsn)
    assert script.returncode == 0, script.stderr
    psql = subprocess.run(
        [str(find_bindir() / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-q", memgov_dsn],
        input=script.stdout, capture_output=True, text=True,
    )  # fmt: skip
    assert psql.returncode == 0, psql.stderr
    assert evaluate(memgov_dsn, ITEM | {"category": "temporary_context"})["reason_codes"] == ["NOT_LONG_TERM"]


def test_compiled_functions_pass_plpgsql_check(memgov_dsn, db_conn, plpgsql_check):
    for path in shipped_policy_files():
        reset_policies(db_conn)
        compiled = compile_policy(load_policy(path.read_bytes(), filename=str(path)))
        db_conn.execute(compiled.install_sql())
        for suffix, signature in [
            ("", "(memgov.long_term_memory_items, text, text)"),
            ("_explain", "(memgov.long_term_memory_items, text, text)"),
            ("_retention", "(memgov.long_term_memory_items)"),
        ]:
            function = f"memgov.{compiled.function_name}{suffix}{signature}"
            problems = db_conn.execute(
                "SELECT level, message FROM plpgsql_check_function_tb(%s::regprocedure) WHERE level = 'error'",
                (function,),
            ).fetchall()
            assert problems == [], f"{path.name} {function}: {problems}"


def test_evaluate_rejects_bad_input_with_sqlstate(memgov_dsn, db_conn):
    deploy(memgov_dsn, DEFAULT)
    with pytest.raises(errors.InvalidParameterValue):
        db_conn.execute("SELECT memgov.evaluate(%s, 'destroy')", (Jsonb(ITEM),))
    with pytest.raises(errors.InvalidParameterValue):
        db_conn.execute("SELECT memgov.evaluate('[1, 2]'::jsonb)")
    with pytest.raises(errors.InvalidTextRepresentation):
        db_conn.execute("SELECT memgov.evaluate(%s)", (Jsonb(ITEM | {"confidence": "high"}),))


def test_evaluate_writes_nothing(memgov_dsn, db_conn):
    deploy(memgov_dsn, DEFAULT)
    before = db_conn.execute(
        "SELECT (SELECT count(*) FROM memgov.long_term_memory_items), (SELECT count(*) FROM memgov.decision_log)"
    ).fetchone()
    evaluate(memgov_dsn, ITEM)
    evaluate(memgov_dsn, ITEM, explain=True)
    after = db_conn.execute(
        "SELECT (SELECT count(*) FROM memgov.long_term_memory_items), (SELECT count(*) FROM memgov.decision_log)"
    ).fetchone()
    assert before == after


def test_explain_names_the_first_failing_condition(memgov_dsn):
    deploy(memgov_dsn, DEFAULT)
    item = {"org_id": "acme", "category": "preference", "fact_text": "likes tea", "source": "agent_extracted",
            "confidence": 0.75}  # fmt: skip
    result = evaluate(memgov_dsn, item, explain=True)
    assert result["matched_rule_ids"] == ["store-confident-agent-facts"]
    rules = {r["rule_id"]: r for r in result["rules"]}
    assert rules["auto-confirm-preferences"]["matched"] is False
    assert rules["auto-confirm-preferences"]["first_failed_condition"] == {
        "field": "confidence", "operator": "gte", "value": 0.8,
    }  # fmt: skip
    assert rules["deny-not-long-term"]["in_scope"] is False
    assert rules["store-confident-agent-facts"]["matched"] is True


def test_concurrent_writers_see_no_error_during_deploys(memgov_dsn, tmp_path):
    """Evaluations run while versions are deployed and rolled back: each one is
    decided wholly by one version, and none fails. Every version decides some: each
    writer evaluates between every two deploys, however the threads are scheduled."""
    deploy(memgov_dsn, policy_file(tmp_path, "1.0.0", "allow", "a.yaml"))
    stop = threading.Event()
    seen: list[tuple[str, str]] = []
    finished = [0, 0]  # evaluations each writer has finished
    failures: list[BaseException] = []

    def writer(k: int) -> None:
        with psycopg.connect(memgov_dsn, autocommit=True) as conn:
            while not stop.is_set():
                try:
                    d = conn.execute("SELECT memgov.evaluate(%s)", (Jsonb(ITEM),)).fetchone()[0]
                    seen.append((d["policy_version"], d["action"]))
                    finished[k] += 1
                except BaseException as exc:
                    failures.append(exc)
                    return

    def each_writer_evaluates() -> None:
        """Until each writer has finished two evaluations more: the second began after this call."""
        marks = list(finished)
        wait_for(lambda: failures or all(n >= m + 2 for n, m in zip(finished, marks, strict=True)),
                 "each writer to evaluate")  # fmt: skip

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(1, 11):
            each_writer_evaluates()
            deploy(memgov_dsn, policy_file(tmp_path, f"1.{i}.0", "deny" if i % 2 else "allow", f"v{i}.yaml"))
        each_writer_evaluates()
        rollback(memgov_dsn, to="1.0.0")
        each_writer_evaluates()
    finally:
        stop.set()
        for t in threads:
            join(t, "a writer")
    assert not failures, failures
    expected = {"1.0.0": "allow"} | {f"1.{i}.0": "deny" if i % 2 else "allow" for i in range(1, 11)}
    assert all(expected[version] == action for version, action in seen), set(seen)
    assert {version for version, _ in seen} == set(expected)


# -- the command line --------------------------------------------------------


@pytest.mark.slow
def test_cli_validate(tmp_path):
    good = run_memgov("validate", str(DEFAULT))
    assert good.returncode == 0, good.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text('version: "1.0.0"\nrules:\n  - {id: a, priority: 1, action: allow, condtion: {}}\n'
                   "  - {id: a, priority: 2, action: explode}\n")  # fmt: skip
    result = run_memgov("validate", str(DEFAULT), str(bad))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) >= 3, lines
    assert all(line.startswith(f"{bad}:") for line in lines), lines
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_cli_deploy_evaluate_rollback(memgov_dsn, tmp_path):
    first = run_memgov("deploy", str(policy_file(tmp_path, "1.0.0", "allow", "a.yaml")), "--dsn", memgov_dsn, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["version"] == "1.0.0"
    run_memgov("deploy", str(policy_file(tmp_path, "1.1.0", "deny", "b.yaml")), "--dsn", memgov_dsn)
    decided = run_memgov("evaluate", "--item", json.dumps(ITEM), "--dsn", memgov_dsn)
    assert json.loads(decided.stdout)["action"] == "deny"
    explained = run_memgov("evaluate", "--item", json.dumps(ITEM), "--explain", "--json", "--dsn", memgov_dsn)
    assert json.loads(explained.stdout)["rules"][0]["rule_id"] == "gossip-rule"
    back = run_memgov("rollback", "--dsn", memgov_dsn)
    assert back.returncode == 0 and "1.0.0" in back.stdout
    assert (
        json.loads(run_memgov("evaluate", "--item", json.dumps(ITEM), "--dsn", memgov_dsn).stdout)["action"] == "allow"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["evaluate", "--item", "{not json"], "not valid JSON"),
        (["evaluate", "--item", "[1]"], "JSON object"),
        (["evaluate", "--item", '{"org_id": "a", "confidence": "high"}'], "invalid input syntax"),
        (["rollback", "--to", "9.9.9"], "not deployed"),
        (["deploy", "/no/such/policy.yaml"], "cannot read policy"),
    ],
)
def test_cli_bad_input_is_one_line(memgov_dsn, args, fragment):
    assert_one_line_error(run_memgov(*args, "--dsn", memgov_dsn), fragment)
