"""`memgov doctor` against real PostgreSQL: a freshly migrated database, what each login is
told, the exporter and the standby logger. One bad configuration at a time is
tests/db/test_doctor_cases.py.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from memgov_pg.doctor import REVIEWER_API, WRITER_API
from tests import doctor_helpers
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.doctor_helpers import ADMIN, DBA, GONE, WRITER, doctor, keys, signature

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
admin = doctor_helpers.admin
baseline = doctor_helpers.baseline
dsn = doctor_helpers.dsn


def as_user(dsn: str, user: str) -> str:
    return conninfo.make_conninfo(**(conninfo.conninfo_to_dict(dsn) | {"user": user}))  # type: ignore[arg-type]


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


@pytest.mark.slow
def test_a_scheduled_database_is_clean(dsn, baseline, requires_pg_cron):
    assert {k[1] for k in baseline} == {"info"}, sorted(baseline)
    result = run_memgov("doctor", "--dsn", dsn)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.strip().splitlines()
    assert lines[-1].endswith("is clean (2 notes)"), lines
    assert lines[0].startswith("info: [tenant-binding] tenant binding is not in use")


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
