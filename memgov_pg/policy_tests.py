"""``memgov test``: a policy's unit tests (docs/policy-tests.md), decided inside PostgreSQL.

A test file (``<policy>.test.yaml`` beside the policy, or named on the command line)
lists cases; each is decided by the policy under test, compiled and installed in a
transaction that is rolled back afterwards: nothing is deployed, and nothing here
re-implements a rule. The candidate is installed as a scratch tenant's override
(:data:`SCRATCH_TENANT` and a random suffix), so that it never collides with a deployed version of the
same number, and its compiled function decides each case on the case's own item.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import psycopg
import yaml
from psycopg import sql
from psycopg.types.json import Jsonb

from .compiler import compile_policy
from .db import connect, first_line
from .deploy import read_policy, savepoint_regex_checker
from .errors import MemgovError
from .policy import OPERATION_TYPES, load_policy
from .resources import POLICY_TEST_SUFFIX, query

#: The tenant the candidate is installed for, inside the rolled-back transaction: this
#: prefix and a random suffix, so that it never meets a real tenant's versions.
SCRATCH_TENANT = "memgov-policy-test"
CASE_KEYS = ("name", "operation", "actor", "item", "expect")
EXPECT_KEYS = ("action", "rule_ids", "reason_codes")
#: what a decision's action can be (auto_confirm is an allow)
ACTIONS = ("allow", "deny", "require_approval", "quarantine")
#: expect's keys, and the decision's keys they are compared with
DECISION_KEYS = {"action": "action", "rule_ids": "matched_rule_ids", "reason_codes": "reason_codes"}


class PolicyTestError(MemgovError):
    """A test file that cannot be read: ``file: case: message``."""


@dataclass(frozen=True)
class Case:
    """One case of a test file."""

    file: str
    name: str
    item: dict[str, Any]
    expect: dict[str, Any]
    operation: str = "remember"
    actor: str | None = None


@dataclass(frozen=True)
class Outcome:
    """A case and what the policy decided (``actual``), or the error that stopped it."""

    case: Case
    actual: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def differences(self) -> list[str]:
        """``key: expected X, got Y`` for each expected key the decision does not match."""
        if self.error is not None:
            return [f"error: {self.error}"]
        out = []
        for key, want in self.case.expect.items():
            got = self.actual.get(DECISION_KEYS[key])
            if got != want:
                out.append(f"{key}: expected {want!r}, got {got!r}")
        return out

    @property
    def passed(self) -> bool:
        """Whether the decision matches every expected key."""
        return not self.differences

    def as_json(self) -> dict[str, Any]:
        """The outcome in ``memgov test --json``."""
        return {"file": self.case.file, "name": self.case.name, "operation": self.case.operation,
                "passed": self.passed, "expected": self.case.expect,
                "actual": {k: self.actual.get(v) for k, v in DECISION_KEYS.items()} if self.error is None else None,
                "differences": self.differences}  # fmt: skip


def tests_beside(policy: str | Path) -> Path:
    """The test file that belongs to a policy: ``default.yaml`` -> ``default.test.yaml``."""
    path = Path(policy)
    return path.with_name(path.stem + POLICY_TEST_SUFFIX)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyTestError(f"{where} must be a list of strings")
    return list(value)


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a test file; PolicyTestError naming the file and case when it is malformed."""
    name = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyTestError(f"{name}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise PolicyTestError(f"{name}: invalid YAML: {first_line(exc)}") from None
    if not isinstance(data, dict) or set(data) != {"cases"} or not isinstance(data["cases"], list):
        raise PolicyTestError(f"{name}: a test file is a mapping with one key, cases: a list of cases")
    cases = []
    for index, raw in enumerate(data["cases"]):
        where = f"{name}: cases[{index}]"
        if not isinstance(raw, dict):
            raise PolicyTestError(f"{where} must be a mapping")
        where = f"{name}: {raw.get('name', f'cases[{index}]')}"
        unknown = sorted(set(raw) - set(CASE_KEYS))
        if unknown:
            raise PolicyTestError(f"{where}: unknown key {unknown[0]!r} (the keys are {', '.join(CASE_KEYS)})")
        for key in ("name", "item", "expect"):
            if key not in raw:
                raise PolicyTestError(f"{where}: {key} is required")
        if not isinstance(raw["name"], str) or not raw["name"]:
            raise PolicyTestError(f"{where}: name must be a non-empty string")
        if not isinstance(raw["item"], dict):
            raise PolicyTestError(f"{where}: item must be a mapping of memory columns")
        operation = raw.get("operation", "remember")
        if operation not in OPERATION_TYPES:
            raise PolicyTestError(f"{where}: operation must be one of {', '.join(OPERATION_TYPES)}")
        actor = raw.get("actor")
        if actor is not None and (not isinstance(actor, str) or not actor):
            raise PolicyTestError(f"{where}: actor must be a role name")
        expect = raw["expect"]
        if not isinstance(expect, dict) or "action" not in expect or not isinstance(expect["action"], str):
            raise PolicyTestError(f"{where}: expect must be a mapping with an action")
        unknown = sorted(set(expect) - set(EXPECT_KEYS))
        if unknown:
            keys = ", ".join(EXPECT_KEYS)
            raise PolicyTestError(f"{where}: unknown key {unknown[0]!r} in expect (the keys are {keys})")
        if expect["action"] not in ACTIONS:
            raise PolicyTestError(f"{where}: expect.action must be one of {', '.join(ACTIONS)}")
        wanted: dict[str, Any] = {"action": expect["action"]}
        for key in ("rule_ids", "reason_codes"):
            if key in expect:
                wanted[key] = _strings(expect[key], f"{where}: expect.{key}")
        cases.append(Case(name, raw["name"], raw["item"], wanted, operation, actor))
    return cases


def run(dsn: str, policy: str | Path, test_files: Sequence[str | Path]) -> list[Outcome]:
    """Decide every case of ``test_files`` by ``policy``, in one transaction rolled back."""
    cases = [case for path in test_files for case in load_cases(path)]
    with connect(dsn) as conn:
        try:
            # the compiled functions pin no search_path (docs/security.md): in the engine they run
            # under its own; here, under the same, never the caller's (that would reach its objects)
            conn.execute(query("pin_search_path"))
            candidate = load_policy(read_policy(policy), filename=str(policy),
                                    regex_checker=savepoint_regex_checker(conn))  # fmt: skip
            compiled = compile_policy(candidate, f"{SCRATCH_TENANT}-{secrets.token_hex(8)}")
            conn.execute(compiled.install_sql())
            actor = conn.execute("SELECT current_user::text").fetchone()
            assert actor is not None
            columns = {r[0] for r in conn.execute(query("memory_columns")).fetchall()}
            decide = sql.SQL(
                "SELECT memgov.decision_json(memgov.{}(memgov.dry_run_item(%s), memgov.check_operation(%s), %s))"
            ).format(sql.Identifier(compiled.function_name))
            return [_decide(conn, decide, case, actor[0], columns) for case in cases]
        finally:
            conn.rollback()


def _decide(conn: psycopg.Connection[Any], decide: sql.Composed, case: Case, actor: str, columns: set[str]) -> Outcome:
    unknown = sorted(set(case.item) - columns)
    if unknown:  # memgov.evaluate would ignore it: a test that names it is wrong
        return Outcome(case, error=f"the item has a column memgov.long_term_memory_items does not have: {unknown[0]}")
    conn.execute("SAVEPOINT memgov_test_case")
    try:
        row = conn.execute(decide, (Jsonb(case.item), case.operation, case.actor or actor)).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        raise MemgovError(
            "memgov test runs the compiled policy itself: connect as a superuser (as `memgov up` does)"
        ) from None
    except psycopg.Error as exc:
        conn.execute("ROLLBACK TO SAVEPOINT memgov_test_case")
        return Outcome(case, error=f"{first_line(exc)} [{exc.sqlstate}]")
    conn.execute("RELEASE SAVEPOINT memgov_test_case")
    assert row is not None
    return Outcome(case, dict(row[0]))


def junit(outcomes: Sequence[Outcome], suite: str) -> str:
    """The outcomes as a JUnit XML report (one testsuite, a testcase per case)."""
    failed = [o for o in outcomes if not o.passed]
    root = ElementTree.Element("testsuite", name=suite, tests=str(len(outcomes)), failures=str(len(failed)))
    for outcome in outcomes:
        element = ElementTree.SubElement(root, "testcase", classname=outcome.case.file, name=outcome.case.name)
        if not outcome.passed:
            failure = ElementTree.SubElement(element, "failure", message=outcome.differences[0])
            failure.text = "\n".join(outcome.differences)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
