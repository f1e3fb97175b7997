"""The engine's defaults of the policy settings are SQL's, stated once (memgov.setting_defaults()).

A setting the active policy leaves out of its compiled settings falls back on them; one
it writes wins. Every feedback and retention setting a policy can write has a default, and
so do the search configuration and the risk thresholds (the compiler's and risk_level's).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
import pytest

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import RiskThresholds, load_policy

EVERY_SETTING = """
version: "{version}"
defaults: {{on_policy_miss: allow}}
sources: {{user_confirmed: ["*"], system_rule: ["*"]}}
feedback: {{confirm_delta: 0.2, reject_delta: -0.4, edit_confidence: 0.7, reject_delete_below: 0.1}}
retention:
  {{schedule: "*/5 * * * *", batch_size: 100, confidence_floor: 0.4, confidence_grace: 3 days, approval_ttl: 2 days}}
replay: {{sample_rate: 0.25, keep: 2 weeks}}
"""
HELPERS = """
SELECT memgov.feedback_setting(%(org)s, 'confirm_delta'), memgov.feedback_setting(%(org)s, 'reject_delta'),
       memgov.feedback_setting(%(org)s, 'edit_confidence'), memgov.feedback_setting(%(org)s, 'reject_delete_below'),
       memgov.retention_interval(%(org)s, 'confidence_grace')::text,
       memgov.retention_interval(%(org)s, 'approval_ttl')::text,
       memgov.confidence_floor(%(org)s), memgov.policy_setting(%(org)s, 'retention', 'schedule'),
       memgov.policy_setting(%(org)s, 'retention', 'batch_size')
"""


def helpers(conn: psycopg.Connection[Any], org: str = "acme") -> tuple[Any, ...]:
    row = conn.execute(HELPERS, {"org": org}).fetchone()
    assert row is not None
    return tuple(row)


def deploy_every_setting(conn: psycopg.Connection[Any], version: str) -> dict[str, Any]:
    compiled = compile_policy(load_policy(EVERY_SETTING.format(version=version)))
    conn.execute(compiled.install_sql())
    return compiled.settings()


def test_every_setting_a_policy_writes_has_a_default(db_conn):
    settings = deploy_every_setting(db_conn, "1.0.0")
    (defaults,) = db_conn.execute("SELECT memgov.setting_defaults()").fetchone()
    for section in ("feedback", "retention", "replay"):
        assert set(settings.get(section, {})) <= set(defaults[section]), section
    assert set(defaults["limits"]) == {name for (name,) in db_conn.execute("SELECT name FROM memgov.settings")}


def test_the_policys_settings_win_and_left_out_ones_fall_back_on_the_defaults(db_conn):
    deploy_every_setting(db_conn, "2.0.0")
    written = helpers(db_conn)
    assert written == (
        Decimal("0.2"), Decimal("-0.4"), Decimal("0.7"), Decimal("0.1"), "3 days", "2 days",
        Decimal("0.4"), "*/5 * * * *", "100",
    )  # fmt: skip
    # the same version with its feedback and retention settings left out, as a policy that
    # does not write them compiles
    db_conn.execute("UPDATE memgov.policy_versions SET settings = settings - 'feedback' - 'retention' WHERE active")
    db_conn.execute("SELECT memgov.rebuild_dispatch()")
    assert helpers(db_conn) == (
        Decimal("0.1"), Decimal("-0.3"), Decimal("0.8"), Decimal("0.0"), "30 days", "7 days",
        Decimal("0.3"), "*/10 * * * *", "5000",
    )  # fmt: skip
    (schedule,) = db_conn.execute("SELECT memgov.policy_setting('*', 'retention', 'schedule')").fetchone()
    assert schedule == "*/10 * * * *"


@pytest.mark.parametrize("role", ["memgov_writer", "memgov_reviewer"])
def test_clients_may_not_read_the_settings_helpers(db_conn, role):
    for function in ("setting_defaults()", "policy_setting(text, text, text)", "feedback_setting(text, text)",
                     "retention_interval(text, text)", "confidence_floor(text)"):  # fmt: skip
        (may,) = db_conn.execute(
            "SELECT has_function_privilege(%s, %s, 'EXECUTE')", (role, f"memgov.{function}")
        ).fetchone()
        assert may is False, f"{role} may execute memgov.{function}"


def test_the_search_configuration_a_policy_leaves_out_is_the_default(db_conn):
    (default,) = db_conn.execute("SELECT memgov.setting_defaults() #>> '{search,text_config}'").fetchone()
    assert default == "pg_catalog.simple"
    english = 'version: "3.0.0"\ndefaults: {on_policy_miss: allow}\nsearch: {text_config: english}\n'
    plain = 'version: "{version}"\ndefaults: {{on_policy_miss: allow}}\n'
    db_conn.execute(compile_policy(load_policy(english)).install_sql())
    db_conn.execute(compile_policy(load_policy(plain.format(version="3.0.1")), "acme").install_sql())
    configs = "SELECT memgov.search_config('acme')::text, memgov.search_config('globex')::text"
    # a tenant whose policy names none takes the default, whatever the global policy names
    assert db_conn.execute(configs).fetchone() == ("simple", "english")
    db_conn.execute(compile_policy(load_policy(plain.format(version="3.1.0"))).install_sql())
    assert db_conn.execute(configs).fetchone() == ("simple", "simple")


def test_the_risk_thresholds_of_the_compiler_and_of_risk_level_are_the_defaults(db_conn):
    (stated,) = db_conn.execute("SELECT memgov.setting_defaults() -> 'risk_thresholds'").fetchone()
    python = RiskThresholds()
    assert {name: Decimal(str(value)) for name, value in stated.items()} == {
        "low_max": python.low_max, "medium_max": python.medium_max, "high_max": python.high_max,
    }  # fmt: skip
    # memgov.risk_level without thresholds (a PUBLIC function: it restates them) draws the same lines
    (levels,) = db_conn.execute(
        """SELECT array_agg(memgov.risk_level(s.score, NULL) ORDER BY s.score)
             FROM (SELECT (memgov.setting_defaults() #>> ARRAY['risk_thresholds', k])::numeric + d AS score
                     FROM unnest(ARRAY['low_max', 'medium_max', 'high_max']) AS k, unnest(ARRAY[0, 0.001]) AS d) AS s"""
    ).fetchone()
    assert levels == ["low", "medium", "medium", "high", "high", "critical"]
