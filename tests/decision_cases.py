"""Decision corpora (cedar style): a policy, items, and the decision each must get.

A file under ``tests/cases/decisions/`` is a list of groups::

    - note: what the group shows                 # part of the pytest id
      policy: policies/default.yaml              # a path from the repository root,
                                                 # or the policy's YAML text
      tenant: acme                               # optional: deploy as a tenant override
      also_deploy:                               # optional: deployed first, e.g. the global
        - {policy: ..., tenant: ...}             # policy under a tenant override
      cases:
        - note: a secret is denied
          operation: remember                    # default remember
          item: {org_id: acme, category: preference, fact_text: "...", ...}
          want:                                  # every key given is compared
            action: deny
            reason_codes: [SECRET_DETECTED]
            matched_rule_ids: [block-secrets]
            enforced: true
            policy_version: "1.0.0"
            mode: enforce
            risk_level: high
            rules:                               # optional: memgov.explain's outcome per
              block-secrets:                     # rule; only the rules and keys given
                matched: true                    # are compared. failed_field is the
                failed_field: null               # field of first_failed_condition

Item values of the form ``"now() - N days"`` (minutes, hours, weeks too) are
turned into timestamps before the item is sent. Every case is decided by
``memgov.evaluate`` in real PostgreSQL (``memgov.explain`` when its ``want``
has ``rules``); nothing here re-implements a rule.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import pg_regex_checker
from memgov_pg.policy import load_policy
from tests import yaml_text

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = ROOT / "tests" / "cases" / "decisions"
GROUP_KEYS = {"note", "policy", "tenant", "also_deploy", "cases"}
CASE_KEYS = {"note", "operation", "item", "want"}
WANT_KEYS = {"action", "reason_codes", "matched_rule_ids", "enforced", "policy_version", "mode", "risk_level",
             "risk_score", "rules"}  # fmt: skip
RULE_KEYS = {"matched", "in_scope", "failed_field"}
_RELATIVE = re.compile(r"^now\(\) - (\d+) (minute|hour|day|week)s?$")


def load_groups() -> list[tuple[str, dict[str, Any]]]:
    groups = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        for group in yaml_text.safe_load(path.read_text(encoding="utf-8")):
            assert set(group) <= GROUP_KEYS, f"{path.name}: unknown keys {set(group) - GROUP_KEYS}"
            for case in group["cases"]:
                assert set(case) <= CASE_KEYS, f"{path.name}: unknown keys {set(case) - CASE_KEYS}"
                assert set(case["want"]) <= WANT_KEYS, f"{path.name}: unknown keys {set(case['want']) - WANT_KEYS}"
                for rule_want in case["want"].get("rules", {}).values():
                    assert set(rule_want) <= RULE_KEYS, f"{path.name}: unknown keys {set(rule_want) - RULE_KEYS}"
            groups.append((f"{path.stem}::{group['note']}", group))
    return groups


def policy_text(ref: str) -> tuple[str, str]:
    """(text, filename) of a policy given as a repository path or inline YAML."""
    if "\n" not in ref and ref.endswith((".yaml", ".yml")):
        return (ROOT / ref).read_text(encoding="utf-8"), ref
    return ref, "<inline>"


MEMGOV_TABLES = ("long_term_memory_items", "approval_requests", "quarantine", "decision_log", "feedback_events",
                 "deletion_log", "maintenance_runs", "decision_log_seals", "decision_log_archives",
                 "shadow_decisions", "policy_shadows", "replay_samples", "settings_changes")  # fmt: skip
# append-only (sql/080_audit.sql): their guard trigger refuses every DELETE; only their owner can lift it
APPEND_ONLY_TABLES = ("decision_log", "decision_log_seals", "decision_log_archives", "settings_changes")


def wipe(conn: psycopg.Connection[Any]) -> None:
    """Empty memgov's tables on the engine's own path (no decision, nothing logged) and forget the policies."""
    empty_tables(conn)
    reset_policies(conn)


def empty_tables(conn: psycopg.Connection[Any]) -> None:
    """Empty MEMGOV_TABLES (the policies stay).

    The decision log, its seals and archive records are emptied the way only their owner can:
    with their guard trigger disabled for this one transaction."""
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        for table in APPEND_ONLY_TABLES:
            conn.execute(f"ALTER TABLE memgov.{table} DISABLE TRIGGER refuse_change")
        for table in MEMGOV_TABLES:
            conn.execute(f"DELETE FROM memgov.{table}")
        for table in APPEND_ONLY_TABLES:
            conn.execute(f"ALTER TABLE memgov.{table} ENABLE ALWAYS TRIGGER refuse_change")


#: Drops every compiled policy function (memgov.policy_<hash>, _explain, _retention, _read).
DROP_COMPILED = """
DO $drop$
DECLARE
    v_function regprocedure;
BEGIN
    FOR v_function IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'memgov'::regnamespace
           AND p.proname ~ '^policy_[0-9a-f]{16}(_explain|_retention|_read)?$'
    LOOP
        EXECUTE format('DROP FUNCTION %s', v_function);
    END LOOP;
END
$drop$"""


def reset_policies(conn: psycopg.Connection[Any]) -> None:
    """Forget every deployed version, and drop its functions (superuser; tests only): a
    version deployed again is new (memgov.stage_policy refuses a function name that is taken)."""
    conn.execute("DELETE FROM memgov.policy_versions")
    conn.execute("SELECT memgov.rebuild_dispatch()")
    conn.execute(DROP_COMPILED)


def deploy_text(conn: psycopg.Connection[Any], text: str, filename: str, tenant: str | None) -> None:
    policy = load_policy(text, filename=filename, regex_checker=pg_regex_checker(conn))
    with conn.transaction():
        conn.execute(compile_policy(policy, tenant or "*").install_sql())


def resolve_times(value: Any, now: dt.datetime) -> Any:
    if isinstance(value, dict):
        return {k: resolve_times(v, now) for k, v in value.items()}
    if isinstance(value, str) and (m := _RELATIVE.match(value)):
        return (now - dt.timedelta(**{m.group(2) + "s": int(m.group(1))})).isoformat()
    return value


def run_group(conn: psycopg.Connection[Any], group: dict[str, Any]) -> list[str]:
    """Deploy the group's policies and decide its cases; the list of mismatches."""
    reset_policies(conn)
    for extra in group.get("also_deploy", []):
        deploy_text(conn, *policy_text(extra["policy"]), extra.get("tenant"))
    deploy_text(conn, *policy_text(group["policy"]), group.get("tenant"))
    failures: list[str] = []
    with conn.transaction(force_rollback=True):  # one now() for the item times and every decision
        now = conn.execute("SELECT now()").fetchone()[0]
        for case in group["cases"]:
            failures += _decide(conn, case, now)
    return failures


def _decide(conn: psycopg.Connection[Any], case: dict[str, Any], now: dt.datetime) -> list[str]:
    """One case decided: its mismatch, if any."""
    item = resolve_times(case["item"], now)
    want = dict(case["want"])
    rules_want = want.pop("rules", None)
    function = "memgov.explain" if rules_want is not None else "memgov.evaluate"
    got = conn.execute(f"SELECT {function}(%s, %s)", (Jsonb(item), case.get("operation", "remember"))).fetchone()[0]
    diff = {k: (v, got.get(k)) for k, v in want.items() if _normal(got.get(k)) != _normal(v)}
    if rules_want is not None:
        outcomes = {r["rule_id"]: _rule_outcome(r) for r in got["rules"]}
        for rule_id, rule_want in rules_want.items():
            outcome = outcomes.get(rule_id, {})
            for k, v in rule_want.items():
                if outcome.get(k) != v:
                    diff[f"rules.{rule_id}.{k}"] = (v, outcome.get(k))
    if not diff:
        return []
    shown = ", ".join(f"{k}: want {w!r}, got {g!r}" for k, (w, g) in diff.items())
    return [f"{case['note']}: {shown}"]


def _rule_outcome(explained: dict[str, Any]) -> dict[str, Any]:
    failed = explained.get("first_failed_condition")
    return {
        "matched": explained.get("matched"),
        "in_scope": explained.get("in_scope"),
        "failed_field": failed.get("field") if isinstance(failed, dict) else None,
    }


def _normal(value: Any) -> Any:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return round(float(value), 3)
    return value
