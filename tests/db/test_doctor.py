"""`memgov doctor` against real PostgreSQL: a freshly migrated database, then one bad
configuration at a time: reported (exit 1), fixed, and the database is clean again.

Roles are cluster-wide and other test modules leave client logins behind, so the
module's database first gets the one step docs/security.md asks of every deployer
(REVOKE TEMPORARY ON DATABASE ... FROM PUBLIC); the test of TEMP through PUBLIC
grants it back for its own duration.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from memgov_pg.doctor import MONITORING_UNREADABLE_FIX, REVIEWER_API, WRITER_API
from tests.cli_helpers import assert_one_line_error, run_memgov

WRITER = "doctor_writer"  # an agent's login
DBA = "doctor_dba"  # a login with no memgov role
GONE = "doctor_gone"  # bound to a tenant, then dropped
ADMIN = "doctor_admin"  # an operator's login, in memgov_admin

Key = tuple[str, str, str, str]


def as_user(dsn: str, user: str) -> str:
    return conninfo.make_conninfo(**(conninfo.conninfo_to_dict(dsn) | {"user": user}))  # type: ignore[arg-type]


def doctor(dsn: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_memgov("doctor", "--dsn", dsn, "--json", *args)
    assert result.stderr == "", result.stderr
    assert result.returncode in (0, 1), result.stdout
    return result.returncode, json.loads(result.stdout)


def keys(report: dict[str, Any]) -> set[Key]:
    return {(f["check"], f["severity"], f["subject"], f["fix"]) for f in report["findings"]}


def signature(conn: psycopg.Connection[Any], name: str) -> str:
    """memgov.<name>(argument types) as doctor prints it (and GRANT takes it)."""
    conn.execute("SET search_path = pg_catalog")
    try:
        rows = conn.execute(
            "SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'memgov'::regnamespace AND proname = %s",
            (name,),
        ).fetchall()
    finally:
        conn.execute("RESET search_path")
    assert len(rows) == 1, f"memgov.{name}: {rows}"
    return str(rows[0][0])


def drop_roles(conn: psycopg.Connection[Any]) -> None:
    for role in (WRITER, DBA, GONE, ADMIN):
        if conn.execute("SELECT FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture(scope="module")
def dsn(memgov_dsn: str, memgov_server: Any) -> Iterator[str]:
    """The module's database: hardened (no TEMP for PUBLIC), a writer login and a DBA login."""
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(sql.Identifier(conn.info.dbname)))
        drop_roles(conn)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE memgov_writer").format(sql.Identifier(WRITER)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(DBA)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE memgov_admin").format(sql.Identifier(ADMIN)))
    try:
        yield memgov_dsn
    finally:
        if memgov_server.has_pg_cron:
            run_memgov("retention", "unschedule", "--dsn", memgov_dsn)
        with psycopg.connect(memgov_dsn, autocommit=True) as conn:
            drop_roles(conn)


@pytest.fixture
def admin(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


@pytest.mark.slow
def test_a_fresh_database_lacks_only_the_sweep(dsn, memgov_server):
    """Freshly migrated: no error; pg_cron is loaded in the test cluster but no job runs the sweep."""
    code, report = doctor(dsn)
    database = report["database"]
    assert code == 1
    assert [(f["check"], f["severity"]) for f in report["findings"]] == [
        ("pg-cron", "warning"),
        ("tenant-binding", "info"),
        ("exporter-role", "info"),
    ], report["findings"]
    assert report["errors"] == 0 and report["warnings"] == 1 and report["ok"] is False
    if memgov_server.has_pg_cron:
        assert f"runs memgov.run_maintenance() in database {database}" in report["findings"][0]["message"]
        assert report["findings"][0]["fix"] == "`memgov retention schedule` (as a superuser)"
    # only errors fail with --fail-on error; a note never fails
    code, report = doctor(dsn, "--fail-on", "error")
    assert code == 0 and report["ok"] is True


@pytest.fixture(scope="module")
def baseline(dsn: str, memgov_server: Any) -> set[Key]:
    """What doctor says once the sweep is scheduled (clean: test_a_scheduled_database_is_clean)."""
    if memgov_server.has_pg_cron:
        scheduled = run_memgov("retention", "schedule", "--dsn", dsn)
        assert scheduled.returncode == 0, scheduled.stderr
    return keys(doctor(dsn)[1])


@pytest.mark.slow
def test_a_scheduled_database_is_clean(dsn, baseline, requires_pg_cron):
    assert {k[1] for k in baseline} == {"info"}, sorted(baseline)
    result = run_memgov("doctor", "--dsn", dsn)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.strip().splitlines()
    assert lines[-1].endswith("is clean (2 notes)"), lines
    assert lines[0].startswith("info: [tenant-binding] tenant binding is not in use")


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


@pytest.mark.slow
def test_text_output_is_one_finding_per_line(dsn, admin, baseline):
    private = signature(admin, "rebuild_dispatch")
    admin.execute(f"GRANT EXECUTE ON FUNCTION {private} TO memgov_writer")
    try:
        result = run_memgov("doctor", "--dsn", dsn)
    finally:
        admin.execute(f"REVOKE EXECUTE ON FUNCTION {private} FROM memgov_writer")
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    head = f"error: [private-execute] memgov_writer may EXECUTE engine-private function {private} (reaches "
    [line] = [line for line in lines if line.startswith(head)]
    assert WRITER in line[len(head) :].split(")")[0]  # the logins it reaches (other modules' logins too)
    assert line.endswith(f"; fix: REVOKE EXECUTE ON FUNCTION {private} FROM memgov_writer")
    errors = sum(1 for k in baseline if k[1] == "error") + 1
    assert lines[-1].startswith(f"memgov doctor: database {admin.info.dbname}: {errors} error")
    assert all(line.split(":", 1)[0] in ("error", "warning", "info") for line in lines[:-1])


@pytest.mark.slow
def test_a_bound_role_that_is_gone_is_a_warning(dsn, admin, baseline):
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE memgov_writer").format(sql.Identifier(GONE)))
    granted = run_memgov("tenant", "grant", GONE, "acme", "--dsn", dsn)
    assert granted.returncode == 0, granted.stderr
    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(GONE)))
    try:
        code, report = doctor(dsn)
        assert code == 1
        added = {k[:3] for k in keys(report) - baseline if k[1] != "info"}  # the note changes too: grants exist
        assert added == {("tenant-binding", "warning", GONE)}, report["findings"]
    finally:
        revoked = run_memgov("tenant", "revoke", GONE, "acme", "--dsn", dsn)
        assert revoked.returncode == 0, revoked.stderr
    assert keys(doctor(dsn)[1]) == baseline


@pytest.mark.slow
def test_binding_a_login_changes_the_note(dsn, admin, baseline):
    granted = run_memgov("tenant", "grant", WRITER, "acme", "--dsn", dsn)
    assert granted.returncode == 0, granted.stderr
    try:
        code, report = doctor(dsn)
        notes = [f for f in report["findings"] if f["check"] == "tenant-binding"]
        assert code == (0 if all(k[1] == "info" for k in baseline) else 1)
        assert all(f["severity"] == "info" for f in notes)
        assert not any("binding is not in use" in f["message"] for f in notes)
        assert not any(WRITER in f["message"] for f in notes)  # bound now
    finally:
        run_memgov("tenant", "revoke", WRITER, "acme", "--dsn", dsn)


@pytest.mark.slow
def test_a_non_superuser_gets_an_answer(dsn, baseline):
    """Catalogs are readable by everyone; what such a login cannot read is a warning, not a traceback."""
    code, report = doctor(as_user(dsn, DBA))
    assert code == 1
    assert ("tenant-binding", "warning", "memgov.tenant_grants") in {
        (f["check"], f["severity"], f["subject"]) for f in report["findings"]
    }


def pg_cron_finding(report: dict[str, Any]) -> dict[str, Any]:
    [finding] = [f for f in report["findings"] if f["check"] == "pg-cron"]
    return finding


@pytest.mark.slow
def test_a_login_that_may_not_see_pg_cron_is_not_told_it_is_not_loaded(dsn, baseline, requires_pg_cron):
    """pg_cron's settings are superuser-only: hidden is not missing. The finding names the role."""
    finding = pg_cron_finding(doctor(as_user(dsn, DBA))[1])
    assert finding["message"] == (
        f"the sweep's pg_cron job was not checked: pg_cron is loaded, but {DBA} may not read its setting "
        "cron.database_name (superusers and members of pg_read_all_settings only)"
    )
    assert finding["fix"] == (
        "connect as a login in memgov_admin, which reads it through memgov.cron_settings() "
        f"(a superuser grants the role: GRANT memgov_admin TO {DBA}); or run memgov doctor as a superuser"
    )


@pytest.mark.slow
def test_a_memgov_admin_login_is_told_the_grant_pg_cron_needs(dsn, admin, baseline, requires_pg_cron):
    cron_db = admin.execute("SHOW cron.database_name").fetchone()[0]
    code, report = doctor(as_user(dsn, ADMIN))
    finding = pg_cron_finding(report)
    assert code == 1 and "not loaded" not in finding["message"]
    assert finding["message"] == (
        f"the sweep's pg_cron job was not checked: {ADMIN} may not use pg_cron: no USAGE on its schema cron "
        f"in database {cron_db}"
    )
    assert finding["fix"].startswith("a superuser grants it there: GRANT USAGE ON SCHEMA cron TO memgov_admin")
    # with it, the admin sees pg_cron, though not the superuser's job (pg_cron's row security)
    with psycopg.connect(conninfo.make_conninfo(dsn, dbname=cron_db), autocommit=True) as cron:
        cron.execute("GRANT USAGE ON SCHEMA cron TO memgov_admin")
        try:
            finding = pg_cron_finding(doctor(as_user(dsn, ADMIN))[1])
        finally:
            cron.execute("REVOKE USAGE ON SCHEMA cron FROM memgov_admin")
    assert finding["message"].startswith(f"no pg_cron job (visible to {ADMIN}) runs memgov.run_maintenance()")


@pytest.mark.slow
def test_a_database_without_memgov_is_one_line(empty_dsn):
    assert_one_line_error(run_memgov("doctor", "--dsn", empty_dsn), "memgov migrate")


def test_the_public_api_names_exist(admin):
    """Every allowlisted signature is a function of the engine: a rename shows up here."""
    admin.execute("SET search_path = pg_catalog")
    existing = {
        r[0]
        for r in admin.execute(
            "SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'memgov'::regnamespace"
        ).fetchall()
    }
    admin.execute("RESET search_path")
    assert set(REVIEWER_API) - existing == set(), sorted(existing)
    assert set(WRITER_API) <= set(REVIEWER_API)


EXPORTER = "doctor_exporter"  # a login named like postgres_exporter's
EXPORTER2 = "doctor_prometheus"


def exporter_findings(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["severity"], f["subject"], f["fix"]) for f in report["findings"] if f["check"] == "exporter-role"]


@pytest.mark.slow
def test_the_exporter_role_without_pg_monitor_is_a_warning(dsn, admin, baseline):
    """Named (--exporter-role, MEMGOV_EXPORTER_ROLE) or, when exactly one login looks like an
    exporter's, guessed: not in pg_monitor is a warning; none or several: a note, nothing checked."""
    [(severity, _, fix)] = exporter_findings(doctor(dsn)[1])
    assert severity == "info" and "--exporter-role" in fix  # nobody looks like an exporter here
    # named: the DBA login is not in pg_monitor
    grant = f"GRANT pg_monitor TO {DBA}"
    code, report = doctor(dsn, "--exporter-role", DBA)
    assert code == 1 and exporter_findings(report) == [("warning", DBA, grant)]
    result = run_memgov("doctor", "--dsn", dsn, "--json", env={"MEMGOV_EXPORTER_ROLE": DBA})
    assert exporter_findings(json.loads(result.stdout)) == [("warning", DBA, grant)]
    code, report = doctor(dsn, "--exporter-role", "doctor_no_such_role")
    assert exporter_findings(report)[0][:2] == ("warning", "doctor_no_such_role")
    try:
        # guessed: the one login whose name says exporter
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(EXPORTER)))
        code, report = doctor(dsn)
        assert code == 1 and exporter_findings(report) == [("warning", EXPORTER, f"GRANT pg_monitor TO {EXPORTER}")]
        admin.execute(sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(EXPORTER)))
        assert exporter_findings(doctor(dsn)[1]) == []
        # two of them: which one is the exporter's is not guessed
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(EXPORTER2)))
        [(severity, _, fix)] = exporter_findings(doctor(dsn)[1])
        assert severity == "info" and "--exporter-role" in fix
        assert exporter_findings(doctor(dsn, "--exporter-role", EXPORTER)[1]) == []
    finally:
        for role in (EXPORTER, EXPORTER2):
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    assert keys(doctor(dsn)[1]) == baseline


@pytest.mark.slow
def test_a_standby_logger_the_primary_does_not_answer_is_reported(dsn, admin, baseline):
    """Set up towards a port where nothing listens: from the primary itself a note (its standbys
    may reach it another way); removed, the database is as before. (On a standby: an error, and
    a standby's pg_cron jobs: tests/db/test_standby_reads.py, which builds one.)"""
    login = "doctor_standby_log"
    try:
        done = run_memgov(
            "standby-logger", "setup", "--primary-dsn", "host=127.0.0.1 port=1 dbname=nowhere", "--login", login,
            "--dsn", dsn,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        _, report = doctor(dsn)
        [finding] = [f for f in report["findings"] if f["check"] == "standby-logger"]
        assert finding["severity"] == "info" and "127.0.0.1:1/nowhere does not answer" in finding["message"]
        # dblink callable by everyone would hand clients memgov's connection: a warning
        admin.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA memgov_dblink TO PUBLIC")
        found = {(f["severity"], f["fix"]) for f in doctor(dsn)[1]["findings"] if f["check"] == "standby-logger"}
        assert ("warning", "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA memgov_dblink FROM PUBLIC") in found
    finally:
        removed = run_memgov("standby-logger", "remove", "--dsn", dsn)
        assert removed.returncode == 0, removed.stderr
        admin.execute("DROP EXTENSION IF EXISTS dblink")
        admin.execute("DROP SCHEMA IF EXISTS memgov_dblink")
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(login)))
    assert keys(doctor(dsn)[1]) == baseline
