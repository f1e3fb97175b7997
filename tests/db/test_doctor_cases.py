"""`memgov doctor` against real PostgreSQL: one bad configuration at a time: reported (exit 1),
fixed, and the database is clean again.
"""

from __future__ import annotations

import pytest

from memgov_pg.doctor import MONITORING_UNREADABLE_FIX
from tests import doctor_helpers
from tests.doctor_helpers import DBA, WRITER, Key, doctor, keys, signature

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
admin = doctor_helpers.admin
baseline = doctor_helpers.baseline
dsn = doctor_helpers.dsn


# Each case: what breaks, how to undo it, and the findings doctor must add (check, severity,
# subject, fix). {db} is the database, {writer}/{dba} the logins, {private} an engine-private
# function. Every setup is undone even when the test fails: roles and parameters are cluster-wide.
CASES: list[tuple[str, list[str], list[str], list[Key]]] = [
    (
        "set-session-replication-role",
        ["GRANT SET ON PARAMETER session_replication_role TO {writer}"],
        ["REVOKE SET ON PARAMETER session_replication_role FROM {writer}"],
        [("replication-role", "error", WRITER, f"REVOKE SET ON PARAMETER session_replication_role FROM {WRITER}")],
    ),
    (
        "alter-system-session-replication-role",
        ["GRANT ALTER SYSTEM ON PARAMETER session_replication_role TO memgov_reviewer"],
        ["REVOKE ALTER SYSTEM ON PARAMETER session_replication_role FROM memgov_reviewer"],
        [
            (
                "replication-role",
                "error",
                "memgov_reviewer",
                "REVOKE ALTER SYSTEM ON PARAMETER session_replication_role FROM memgov_reviewer",
            )
        ],
    ),
    (
        "function-owned-by-a-login",
        ["ALTER FUNCTION {forget} OWNER TO {dba}"],
        ["ALTER FUNCTION {forget} OWNER TO memgov_owner"],
        [("owner", "error", "{forget}", "ALTER FUNCTION {forget} OWNER TO memgov_owner")],
    ),
    (
        "table-owned-by-a-login",
        ["ALTER TABLE memgov.decision_log OWNER TO {dba}"],
        ["ALTER TABLE memgov.decision_log OWNER TO memgov_owner"],
        [
            ("owner", "error", "memgov.decision_log", "ALTER TABLE memgov.decision_log OWNER TO memgov_owner"),
            # the monitoring views read it as memgov_owner
            ("monitoring", "warning", "memgov.monitor_decisions", MONITORING_UNREADABLE_FIX),
            ("monitoring", "warning", "memgov.monitor_seal", MONITORING_UNREADABLE_FIX),
        ],
    ),
    (
        "login-in-memgov-owner",
        ["GRANT memgov_owner TO {dba}"],
        ["REVOKE memgov_owner FROM {dba}"],
        [("owner-member", "error", DBA, f"REVOKE memgov_owner FROM {DBA}")],
    ),
    (
        "login-in-memgov-policy",
        ["GRANT memgov_policy TO {dba}"],
        ["REVOKE memgov_policy FROM {dba}"],
        [("owner-member", "error", DBA, f"REVOKE memgov_policy FROM {DBA}")],
    ),
    (
        "login-in-memgov-settings-reader",
        ["GRANT memgov_settings_reader TO {dba}"],
        ["REVOKE memgov_settings_reader FROM {dba}"],
        [("owner-member", "error", DBA, f"REVOKE memgov_settings_reader FROM {DBA}")],
    ),
    (
        "memgov-settings-reader-can-log-in",
        ["ALTER ROLE memgov_settings_reader LOGIN"],
        ["ALTER ROLE memgov_settings_reader NOLOGIN"],
        [("owner", "error", "memgov_settings_reader", "ALTER ROLE memgov_settings_reader NOLOGIN")],
    ),
    (
        "function-owned-by-memgov-settings-reader",
        ["ALTER FUNCTION {forget} OWNER TO memgov_settings_reader"],
        ["ALTER FUNCTION {forget} OWNER TO memgov_owner"],
        [("owner", "error", "{forget}", "ALTER FUNCTION {forget} OWNER TO memgov_owner")],
    ),
    (
        "settings-function-owned-by-a-login",
        ["ALTER FUNCTION memgov.cron_settings() OWNER TO {dba}"],
        ["ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_settings_reader"],
        [
            (
                "owner",
                "error",
                "memgov.cron_settings()",
                "ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_settings_reader",
            )
        ],
    ),
    (
        "execute-private-function",
        ["GRANT EXECUTE ON FUNCTION {private} TO memgov_writer"],
        ["REVOKE EXECUTE ON FUNCTION {private} FROM memgov_writer"],
        [("private-execute", "error", "{private}", "REVOKE EXECUTE ON FUNCTION {private} FROM memgov_writer")],
    ),
    (
        "execute-private-function-by-a-login",
        ["GRANT EXECUTE ON FUNCTION {private} TO {writer}"],
        ["REVOKE EXECUTE ON FUNCTION {private} FROM {writer}"],
        [("private-execute", "error", "{private}", f"REVOKE EXECUTE ON FUNCTION {{private}} FROM {WRITER}")],
    ),
    (
        "reviewer-function-for-a-writer",
        ["GRANT EXECUTE ON FUNCTION {approve} TO memgov_writer"],
        ["REVOKE EXECUTE ON FUNCTION {approve} FROM memgov_writer"],
        [("private-execute", "error", "{approve}", "REVOKE EXECUTE ON FUNCTION {approve} FROM memgov_writer")],
    ),
    (
        "security-definer-without-search-path",
        [
            "SET ROLE memgov_owner",
            "CREATE FUNCTION memgov.doctor_probe() RETURNS integer LANGUAGE sql SECURITY DEFINER AS 'SELECT 1'",
            "REVOKE EXECUTE ON FUNCTION memgov.doctor_probe() FROM PUBLIC",
            "RESET ROLE",
        ],
        ["ALTER FUNCTION memgov.doctor_probe() SET search_path = pg_catalog, pg_temp"],
        [
            (
                "search-path",
                "error",
                "memgov.doctor_probe()",
                "ALTER FUNCTION memgov.doctor_probe() SET search_path = pg_catalog, pg_temp",
            )
        ],
    ),
    (
        "security-definer-with-a-loose-search-path",
        [
            "SET ROLE memgov_owner",
            "CREATE FUNCTION memgov.doctor_probe() RETURNS integer LANGUAGE sql SECURITY DEFINER"
            " SET search_path = public, pg_catalog AS 'SELECT 1'",
            "REVOKE EXECUTE ON FUNCTION memgov.doctor_probe() FROM PUBLIC",
            "RESET ROLE",
        ],
        ["ALTER FUNCTION memgov.doctor_probe() SET search_path = pg_catalog, pg_temp"],
        [
            (
                "search-path",
                "warning",
                "memgov.doctor_probe()",
                "ALTER FUNCTION memgov.doctor_probe() SET search_path = pg_catalog, pg_temp",
            )
        ],
    ),
    (
        "writer-login-with-temp",
        ["GRANT TEMPORARY ON DATABASE {db} TO {writer}"],
        ["REVOKE TEMPORARY ON DATABASE {db} FROM {writer}"],
        [("client-create", "warning", "database {db}", f"REVOKE TEMPORARY ON DATABASE {{db}} FROM {WRITER}")],
    ),
    (
        "temp-for-public",
        ["GRANT TEMPORARY ON DATABASE {db} TO PUBLIC"],
        ["REVOKE TEMPORARY ON DATABASE {db} FROM PUBLIC"],
        [
            (
                "client-create",
                "warning",
                "database {db}",
                "REVOKE TEMPORARY ON DATABASE {db} FROM PUBLIC (and GRANT it to the roles that need it)",
            )
        ],
    ),
    (
        "writers-create-in-a-schema",
        ["CREATE SCHEMA doctor_scratch", "GRANT CREATE ON SCHEMA doctor_scratch TO memgov_writer"],
        ["DROP SCHEMA doctor_scratch"],
        [
            (
                "client-create",
                "warning",
                "schema doctor_scratch",
                "REVOKE CREATE ON SCHEMA doctor_scratch FROM memgov_writer",
            )
        ],
    ),
    (
        "writers-create-in-memgov",
        ["GRANT CREATE ON SCHEMA memgov TO memgov_writer"],
        ["REVOKE CREATE ON SCHEMA memgov FROM memgov_writer"],
        [("client-create", "error", "schema memgov", "REVOKE CREATE ON SCHEMA memgov FROM memgov_writer")],
    ),
    (
        "writers-delete-the-memory-table",
        ["GRANT DELETE, TRUNCATE ON memgov.long_term_memory_items TO memgov_writer"],
        ["REVOKE DELETE, TRUNCATE ON memgov.long_term_memory_items FROM memgov_writer"],
        [
            (
                "table-write",
                "error",
                "memgov.long_term_memory_items",
                "REVOKE DELETE, TRUNCATE ON memgov.long_term_memory_items FROM memgov_writer",
            )
        ],
    ),
    (
        "reviewers-update-the-log",
        ["GRANT UPDATE (action) ON memgov.decision_log TO memgov_reviewer"],
        ["REVOKE UPDATE (action) ON memgov.decision_log FROM memgov_reviewer"],
        [
            (
                "table-write",
                "error",
                "memgov.decision_log (action)",
                "REVOKE UPDATE (action) ON memgov.decision_log FROM memgov_reviewer",
            )
        ],
    ),
    (
        "writers-read-a-table-without-row-security",
        ["GRANT SELECT ON memgov.maintenance_runs TO memgov_writer"],
        ["REVOKE SELECT ON memgov.maintenance_runs FROM memgov_writer"],
        [
            (
                "client-read",
                "error",
                "memgov.maintenance_runs",
                "REVOKE SELECT ON memgov.maintenance_runs FROM memgov_writer"
                " (or ENABLE ROW LEVEL SECURITY with a tenant policy)",
            )
        ],
    ),
    (
        "binding-flag-rewritten",
        ["CREATE OR REPLACE FUNCTION memgov.binding_on() RETURNS boolean LANGUAGE sql STABLE RETURN true"],
        ["UPDATE memgov.tenant_grants SET role_name = role_name"],
        [
            (
                "tenant-binding",
                "error",
                "memgov.binding_on()",
                "as a superuser: UPDATE memgov.tenant_grants SET role_name = role_name (its trigger rewrites the flag)",
            )
        ],
    ),
    (
        "monitoring-view-not-for-pg-monitor",
        ["REVOKE SELECT ON memgov.monitor_seal FROM pg_monitor"],
        ["GRANT SELECT ON memgov.monitor_seal TO pg_monitor"],
        [("monitoring", "warning", "pg_monitor", "GRANT SELECT ON memgov.monitor_seal TO pg_monitor")],
    ),
    (
        "monitoring-schema-not-for-pg-monitor",
        ["REVOKE USAGE ON SCHEMA memgov FROM pg_monitor"],
        ["GRANT USAGE ON SCHEMA memgov TO pg_monitor"],
        [("monitoring", "warning", "pg_monitor", "GRANT USAGE ON SCHEMA memgov TO pg_monitor")],
    ),
    (
        "monitoring-view-dropped",
        ["ALTER VIEW memgov.monitor_sweep RENAME TO monitor_sweep_gone"],
        ["ALTER VIEW memgov.monitor_sweep_gone RENAME TO monitor_sweep"],
        [
            (
                "monitoring",
                "warning",
                "memgov.monitor_sweep",
                "memgov migrate (the views come with the schema; docs/monitoring.md)",
            )
        ],
    ),
    (
        "writer-with-createrole",
        ["ALTER ROLE {writer} CREATEROLE"],
        ["ALTER ROLE {writer} NOCREATEROLE"],
        [("client-attributes", "error", WRITER, f"ALTER ROLE {WRITER} NOCREATEROLE")],
    ),
    (
        "writer-with-bypassrls",
        ["ALTER ROLE {writer} BYPASSRLS"],
        ["ALTER ROLE {writer} NOBYPASSRLS"],
        [("client-attributes", "error", WRITER, f"ALTER ROLE {WRITER} NOBYPASSRLS")],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("setup", "fix", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_configuration_is_reported_then_fixed(dsn, admin, baseline, setup, fix, expected):
    names = {
        "db": admin.info.dbname,
        "writer": WRITER,
        "dba": DBA,
        "forget": signature(admin, "forget"),
        "approve": signature(admin, "approve"),
        "private": signature(admin, "rebuild_dispatch"),
    }
    fill = lambda text: text.format(**names)  # noqa: E731
    want = {tuple(fill(part) for part in key) for key in expected}
    try:
        for statement in setup:
            admin.execute(fill(statement))
        code, report = doctor(dsn)
        assert keys(report) - baseline == want, report["findings"]
        assert code == 1
        for finding in report["findings"]:  # every finding is one line with a severity and a fix
            assert "\n" not in finding["message"] and finding["fix"]
    finally:
        admin.execute("RESET ROLE")
        for statement in fix:
            admin.execute(fill(statement))
        admin.execute("DROP FUNCTION IF EXISTS memgov.doctor_probe()")
    code, report = doctor(dsn)
    assert keys(report) == baseline, report["findings"]
